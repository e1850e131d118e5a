"""RLX's ``FuseConvBiasAct``: ``Conv → Add(channel bias) → [Relu]`` becomes one
FusedConvBiasAct (``has_residual`` false), emitted where the Conv was. And RLX's
``FuseConvAffineAct`` (below): a host-folded BatchNorm, ``Conv → Mul(scale) → Add(shift)
→ [Add(residual)] → Relu``, becomes ``FusedConvBiasAct(x, w · Reshape(scale, [C, 1, 1,
1]), shift[, residual])`` with Relu (a weight fold: near-exact, not bit-exact).

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

from ..ir.graph import Graph
from ..ir.shape import Shape
from ._fuse import Match, New, fusion_pass, gated, make_op, sole_reader, use_counts

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
    add = sole_reader(graph, uses, node.id)
    if not _is(add, "Binary", "Add"):
        return None
    other = add.inputs[1] if add.inputs[0] == node.id else add.inputs[0]
    c_out = graph.shape(node.inputs[1]).dims[0]
    bias = trace_channel_bias(graph, other, c_out, node.shape.rank)
    if bias is None:
        return None
    act, last = None, add
    a = sole_reader(graph, uses, add.id)
    if _is(a, "Activation"):
        if a.attrs.op not in FUSIBLE_ACTIVATIONS:
            return None           # RLX: bias-only fusion is no win; leave the chain
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


def _is(node, kind, op=None) -> bool:
    return node is not None and node.kind == kind and (op is None or node.attrs.op == op)


def _affine(graph, node, uses, table) -> Match | None:
    """RLX's ``match_conv_affine``: every link single-reader; scale and shift rank-1
    ``[C_out]`` under channel wrappers; the residual exactly the block's shape."""
    if node.kind != "Conv" or not cudnn_friendly(node.attrs):
        return None
    w = graph.shape(node.inputs[1])
    c_out, rank = w.dims[0], node.shape.rank
    mul = sole_reader(graph, uses, node.id)
    if not _is(mul, "Binary", "Mul"):
        return None
    other = mul.inputs[1] if mul.inputs[0] == node.id else mul.inputs[0]
    scale = trace_channel_bias(graph, other, c_out, rank)
    shift_add = sole_reader(graph, uses, mul.id) if scale is not None else None
    if not _is(shift_add, "Binary", "Add"):
        return None
    other = shift_add.inputs[1] if shift_add.inputs[0] == mul.id else shift_add.inputs[0]
    shift = trace_channel_bias(graph, other, c_out, rank)
    after = sole_reader(graph, uses, shift_add.id) if shift is not None else None
    absorbed, residual = [mul.id, shift_add.id], None
    if _is(after, "Binary", "Add"):
        residual = after.inputs[1] if after.inputs[0] == shift_add.id else after.inputs[0]
        if graph.shape(residual).dims != shift_add.shape.dims:
            return None
        absorbed.append(after.id)
        after = sole_reader(graph, uses, after.id)
    if not _is(after, "Activation", "Relu") or graph.shape(scale).dtype != w.dtype:
        return None
    absorbed.append(after.id)
    c = node.attrs
    op = make_op("FusedConvBiasAct", kernel_size=tuple(c.kernel_size), stride=tuple(c.stride),
                 padding=tuple(c.padding), dilation=tuple(c.dilation), groups=c.groups,
                 activation="Relu", has_residual=residual is not None)
    col = Shape((c_out, 1, 1, 1), w.dtype)
    extra = (residual,) if residual is not None else ()
    if not (table.supports("Reshape", w.dtype) and table.supports("Binary", w.dtype)):
        return None
    probe = Graph("probe")
    ids = [probe.add_node(make_op("Input", name=f"v{k}"), [], graph.shape(i))
           for k, i in enumerate((node.inputs[0], node.inputs[1], shift) + extra)]
    if not gated(probe, table, op, ids, after.shape):
        return None
    steps = [(make_op("Reshape", new_shape=(c_out, 1, 1, 1)), (scale,), col),
             (make_op("Binary", op="Mul"), (node.inputs[1], New(0)), w),
             (op, (node.inputs[0], New(1), shift) + extra, after.shape)]
    return Match(node.id, tuple(absorbed), steps)


@fusion_pass("fuse_conv_affine_act")
def fuse_conv_affine_act(graph, table) -> list:
    """Matches of ``Conv → Mul(scale) → Add(shift) → [Add(residual)] → Relu``."""
    uses = use_counts(graph)
    return [m for m in (_affine(graph, n, uses, table) for n in graph.nodes) if m]


__all__ = ["FUSIBLE_ACTIVATIONS", "cudnn_friendly", "fuse_conv_affine_act",
           "fuse_conv_bias_act", "trace_channel_bias"]
