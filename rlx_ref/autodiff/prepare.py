"""The pre-pass RLX runs before autodiff: rewrite what the rules tables do not cover.

1. ElementwiseRegions are unfused back into their steps;
2. If becomes ``Where(predicate, then, else)`` with both branches inlined;
3. While is unrolled to ``max_iterations`` steps, each guarded by the running predicate
   (a While without a cap cannot be differentiated: an error says so);
4. a CustomFn without a rule body for the transform is inlined (with one, it stays and
   its ``vjp_body``/``jvp_body`` is the rule);
5. the sequence kinds (SelectiveScan, Mamba2, GatedDeltaNet, Lstm, Gru, Rnn) become their
   loop form (``ops._sequence_scan.as_scan``), a Scan whose body the rules differentiate;
6. every kind that has an exact decomposition but no rule (DotGeneral, Slice, Pad, Tile,
   Trilu, the backward kinds, ScanBackward, ...) is decomposed, so a gradient graph can be
   differentiated again;
7. every Scan gets a trajectory and its broadcast operands become per-step rows
   (``prepare_scan.py``): its rule differentiates the body.

Each step returns a new verified graph.
"""
from __future__ import annotations

from ..ir.graph import Graph
from ..ir.verify import verify_or_raise
from ..passes._rewrite import Rebuilder, with_bodies
from ..passes.decompose import DECOMPOSITIONS, decompose
from ..passes.unfuse import unfuse_elementwise
from ._build import AutodiffError, cast, scalar
from .prepare_scan import scans_for_ad


def inline(g: Graph, body: Graph, operands, named=None) -> list:
    """Copy ``body`` into ``g``: its Inputs (node order) bind to ``operands``, except those
    whose name is in ``named`` (name → id); returns the ids of its outputs."""
    named = named or {}
    ids, k = {}, 0
    for n in body.nodes:
        if n.kind == "Input" and n.attrs.name in named:
            ids[n.id] = named[n.attrs.name]
        elif n.kind == "Input":
            ids[n.id] = operands[k]
            k += 1
        else:
            ids[n.id] = g.add_node(n.op, [ids[i] for i in n.inputs], n.shape, n.name)
    return [ids[o] for o in body.outputs]


def _truth(g: Graph, pred: int) -> int:
    """A bool ``[1]``-broadcastable predicate: non-zero (NaN too) is true."""
    p = g.reshape(pred, (1,)) if g.shape(pred).dims != (1,) else pred
    if g.shape(p).dtype.is_bool:
        return p
    return g.op("Compare", (p, scalar(g, 0, g.shape(p).dtype)), op="Ne")


def _if_to_where(g: Graph, node, ins) -> int:
    pred, caps = ins[0], ins[1:]
    then = inline(g, node.attrs.then_branch, caps)[0]
    other = inline(g, node.attrs.else_branch, caps)[0]
    return g.op("Where", (_truth(g, pred), then, other))


def _unroll_while(g: Graph, node, ins) -> int:
    a = node.attrs
    if a.max_iterations is None:
        raise AutodiffError(f"at %{node.id} (While): a loop without max_iterations cannot be "
                            "differentiated; set max_iterations (RLX unrolls to it)")
    state, live = list(ins), None
    for _ in range(a.max_iterations):
        go = _truth(g, inline(g, a.cond, state)[0])
        live = go if live is None else g.op("Where", (live, go, scalar(g, False, g.shape(go).dtype)))
        nxt = inline(g, a.body, state)
        state = [g.op("Where", (live, cast(g, n, g.shape(s).dtype), s))
                 for n, s in zip(nxt, state)]
    return state[0]


def _rewrite_control(graph: Graph, keep_rule: str) -> Graph:
    """One rebuild: If, While and rule-less CustomFn nodes replaced by their inlining."""
    rb = Rebuilder(graph)
    changed = False
    for node in graph.nodes:
        op = with_bodies(node, lambda body: _rewrite_control(body, keep_rule))
        if node.kind == "If":
            rb.map(node.id, _if_to_where(rb.new, node, rb.inputs(node)))
        elif node.kind == "While":
            rb.map(node.id, _unroll_while(rb.new, node, rb.inputs(node)))
        elif node.kind == "CustomFn" and getattr(node.attrs, keep_rule) is None:
            rb.map(node.id, inline(rb.new, node.attrs.fwd_body, rb.inputs(node))[0])
        else:
            changed |= op is not node.op
            rb.copy(node, op)
            continue
        changed = True
    return rb.finish() if changed else graph


def _sequences_as_scans(graph: Graph) -> Graph:
    """One rebuild: each sequence kind replaced by the inlining of its loop form."""
    from ..ops._sequence_scan import as_scan
    from .vjp import LOOP_FORM_KINDS

    if not any(n.kind in LOOP_FORM_KINDS for n in graph.nodes):
        return graph
    rb = Rebuilder(graph)
    for node in graph.nodes:
        if node.kind in LOOP_FORM_KINDS:
            shapes = [graph.shape(i) for i in node.inputs]
            body = as_scan(node.kind, shapes, node.attrs)
            rb.map(node.id, inline(rb.new, body, rb.inputs(node))[0])
        else:
            rb.copy(node, node.op)
    return rb.finish()


def decomposable_kinds() -> set:
    """Kinds with a decomposition and no VJP rule: rewritten before differentiation."""
    from .vjp import NON_DIFFERENTIABLE, VJP, _load_rules

    _load_rules()
    return {k for k in DECOMPOSITIONS if k not in VJP and k not in NON_DIFFERENTIABLE}


def prepare_for_ad(graph: Graph, keep_rule: str = "vjp_body") -> Graph:
    """``graph`` rewritten so every node is covered by a rule (see the module doc)."""
    verify_or_raise(graph)
    g = unfuse_elementwise(graph, None, force=True)
    g = _rewrite_control(g, keep_rule)
    g = _sequences_as_scans(g)
    g = decompose(g, None, kinds=decomposable_kinds())
    g = scans_for_ad(g)
    verify_or_raise(g)
    return g
