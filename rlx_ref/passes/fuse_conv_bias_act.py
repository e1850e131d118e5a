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


# ── rlx_ref extension: the CPU gate ──────────────────────────────────────
# RLX fuses only what cuDNN runs well. A CPU conv kernel gains from every fold: the BN
# affine, the bias, a residual and the activation cost one pass over the output instead
# of up to five. So for CPU backends (``fuse_patterns.CPU_CONV_FUSION``) this pass runs
# before RLX's two and also takes 1×1 and depthwise convs, an optional conv bias before
# the affine, and no activation or one of CPU_ACTIVATIONS (MobileNetV3's). RLX's passes
# and their gate are unchanged wherever they run.

CPU_ACTIVATIONS = frozenset({"Relu", "HardSwish", "HardSigmoid"})


def cpu_friendly(a, w_dims) -> bool:
    """A 2-D conv with groups 1 (any kernel, 1×1 included) or depthwise (groups == C_out,
    one input channel per group)."""
    if len(tuple(a.kernel_size)) != 2 or len(w_dims) != 4:
        return False
    return a.groups == 1 or (w_dims[1] == 1 and a.groups == w_dims[0])


def _channel_operand(graph, node, prev: int, c_out: int, rank: int):
    other = node.inputs[1] if node.inputs[0] == prev else node.inputs[0]
    return trace_channel_bias(graph, other, c_out, rank)


def _cpu_chain(graph, node, uses):
    """``(bias, scale, shift, links, tail)`` of ``Conv → [Add(bias)] → [Mul(scale) →
    Add(shift)]`` (every link single-reader, at least one fold), or None; ``tail`` is
    the last absorbed node."""
    w = graph.shape(node.inputs[1])
    c_out, rank = w.dims[0], node.shape.rank
    bias = scale = shift = None
    links, tail = [], node
    r = sole_reader(graph, uses, tail.id)
    if _is(r, "Binary", "Add"):
        bias = _channel_operand(graph, r, tail.id, c_out, rank)
        if bias is not None:
            links.append(r.id)
            tail, r = r, sole_reader(graph, uses, r.id)
    if _is(r, "Binary", "Mul"):
        scale = _channel_operand(graph, r, tail.id, c_out, rank)
        add = sole_reader(graph, uses, r.id) if scale is not None else None
        if _is(add, "Binary", "Add"):
            shift = _channel_operand(graph, add, r.id, c_out, rank)
        if shift is not None:
            links += [r.id, add.id]
            tail = add
        else:
            scale = None
    if bias is None and scale is None:
        return None
    return bias, scale, shift, links, tail


def _cpu_tails(graph, uses, tail):
    """The ways the chain may end, longest first: ``(residual, act, absorbed ids, last)``."""
    out = [(None, None, (), tail)]
    r = sole_reader(graph, uses, tail.id)
    if _is(r, "Activation") and r.attrs.op in CPU_ACTIVATIONS:
        out.insert(0, (None, r.attrs.op, (r.id,), r))
    elif _is(r, "Binary", "Add"):
        res = r.inputs[1] if r.inputs[0] == tail.id else r.inputs[0]
        if res != tail.id and graph.shape(res).dims == tail.shape.dims:
            out.insert(0, (res, None, (r.id,), r))
            a = sole_reader(graph, uses, r.id)
            if _is(a, "Activation") and a.attrs.op in CPU_ACTIVATIONS:
                out.insert(0, (res, a.attrs.op, (r.id, a.id), a))
    return out


def _cpu_steps(graph, node, table, chain, end):
    bias, scale, shift, _, _ = chain
    res, act, _, last = end
    c, w = node.attrs, graph.shape(node.inputs[1])
    vec_id = shift if bias is None else bias
    c_out, vec = w.dims[0], graph.shape(vec_id)
    op = make_op("FusedConvBiasAct", kernel_size=tuple(c.kernel_size), stride=tuple(c.stride),
                 padding=tuple(c.padding), dilation=tuple(c.dilation), groups=c.groups,
                 activation=act, has_residual=res is not None)
    extra = (res,) if res is not None else ()
    if vec.dtype != w.dtype or (scale is not None and graph.shape(scale).dtype != w.dtype):
        return None
    probe = Graph("probe")
    ids = [probe.add_node(make_op("Input", name=f"v{k}"), [], graph.shape(i))
           for k, i in enumerate((node.inputs[0], node.inputs[1], vec_id) + extra)]
    if not gated(probe, table, op, ids, last.shape):
        return None
    if scale is None:
        return [(op, (node.inputs[0], node.inputs[1], bias) + extra, last.shape)]
    if not (table.supports("Reshape", w.dtype) and table.supports("Binary", w.dtype)):
        return None
    steps = [(make_op("Reshape", new_shape=(c_out,) + (1,) * (w.rank - 1)), (scale,),
              Shape((c_out,) + (1,) * (w.rank - 1), w.dtype)),
             (make_op("Binary", op="Mul"), (node.inputs[1], New(0)), w)]
    b = shift
    if bias is not None:          # (conv + b)·s + t = conv·s + (b·s + t)
        steps += [(make_op("Binary", op="Mul"), (bias, scale), vec),
                  (make_op("Binary", op="Add"), (New(2), shift), vec)]
        b = New(3)
    return steps + [(op, (node.inputs[0], New(1), b) + extra, last.shape)]


@fusion_pass("fuse_conv_affine_act_cpu")
def fuse_conv_affine_act_cpu(graph, table) -> list:
    """Matches of ``Conv → [Add(bias)] → [Mul(scale) → Add(shift)] → [Add(residual)] →
    [act]`` under the CPU gate; a chain whose residual Add another match took (a ResNet
    shortcut conv) fuses up to its shift."""
    uses, taken, found = use_counts(graph), set(), []
    for node in graph.nodes:
        if node.kind != "Conv" or not cpu_friendly(node.attrs, graph.shape(node.inputs[1]).dims):
            continue
        chain = _cpu_chain(graph, node, uses)
        if chain is None or taken & {node.id, *chain[3]}:
            continue
        for end in _cpu_tails(graph, uses, chain[4]):
            members = {node.id, *chain[3], *end[2]}
            steps = None if members & taken else _cpu_steps(graph, node, table, chain, end)
            if steps:
                taken |= members
                found.append(Match(node.id, tuple(chain[3]) + end[2], steps))
                break
    return found


__all__ = ["CPU_ACTIVATIONS", "FUSIBLE_ACTIVATIONS", "cpu_friendly", "cudnn_friendly",
           "fuse_conv_affine_act", "fuse_conv_affine_act_cpu", "fuse_conv_bias_act",
           "trace_channel_bias"]
