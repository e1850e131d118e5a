"""RLX's ``LowerControlFlow``: If → Where over both branches inlined; While → a bounded
unroll to ``max_iterations``.

**If** (RLX's ``inline_if``): both branches are inlined with the captures bound to their
Inputs, and the node becomes ``Where(predicate, then_out, else_out)``; a predicate whose
dims differ from the result's is first Reshaped to the result's rank (leading 1s) and
Expanded to its shape, since RLX's Where kernels want equal shapes. Both branches always
run.

**While** (RLX's ``unroll_while``): ``active = Constant 1.0 [1] f32``; then ``max_iterations``
times: inline ``cond`` on the carried values, turn its output into an f32 mask (a bool goes
through i32 first, as RLX does: its CPU Cast bool → f32 copies bytes), ``active = active ·
mask``, inline ``body``, and each carried value becomes ``Where(Expand(active), body_out,
carried)``. A loop whose cond goes false stops changing, so the result is the oracle's.
A While without ``max_iterations`` cannot be unrolled; RLX panics, here it is left in
place (legalization then names it) with RLX's message in the pass log.

When it applies: RLX runs it first in every fusion pipeline. Here ``lower="auto"`` (the
default) lowers the If and While nodes the backend does not claim, keeping a claimed node
for the backend's own executor, because lowering changes results: an untaken branch and
the steps after cond went false are evaluated anyway (an integer division by zero there
now fails; a NaN or inf there is discarded by Where but still computed). ``lower=True``
lowers every one (RLX), ``False`` none.
"""
from __future__ import annotations

import numpy as np

from ..ir.dtype import DType
from ..ir.graph import Graph
from ..ir.shape import Shape
from ._inline import inline_body
from ._rewrite import PassLog, Rebuilder, SupportTable, graph_pass, with_bodies
from .decompose import constant

UNBOUNDED_WHILE = ("LowerControlFlow: Op::While requires max_iterations = Some(N) for "
                   "unrolling. Either set a bounded max_iterations on the forward graph, or "
                   "use the dynamic `rlx_runtime::subgraph::run_while` helper.")


def expand_to(g: Graph, src: int, target: Shape) -> int:
    """``src`` broadcast to ``target``'s dims: Reshape to its rank if lower, then Expand
    (unchanged when the dims already agree)."""
    s = g.shape(src)
    if tuple(s.dims) == tuple(target.dims):
        return src
    if s.rank < target.rank:
        src = g.reshape(src, (1,) * (target.rank - s.rank) + tuple(s.dims))
    return g.op("Expand", (src,), target_shape=tuple(target.dims))


def inline_if(g: Graph, a, shape: Shape, ins: list) -> int:
    """Both branches inlined, then ``Where(expanded predicate, then, else)``."""
    captures = ins[1:]
    then_out = inline_body(g, a.then_branch, captures)[0]
    else_out = inline_body(g, a.else_branch, captures)[0]
    pred = expand_to(g, ins[0], shape)
    return g.op("Where", (pred, then_out, else_out))


def _f32_mask(g: Graph, c: int) -> int:
    """The cond's one element as a [1] f32 mask (RLX keeps the cond's dims; a one-element
    cond of another rank is reshaped here so the mask always Expands to the carries)."""
    if tuple(g.shape(c).dims) != (1,):
        c = g.reshape(c, (1,))
    dt = g.shape(c).dtype
    if dt is DType.F32:
        return c
    if dt is DType.BOOL:
        c = g.cast(c, DType.I32)
    return g.cast(c, DType.F32)


def unroll_while(g: Graph, a, shape: Shape, ins: list) -> int:
    """``max_iterations`` guarded copies of cond and body; the first carried value."""
    active = constant(g, np.ones(1, np.float32), DType.F32)
    carried = list(ins)
    for _ in range(a.max_iterations):
        mask = _f32_mask(g, inline_body(g, a.cond, carried)[0])
        active = g.mul(active, mask)
        outs = inline_body(g, a.body, carried)
        carried = [g.op("Where", (expand_to(g, active, g.shape(prev)), out, prev))
                   for out, prev in zip(outs, carried)]
    return carried[0]


def _wanted(node, table: SupportTable, lower) -> bool:
    if node.kind not in ("If", "While"):
        return False
    if lower == "auto":
        return not table.supports_node(node)
    return bool(lower)


def _lower(graph: Graph, table: SupportTable, lower, log) -> Graph:
    rb = Rebuilder(graph)
    changed = False
    for node in graph.nodes:
        op = with_bodies(node, lambda b: _lower(b, table, lower, log))
        changed |= op is not node.op
        if _wanted(node, table, lower):
            if node.kind == "While" and op.attrs.max_iterations is None:
                if log is not None:
                    log.note("lower_control_flow", f"@{graph.name} %{node.id} kept: "
                                                   f"{UNBOUNDED_WHILE}")
            else:
                start = len(rb.new.nodes)
                fn = inline_if if node.kind == "If" else unroll_while
                out = fn(rb.new, op.attrs, node.shape, rb.inputs(node))
                rb.new.nodes[out].name = node.name
                rb.map(node.id, out)
                changed = True
                if log is not None:
                    made = sorted({n.kind for n in rb.new.nodes[start:]})
                    how = ("inlined both branches under a Where" if node.kind == "If"
                           else "unrolled to max_iterations under Where masks")
                    log.rewrote(node.kind, how)
                    log.made(made, node.kind)
                    log.note("lower_control_flow", f"@{graph.name} %{node.id} {node.kind} "
                                                   f"-> {len(rb.new.nodes) - start} ops")
                continue
        rb.copy(node, op)
    return rb.finish() if changed else graph


@graph_pass("lower_control_flow")
def lower_control_flow(graph: Graph, supported: SupportTable | None = None, lower="auto",
                       log: PassLog | None = None) -> Graph:
    """``graph`` with If and While lowered to primitive ops (which ones: see the module
    doc; with no ``supported`` table, "auto" lowers every one)."""
    if lower not in ("auto", True, False):
        raise ValueError(f"lower must be 'auto', True or False, got {lower!r}")
    table = supported if supported is not None else SupportTable({"__none__": "all"})
    return _lower(graph, table, lower, log)


__all__ = ["UNBOUNDED_WHILE", "expand_to", "inline_if", "lower_control_flow",
           "unroll_while"]
