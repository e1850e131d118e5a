"""Forward mode: ``jvp(graph, tangent_for)`` and ``hvp(graph, wrt)``, as RLX.

``jvp`` adds one Input ``tangent_<name>`` per perturbed Input/Param (its shape and dtype)
and returns a graph whose outputs are ``[primals..., tangents...]``. Tangents are pushed
forward node by node; a symbolic zero is ``None`` (no node). The ``JVP`` table holds one
rule per kind (``jvp_rules.py``): ``rule(ctx, tangents) -> id | None``. A kind with a VJP
rule but no JVP rule gets one derived from it: the VJP is linear in the cotangent, so the
JVP ``J·t`` is the gradient of ``<VJP(dy), t>`` with respect to ``dy`` (``derived``).
``hvp`` is forward over reverse: the JVP of ``grad_with_loss``.
"""
from __future__ import annotations

from typing import Callable

from ..ir.graph import Graph
from ..ir.verify import verify_or_raise
from ._build import (AutodiffError, add_all, binary, load_rule_modules, reduce_sum, scalar,
                     zeros)
from .prepare import inline, prepare_for_ad
from .vjp import NON_DIFFERENTIABLE, VjpContext, rule_for

JVP: dict[str, Callable] = {}
PREFIX = "tangent_"


def jvp_rule(*kinds: str):
    """Register the decorated function as the JVP rule of ``kinds``."""
    def deco(fn):
        for k in kinds:
            if k in JVP:
                raise ValueError(f"two JVP rules for {k}")
            JVP[k] = fn
        return fn
    return deco


def derived(ctx: VjpContext, tangents) -> int | None:
    """``J·t`` from the kind's VJP rule: build the node alone with its rule applied to a
    placeholder ``dy``, take the gradient of ``Σ <ct_i, t_i>`` with respect to ``dy`` (the
    VJP is linear in ``dy``, so any value of it gives ``J·t``), and inline that."""
    from .reverse import SEED, grad

    node = ctx.node
    loc = Graph(f"jvp_of_{node.kind}")
    ps = [loc.input(f"p{i}", s.dims, s.dtype) for i, s in enumerate(ctx.in_shapes)]
    y = loc.add_node(node.op, ps, node.shape)
    dy = loc.input("dy", node.shape.dims, node.shape.dtype)
    cts = list(rule_for(node.kind, ctx.where)(
        VjpContext(loc, node, tuple(ps), y, ctx.in_shapes, ctx.where,
                   frozenset(i for i, t in zip(node.inputs, tangents) if t is not None)), dy))
    terms, bind = [], {}
    for i, (ct, t) in enumerate(zip(cts, tangents)):
        if ct is None or t is None:
            continue
        ti = loc.input(f"t{i}", ctx.in_shapes[i].dims, ctx.in_shapes[i].dtype)
        bind[f"t{i}"] = t
        prod = binary(loc, "Mul", ct, ti)
        terms.append(reduce_sum(loc, prod, range(ctx.in_shapes[i].rank), keep_dim=False))
    if not terms:
        return None
    loc.set_outputs([add_all(loc, terms)])
    g = ctx.g
    bind.update({f"p{i}": x for i, x in enumerate(ctx.x)})
    bind["dy"] = zeros(g, node.shape)
    bind[SEED] = scalar(g, 1, loc.shape(loc.outputs[0]).dtype)
    return inline(g, grad(loc, ["dy"]), (), bind)[0]


def _resolve(graph: Graph, tangent_for) -> list:
    """(Input/Param node id, name) of each entry of ``tangent_for`` (names or ids)."""
    if isinstance(tangent_for, (str, int)):
        tangent_for = [tangent_for]
    leaves = {n.attrs.name: n.id for n in graph.nodes if n.kind in ("Input", "Param")}
    out = []
    for t in tangent_for:
        nid = leaves.get(t) if isinstance(t, str) else int(getattr(t, "id", t))
        if nid is None or not 0 <= nid < len(graph.nodes) or \
                graph.nodes[nid].kind not in ("Input", "Param"):
            raise AutodiffError(f"tangent_for {t!r} is not an Input or Param of "
                                f"@{graph.name}; it has {sorted(leaves) or 'none'}")
        out.append((nid, graph.nodes[nid].attrs.name))
    return out


def jvp(graph: Graph, tangent_for) -> Graph:
    """The forward-mode graph: outputs ``[primals..., tangents...]`` (see the module doc)."""
    _load()
    names = [name for _, name in _resolve(graph, tangent_for)]
    fwd = prepare_for_ad(graph, keep_rule="jvp_body")
    out = Graph(f"{graph.name}_jvp")
    for n in fwd.nodes:
        out.add_node(n.op, n.inputs, n.shape, n.name)
    tan: dict = {}
    for n in fwd.nodes:
        if n.kind in ("Input", "Param") and n.attrs.name in names:
            if not (n.shape.dtype.is_float or n.shape.dtype.is_complex):
                raise AutodiffError(f"tangent_for {n.attrs.name!r} has dtype "
                                    f"{n.shape.dtype}; only float values have tangents")
            tan[n.id] = out.input(PREFIX + n.attrs.name, n.shape.dims, n.shape.dtype)
    for n in fwd.nodes:
        ts = [tan.get(i) for i in n.inputs]
        if n.kind in NON_DIFFERENTIABLE or all(t is None for t in ts) or not (
                n.shape.dtype.is_float or n.shape.dtype.is_complex):
            continue
        where = f"at %{n.id} ({n.kind})"
        ctx = VjpContext(out, n, n.inputs, n.id, tuple(fwd.nodes[i].shape for i in n.inputs),
                         where, frozenset(i for i, t in zip(n.inputs, ts) if t is not None))
        t = (JVP.get(n.kind) or derived)(ctx, ts)
        if t is not None and out.shape(t) != n.shape:
            raise AutodiffError(f"{where}: its JVP rule gave a tangent of {out.shape(t)}, "
                                f"expected {n.shape}")
        if t is not None:
            tan[n.id] = t
    outs = list(fwd.outputs)
    outs += [tan.get(o) if tan.get(o) is not None else zeros(out, fwd.nodes[o].shape)
             for o in fwd.outputs]
    out.set_outputs(outs)
    verify_or_raise(out)
    return out


def hvp(graph: Graph, wrt) -> Graph:
    """Hessian-vector products, forward over reverse (RLX's ``hvp``): inputs gain
    ``d_output`` and ``tangent_<name>`` per wrt; outputs ``[loss, grads..., <grad, v>,
    H·v...]``."""
    from .reverse import grad_with_loss

    names = [name for _, name in _resolve(graph, wrt)]
    return jvp(grad_with_loss(graph, names), names)


def _load() -> None:
    load_rule_modules("jvp_rules")
