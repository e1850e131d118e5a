"""Stacked transforms: ``nth_order_grad``, ``directional_nth_grad``, ``jacfwd``, ``jacrev``.

Each order differentiates the graph the previous order built: its backward kinds are
decomposed into differentiable primitives by the pre-pass, so any order works for every
kind with a rule. The Jacobians are materialized by running a JVP graph once per input
element (``jacfwd``) or a gradient graph once per output element (``jacrev``), as RLX's
runtime does before vmap.
"""
from __future__ import annotations

import numpy as np

from ..interpret import interpret
from ..ir.graph import Graph
from ..passes._rewrite import Rebuilder
from ._build import AutodiffError, expand, reduce_sum, scalar
from .jvp import PREFIX, jvp
from .reverse import SEED, grad


def _replace_input(graph: Graph, name: str, make) -> Graph:
    """``graph`` with its Input ``name`` replaced by ``make(new_graph)`` (a node id)."""
    rb = Rebuilder(graph)
    for n in graph.nodes:
        if n.kind == "Input" and n.attrs.name == name:
            rb.map(n.id, make(rb.new))
        else:
            rb.copy(n)
    return rb.finish()


def _leaf_id(g: Graph, name: str) -> int:
    return next(n.id for n in g.nodes if n.kind in ("Input", "Param") and n.attrs.name == name)


def _single_wrt(graph: Graph, wrt) -> str:
    if isinstance(wrt, (list, tuple)):
        if len(wrt) != 1:
            raise AutodiffError(f"higher-order transforms take one wrt, got {len(wrt)}")
        wrt = wrt[0]
    if not isinstance(wrt, str):
        node = graph.nodes[int(getattr(wrt, "id", wrt))]
        if node.kind not in ("Input", "Param"):
            raise AutodiffError(f"wrt %{node.id} must be an Input or Param, not {node.kind}")
        wrt = node.attrs.name
    return wrt


def nth_order_grad(graph: Graph, wrt, n: int) -> Graph:
    """The n-th derivative of the output with respect to ``wrt``: order k differentiates
    the sum of order k-1 (for an elementwise f, ``f⁽ⁿ⁾(x)`` elementwise; for a scalar
    output, the gradient when n = 1). Inputs are the graph's own (no seed)."""
    if n < 1:
        raise AutodiffError(f"nth_order_grad needs n >= 1, got {n}")
    name = _single_wrt(graph, wrt)
    g = graph
    for k in range(n):
        if k:
            out = g.outputs[0]
            g = g.copy()
            g.set_outputs([reduce_sum(g, out, range(g.shape(out).rank), keep_dim=False)])
        dt = g.shape(g.outputs[0]).dtype
        dims = g.shape(g.outputs[0]).dims
        g = _replace_input(grad(g, [name]), SEED,
                           lambda ng, dt=dt, dims=dims: expand(ng, scalar(ng, 1, dt), dims))
        g.name = f"{graph.name}_d{k + 1}"
    return g


def directional_nth_grad(graph: Graph, wrt, n: int) -> Graph:
    """The n-th directional derivative ``Dⁿf(x)[v, ..., v]`` along a new Input
    ``direction_<wrt>`` (nested JVPs that all push the same direction)."""
    if n < 1:
        raise AutodiffError(f"directional_nth_grad needs n >= 1, got {n}")
    name = _single_wrt(graph, wrt)
    direction = f"direction_{name}"
    g = graph
    for k in range(n):
        j = jvp(g, [name])
        j.set_outputs([j.outputs[-1]])
        if k == 0:
            node = j.nodes[_leaf_id(j, PREFIX + name)]
            node.op = type(node.op)("Input", type(node.op.attrs)(direction))
        else:
            j = _replace_input(j, PREFIX + name, lambda ng: _leaf_id(ng, direction))
        j.name = f"{graph.name}_dir{k + 1}"
        g = j
    return g


def _runner(graph: Graph, values: dict, run):
    params = {n.attrs.name for n in graph.param_nodes()}
    ins = {k: v for k, v in values.items() if k not in params}
    ps = {k: v for k, v in values.items() if k in params}
    if run is None:
        return lambda extra: interpret(graph, {**ins, **extra}, ps, float64=True)
    return lambda extra: run(graph, {**ins, **extra}, ps)


def jacfwd(graph: Graph, wrt, values: dict, run=None) -> np.ndarray:
    """The Jacobian ``[*out, *wrt]`` of the one output, one JVP run per wrt element.
    ``run(graph, inputs, params)`` runs a graph (default: the float64 oracle)."""
    name = _single_wrt(graph, wrt)
    j = jvp(graph, [name])
    call = _runner(j, values, run)
    x = np.asarray(values[name], np.float64)
    cols = []
    for i in range(x.size):
        e = np.zeros(x.size)
        e[i] = 1
        cols.append(np.asarray(call({PREFIX + name: e.reshape(x.shape)})[-1], np.float64))
    out_shape = cols[0].shape if cols else ()
    return np.stack([c.reshape(-1) for c in cols], -1).reshape(out_shape + x.shape) \
        if cols else np.zeros(x.shape)


def jacrev(graph: Graph, wrt, values: dict, run=None) -> np.ndarray:
    """The Jacobian ``[*out, *wrt]`` of the one output, one gradient run per output
    element (the seed ``d_output`` a unit vector)."""
    name = _single_wrt(graph, wrt)
    gg = grad(graph, [name])
    call = _runner(gg, values, run)
    seed = next(n for n in gg.nodes if n.kind == "Input" and n.attrs.name == SEED)
    out_shape = seed.shape.static_dims()
    rows = []
    for i in range(int(np.prod(out_shape, dtype=np.int64))):
        e = np.zeros(int(np.prod(out_shape, dtype=np.int64)))
        e[i] = 1
        rows.append(np.asarray(call({SEED: e.reshape(out_shape)})[0], np.float64))
    x_shape = np.shape(values[name])
    return np.stack(rows).reshape(tuple(out_shape) + tuple(x_shape))
