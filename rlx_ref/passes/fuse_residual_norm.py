"""RLX's ``FuseResidualLN`` and ``FuseResidualRmsNorm``: ``Add(x, residual) → LayerNorm``
(or RmsNorm) becomes FusedResidualLN (FusedResidualRmsNorm) with ``has_bias`` false and
the norm's eps, emitted where the norm was; operands (x, residual, gamma, beta).

As in RLX: the Add is read only by the norm and is no graph output. RLX ignores the norm's
axis; here the norm must normalize the last axis (the fused kinds do), and the fused node
must pass its kind's rules (residual has x's shape, C3), else the pair is left alone.
"""
from __future__ import annotations

from ._fuse import Match, fusion_pass, gated, make_op, use_counts

FUSED_NORM = {"LayerNorm": "FusedResidualLN", "RmsNorm": "FusedResidualRmsNorm"}


def _matches(graph, table, norm_kind: str) -> list:
    uses = use_counts(graph)
    found = []
    for node in graph.nodes:
        if node.kind != norm_kind:
            continue
        add = graph.nodes[node.inputs[0]]
        if add.kind != "Binary" or add.attrs.op != "Add" or uses[add.id] != 1:
            continue
        if node.attrs.axis % max(node.shape.rank, 1) != node.shape.rank - 1:
            continue
        op = make_op(FUSED_NORM[norm_kind], has_bias=False, eps=node.attrs.eps)
        operands = (add.inputs[0], add.inputs[1], node.inputs[1], node.inputs[2])
        if gated(graph, table, op, operands, node.shape):
            found.append(Match(node.id, (add.id,), [(op, operands, node.shape)]))
    return found


@fusion_pass("fuse_residual_ln")
def fuse_residual_ln(graph, table) -> list:
    """Matches of ``Add(x, residual) → LayerNorm(axis -1)``."""
    return _matches(graph, table, "LayerNorm")


@fusion_pass("fuse_residual_rms_norm")
def fuse_residual_rms_norm(graph, table) -> list:
    """Matches of ``Add(x, residual) → RmsNorm(axis -1)``."""
    return _matches(graph, table, "RmsNorm")


__all__ = ["FUSED_NORM", "fuse_residual_ln", "fuse_residual_rms_norm"]
