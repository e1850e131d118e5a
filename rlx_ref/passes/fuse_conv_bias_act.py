"""RLX's ``FuseConvBiasAct``: ``Conv → Add(channel bias) → [Relu]`` becomes one
FusedConvBiasAct (``has_residual`` false), emitted where the Conv was.

As in RLX: only cuDNN-friendly convs fuse (2-D kernel, both sides > 1, groups 1); the
Conv has one reader, an Add; the Add's other operand is the rank-1 ``[C_out]`` bias seen
through at least one and at most four Reshape/Expand wrappers (a bare rank-1 operand would
broadcast along the width, not the channels); a single Relu reader folds in, while a
single reader that is any other Activation makes the whole chain stay unfused. RLX accepts
any wrappers; here each must keep the values on the channel axis (a Reshape to a
``[1, C, 1, 1]``-style shape, an Expand of one), so the fused op computes what the chain
did. The wrappers themselves stay (DCE drops them when nothing else reads them).
"""
from __future__ import annotations

from ._fuse import Match, fusion_pass, gated, make_op, use_counts

FUSIBLE_ACTIVATIONS = frozenset({"Relu"})


def cudnn_friendly(a) -> bool:
    ks = tuple(a.kernel_size)
    return a.groups == 1 and len(ks) == 2 and ks[0] > 1 and ks[1] > 1


def _channel_form(dims, rank: int, c_out: int) -> bool:
    """``dims``, right-aligned to ``rank``, are 1 everywhere but ``c_out`` on axis 1."""
    if len(dims) > rank:
        return False
    full = (1,) * (rank - len(dims)) + tuple(dims)
    return full[1] == c_out and all(d == 1 for i, d in enumerate(full) if i != 1)


def trace_channel_bias(graph, nid: int, c_out: int, rank: int):
    """The rank-1 ``[C_out]`` bias under 1..4 channel-preserving wrappers, or None."""
    chain = []
    for _ in range(4):
        n = graph.nodes[nid]
        if n.kind not in ("Expand", "Reshape"):
            break
        chain.append(n)
        nid = n.inputs[0]
    s = graph.shape(nid)
    if not chain or s.rank != 1 or s.dims[0] != c_out:
        return None
    for n in chain:       # the Reshapes land on the channel axis; Expands broadcast one
        src = graph.shape(n.inputs[0]).dims
        if n.kind == "Reshape" and not _channel_form(n.shape.dims, rank, c_out):
            return None
        if n.kind == "Expand" and not _channel_form(src, rank, c_out):
            return None
    return nid


def _match(graph, node, uses, table) -> Match | None:
    if node.kind != "Conv" or not cudnn_friendly(node.attrs):
        return None
    users = graph.users(node.id)
    if uses[node.id] != 1 or len(users) != 1:
        return None
    add = graph.nodes[users[0]]
    if add.kind != "Binary" or add.attrs.op != "Add":
        return None
    other = add.inputs[1] if add.inputs[0] == node.id else add.inputs[0]
    c_out = graph.shape(node.inputs[1]).dims[0]
    bias = trace_channel_bias(graph, other, c_out, node.shape.rank)
    if bias is None:
        return None
    act, last = None, add
    add_users = graph.users(add.id)
    if uses[add.id] == 1 and len(add_users) == 1:
        a = graph.nodes[add_users[0]]
        if a.kind == "Activation":
            if a.attrs.op not in FUSIBLE_ACTIVATIONS:
                return None       # RLX: bias-only fusion is no win; leave the chain
            act, last = a, a
    c = node.attrs
    op = make_op("FusedConvBiasAct", kernel_size=tuple(c.kernel_size), stride=tuple(c.stride),
                 padding=tuple(c.padding), dilation=tuple(c.dilation), groups=c.groups,
                 activation=act.attrs.op if act else None, has_residual=False)
    operands = (node.inputs[0], node.inputs[1], bias)
    if not gated(graph, table, op, operands, last.shape):
        return None
    return Match(node.id, (add.id,) + ((act.id,) if act else ()), [(op, operands, last.shape)])


@fusion_pass("fuse_conv_bias_act")
def fuse_conv_bias_act(graph, table) -> list:
    """Matches of ``Conv → Add(channel bias) → [Relu]``."""
    uses = use_counts(graph)
    return [m for m in (_match(graph, n, uses, table) for n in graph.nodes) if m]


__all__ = ["FUSIBLE_ACTIVATIONS", "cudnn_friendly", "fuse_conv_bias_act",
           "trace_channel_bias"]
