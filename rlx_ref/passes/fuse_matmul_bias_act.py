"""RLX's ``FuseMatMulBiasAct``: ``MatMul → Add(bias) → [Gelu | Silu]`` becomes one
FusedMatMulBiasAct, emitted where the MatMul was.

As in RLX: the weight (MatMul operand 1) is f32 (f64 here too: the kind's C2); the MatMul
is read only by the Add; the Add's other operand is an exactly rank-1 bias as wide as the
product's last dim (a scalar or any other broadcast is declined); the Activation is folded
only when it is the Add's only reader and is Gelu or Silu (RLX's
``fusible_mm_bias_epilogue_activation``), otherwise the bias-only form fuses and the
activation stays. Beyond RLX: a graph output counts as a use, so a value the caller reads
is never fused away.
"""
from __future__ import annotations

from ._fuse import Match, fusion_pass, gated, make_op, sole_reader, use_counts

EPILOGUE_ACTIVATIONS = frozenset({"Gelu", "Silu"})


def match_matmul_bias_act(graph, node, uses, table) -> Match | None:
    """The match anchored at MatMul ``node``, or None."""
    if node.kind != "MatMul" or str(graph.shape(node.inputs[1]).dtype) not in ("f32", "f64"):
        return None
    add = sole_reader(graph, uses, node.id)
    if add is None or add.kind != "Binary" or add.attrs.op != "Add":
        return None
    bias = add.inputs[1] if add.inputs[0] == node.id else add.inputs[0]
    b, mm = graph.shape(bias), graph.shape(node.id)
    if b.rank != 1 or mm.rank == 0 or b.dims[-1] != mm.dims[-1]:
        return None
    act, last = None, add
    a = sole_reader(graph, uses, add.id)
    if a is not None and a.kind == "Activation" and a.attrs.op in EPILOGUE_ACTIVATIONS:
        act, last = a, a
    op = make_op("FusedMatMulBiasAct", activation=act.attrs.op if act else None)
    operands = (node.inputs[0], node.inputs[1], bias)
    if not gated(graph, table, op, operands, last.shape):
        return None
    absorbed = (add.id,) + ((act.id,) if act else ())
    return Match(node.id, absorbed, [(op, operands, last.shape)])


@fusion_pass("fuse_matmul_bias_act")
def fuse_matmul_bias_act(graph, table) -> list:
    """Matches of ``MatMul → Add(rank-1 bias) → [Gelu|Silu]``."""
    uses = use_counts(graph)
    found, taken = [], set()
    for node in graph.nodes:
        if node.id in taken:
            continue
        m = match_matmul_bias_act(graph, node, uses, table)
        if m is not None:
            taken |= m.members()
            found.append(m)
    return found


__all__ = ["EPILOGUE_ACTIVATIONS", "fuse_matmul_bias_act", "match_matmul_bias_act"]
