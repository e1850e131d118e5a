"""RLX's ``FuseSwiGLU`` and ``FuseSwiGLUDualMatmul``: the SwiGLU gate into FusedSwiGLU.

``fuse_swiglu``: ``Mul(Narrow(cat, 0, N), Silu(Narrow(cat, N, N)))`` (either Mul operand
order) becomes ``FusedSwiGLU(cat)``, emitted where the Mul was; with the halves swapped
(gate in ``[0, N)``) ``gate_first`` is set. As in RLX: both Narrows read the same tensor on
the same axis with the same length, each Narrow and the Silu have one reader, ``cat`` may
have others. RLX accepts any axis and does not check that the halves cover it; here the
axis is the last one and the fused node's shape rule must reproduce the Mul's shape.

``fuse_swiglu_dual_matmul``: ``Mul(Silu(MatMul(x, wg)), MatMul(x, wu))`` becomes
``FusedSwiGLU(MatMul(x, Concat(wu, wg, axis 1)))`` (up weights first, ``gate_first``
false). As in RLX the Silu has one reader and both MatMuls read the same x; RLX drops both
MatMuls without looking at their other readers, so here each must be read only once, and
both weights are rank-2 with one K.
"""
from __future__ import annotations

from ..ir.shape import Shape
from ._fuse import Match, New, fits, fusion_pass, gated, make_op, use_counts


def _silu_side(graph, mul):
    """``(other operand, silu node)`` of a Mul with a Silu operand (rhs checked first)."""
    lhs, rhs = (graph.nodes[i] for i in mul.inputs)
    for other, silu in ((lhs, rhs), (rhs, lhs)):
        if silu.kind == "Activation" and silu.attrs.op == "Silu":
            return other, silu
    return None, None


def _swiglu(graph, node, uses, table) -> Match | None:
    if node.kind != "Binary" or node.attrs.op != "Mul":
        return None
    up, silu = _silu_side(graph, node)
    if silu is None:
        return None
    gate = graph.nodes[silu.inputs[0]]
    if up.kind != "Narrow" or gate.kind != "Narrow" or up.inputs[0] != gate.inputs[0]:
        return None
    u, g = up.attrs, gate.attrs
    rank = graph.shape(up.inputs[0]).rank
    if u.axis != g.axis or u.len != g.len or u.axis % max(rank, 1) != rank - 1:
        return None
    n = u.len
    gate_first = u.start == n and g.start == 0
    if not (gate_first or (u.start == 0 and g.start == n)):
        return None
    if not all(uses[i] == 1 for i in (up.id, gate.id, silu.id)):
        return None
    op = make_op("FusedSwiGLU", cast_to=None, gate_first=gate_first)
    operands = (up.inputs[0],)
    if not gated(graph, table, op, operands, node.shape):
        return None
    return Match(node.id, (up.id, gate.id, silu.id), [(op, operands, node.shape)])


@fusion_pass("fuse_swiglu")
def fuse_swiglu(graph, table) -> list:
    """Matches of ``Mul(Narrow(cat, lo), Silu(Narrow(cat, hi)))``."""
    uses = use_counts(graph)
    return [m for m in (_swiglu(graph, n, uses, table) for n in graph.nodes) if m]


def _dual(graph, node, uses, table) -> Match | None:
    if node.kind != "Binary" or node.attrs.op != "Mul":
        return None
    up, silu = _silu_side(graph, node)
    if silu is None:
        return None
    gate = graph.nodes[silu.inputs[0]]
    if up.kind != "MatMul" or gate.kind != "MatMul" or up.inputs[0] != gate.inputs[0]:
        return None
    if not all(uses[i] == 1 for i in (silu.id, up.id, gate.id)):
        return None
    wu, wg = graph.shape(up.inputs[1]), graph.shape(gate.inputs[1])
    if wu.rank != 2 or wg.rank != 2 or wu.dims[0] != wg.dims[0] or wu.dtype != wg.dtype:
        return None
    if not all(isinstance(d, int) for d in wu.dims + wg.dims):
        return None
    concat = make_op("Concat", axis=1)
    w_shape = Shape((wu.dims[0], wu.dims[1] + wg.dims[1]), wu.dtype)
    mm_dims = tuple(up.shape.dims[:-1]) + (wu.dims[1] + wg.dims[1],)
    mm_shape = Shape(mm_dims, up.shape.dtype)
    op = make_op("FusedSwiGLU", cast_to=None, gate_first=False)
    if not (table.supports("Concat", wu.dtype) and table.supports("MatMul", up.shape.dtype)
            and fits(graph, concat, (up.inputs[1], gate.inputs[1]), w_shape)):
        return None
    # the fused node reads the new MatMul: check it on a scratch graph holding that value
    if not _fused_fits(table, op, mm_shape, node.shape):
        return None
    x = up.inputs[0]
    steps = [(concat, (up.inputs[1], gate.inputs[1]), w_shape),
             (make_op("MatMul"), (x, New(0)), mm_shape),
             (op, (New(1),), node.shape)]
    return Match(node.id, (silu.id, up.id, gate.id), steps)


def _fused_fits(table, op, operand_shape: Shape, want: Shape) -> bool:
    from ..ir.graph import Graph

    g = Graph("probe")
    v = g.add_node(make_op("Input", name="v"), [], operand_shape)
    return gated(g, table, op, (v,), want)


@fusion_pass("fuse_swiglu_dual_matmul")
def fuse_swiglu_dual_matmul(graph, table) -> list:
    """Matches of ``Mul(Silu(MatMul(x, wg)), MatMul(x, wu))``."""
    uses = use_counts(graph)
    return [m for m in (_dual(graph, n, uses, table) for n in graph.nodes) if m]


__all__ = ["fuse_swiglu", "fuse_swiglu_dual_matmul"]
