"""RLX's ``FuseGatedResidual``: ``Add(x, Mul(Expand(gate), y))`` (any operand order)
becomes ``GatedResidual(x, y, gate)``, emitted where the Add was, reading the gate from
before its Expand so ``[B, 1, D]`` broadcasts without being materialized.

As in RLX: f32 only (RLX's kernels are f32; declined for f64 too, so the f64 graph keeps
its per-dtype Mul and Add); the Mul has one reader and is no graph output; y is not x and
has x's dims; the gate (after peeling one Expand, itself read once) is a strict
modulation broadcast: it broadcasts to x, ends in x's feature dim and is not x-sized.
"""
from __future__ import annotations

from ..ir.dtype import DType
from ..ir.shape import broadcast_dims
from ._fuse import Match, fusion_pass, gated, make_op, use_counts


def strict_modulation(gate, x) -> bool:
    """``gate`` broadcasts to ``x``, ends in its (static) feature dim, and is smaller."""
    if gate.rank == 0 or x.rank == 0 or gate.dims == x.dims:
        return False
    if not isinstance(x.dims[-1], int) or gate.dims[-1] != x.dims[-1]:
        return False
    try:
        return tuple(broadcast_dims(gate.dims, x.dims)) == tuple(x.dims)
    except Exception:  # noqa: BLE001  (not broadcastable)
        return False


def peel_expand(graph, nid: int):
    """``(source, expand id)`` through one Expand, else ``(nid, None)``."""
    n = graph.nodes[nid]
    return (n.inputs[0], nid) if n.kind == "Expand" else (nid, None)


def _classify(graph, uses, out, x, gate_side, y) -> Match | None:
    if y == x or graph.shape(y).dims != graph.shape(x).dims:
        return None
    gate, expand = peel_expand(graph, gate_side)
    if not strict_modulation(graph.shape(gate), graph.shape(x)):
        return None
    if expand is not None and uses[expand] != 1:
        return None
    return Match(out.id, (), [(make_op("GatedResidual"), (x, y, gate), out.shape)])


def _match(graph, out, uses, table) -> Match | None:
    if out.kind != "Binary" or out.attrs.op != "Add" or out.shape.dtype != DType.F32:
        return None
    for x, mul_id in ((out.inputs[0], out.inputs[1]), (out.inputs[1], out.inputs[0])):
        mul = graph.nodes[mul_id]
        if mul.kind != "Binary" or mul.attrs.op != "Mul" or uses[mul_id] != 1:
            continue
        p, q = mul.inputs
        for gate_side, y in ((p, q), (q, p)):
            m = _classify(graph, uses, out, x, gate_side, y)
            if m is None:
                continue
            _, expand = peel_expand(graph, gate_side)
            m.absorbed = (mul_id,) + ((expand,) if expand is not None else ())
            op, operands, shape = m.steps[0]
            # RLX takes the first form that matches the pattern; the gate decides after
            return m if gated(graph, table, op, operands, shape) else None
    return None


@fusion_pass("fuse_gated_residual")
def fuse_gated_residual(graph, table) -> list:
    """Matches of ``Add(x, Mul(Expand(gate), y))``."""
    uses = use_counts(graph)
    return [m for m in (_match(graph, n, uses, table) for n in graph.nodes) if m]


__all__ = ["fuse_gated_residual", "peel_expand", "strict_modulation"]
