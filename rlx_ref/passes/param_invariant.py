"""Weight-only compute, once: RLX's ``split_param_invariant`` (run-time weights) and
``param_bindings`` (weights known at compile time).

``split_param_invariant(graph)`` splits off the param-invariant closure: every node that
depends only on Params and Constants, never on an Input or a NONDETERMINISTIC node (RNG,
Sample: their cone is dynamic, as in RLX). The boundary is each computed invariant node
(not a leaf) that a dynamic node reads or that is a graph output. ``prepare`` is the
weight-only graph whose outputs are the boundary tensors (run it once per ``set_param``);
``main`` is the rest, reading each boundary tensor from an Input named ``__rlx_prep_<i>``.
Nodes neither graph needs are dropped (RLX's DCE); ``main`` keeps every original Input, its
interface. None when nothing computed is invariant (already folded graphs). Top level only.

``bind_params(graph, bindings)`` replaces each Param named in ``bindings`` by a Constant
holding that value (RLX bakes ``param_bindings`` before DCE and constant folding, which
then fold the weight-only compute away).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..interpret import Interpreter
from ..ir.graph import Graph, Op
from ..ops.leaves import ConstantAttrs, constant_bytes
from ..ops.opdef import Caps, get
from ._rewrite import PassLog, Rebuilder, graph_pass

PREFIX = "__rlx_prep_"
_LEAVES = ("Input", "Param", "Constant")


@dataclass
class HoistSplit:
    """RLX's ``HoistSplit``: the once-per-weights graph, the per-run graph, and the
    boundary between them."""

    prepare: Graph
    main: Graph
    boundary: list          # Input names of main, in prepare-output order
    prepare_params: set
    main_params: set

    def prepare_outputs(self, params: dict) -> dict:
        """Run ``prepare`` on the oracle: ``{boundary name: value}`` to feed ``main``."""
        outs = Interpreter(self.prepare).run({}, params)
        return dict(zip(self.boundary, outs))

    def run(self, inputs: dict, params: dict, prepared: dict | None = None) -> list:
        """``main``'s outputs on the oracle (``prepared`` from ``prepare_outputs``, computed
        here when not given)."""
        prepared = self.prepare_outputs(params) if prepared is None else prepared
        main_params = {k: v for k, v in params.items() if k in self.main_params}
        return Interpreter(self.main).run({**inputs, **prepared}, main_params)


def dynamic_nodes(graph: Graph) -> set:
    """Ids reachable from an Input or a NONDETERMINISTIC node (node order is topological)."""
    dyn: set = set()
    for n in graph.nodes:
        if n.kind == "Input" or Caps.NONDETERMINISTIC in get(n.kind).caps or \
                any(i in dyn for i in n.inputs):
            dyn.add(n.id)
    return dyn


def _prune(graph: Graph, keep_inputs: bool) -> Graph:
    """``graph`` without the nodes its outputs do not read (Inputs kept if asked)."""
    live: set = set()
    stack = list(graph.outputs)
    while stack:
        i = stack.pop()
        if i not in live:
            live.add(i)
            stack.extend(graph.nodes[i].inputs)
    rb = Rebuilder(graph)
    for n in graph.nodes:
        if n.id in live or (keep_inputs and n.kind == "Input"):
            rb.copy(n)
    return rb.finish()


def _params(graph: Graph) -> set:
    return {n.attrs.name for n in graph.param_nodes()}


def split_param_invariant(graph: Graph) -> HoistSplit | None:
    """The prepare / main split of ``graph``; None when there is nothing to hoist."""
    dyn = dynamic_nodes(graph)
    outs = set(graph.outputs)
    users = graph.users_map()
    ids = [n.id for n in graph.nodes if n.id not in dyn and n.kind not in _LEAVES
           and (n.id in outs or any(u in dyn for u in users[n.id]))]
    if not ids:
        return None
    names = [f"{PREFIX}{k}" for k in range(len(ids))]
    prepare = graph.copy()
    prepare.set_outputs(ids)
    prepare = _prune(prepare, keep_inputs=False)
    rb = Rebuilder(graph)
    by_id = dict(zip(ids, names))
    for n in graph.nodes:
        if n.id in by_id:
            rb.map(n.id, rb.new.input(by_id[n.id], n.shape.dims, n.shape.dtype))
        else:
            rb.copy(n)
    main = _prune(rb.finish(), keep_inputs=True)
    return HoistSplit(prepare, main, names, _params(prepare), _params(main))


@graph_pass("param_bindings")
def bind_params(graph: Graph, bindings: dict, log: PassLog | None = None) -> Graph:
    """``graph`` with every Param named in ``bindings`` a Constant of that value (converted
    to the Param's dtype; its element count must match)."""
    if not bindings:
        return graph
    rb = Rebuilder(graph)
    for n in graph.nodes:
        if n.kind == "Param" and n.attrs.name in bindings:
            value = np.asarray(bindings[n.attrs.name])
            dims = n.shape.static_dims()
            if value.size != int(np.prod(dims, dtype=np.int64)):
                raise ValueError(f"param_bindings[{n.attrs.name!r}] has {value.size} "
                                 f"elements; Param %{n.id} is {n.shape}")
            data = value.reshape(dims).astype(n.shape.dtype.np)
            rb.map(n.id, rb.new.add_node(Op("Constant", ConstantAttrs(constant_bytes(data))),
                                         [], n.shape, n.name, n.origin))
            if log is not None:
                log.rewrote("Param", "bound to a Constant (param_bindings)")
                log.note("param_bindings", f"%{n.id} Param {n.attrs.name!r} -> Constant")
            continue
        rb.copy(n)
    return rb.finish()


__all__ = ["HoistSplit", "PREFIX", "bind_params", "dynamic_nodes", "split_param_invariant"]
