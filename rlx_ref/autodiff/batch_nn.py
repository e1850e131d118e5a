"""Batching rules of the network kinds: the normalizations, Attention, Rope, Conv,
ConvTranspose2d, Pool, Im2Col.

These kernels fix their operands' ranks, so the batch folds into an axis they already
treat as independent and is split back out after (RLX's reshape trick): the leading N of
Conv/Pool/Im2Col/GroupNorm/LayerNorm2d, Attention's batch. A batched weight folds into
the channels instead: Conv and ConvTranspose2d multiply ``groups`` by the batch size (each
example's channels become their own groups), GroupNorm its ``num_groups``, and
BatchNormInference its channel axis. LayerNorm, RmsNorm and LayerNorm2d, whose statistics
span the features, normalize with unit gamma and zero beta and then apply the batched
affine as Mul and Add (one more rounding in 16-bit dtypes).
"""
from __future__ import annotations

from ..ops.attention import rope_tables
from ._build import binary, constant, reshape
from ._batching import batch_rule, merge_leading, shift, split_leading


def _unit_affine(ctx):
    """Constants one (gamma) and zero (beta) of the unbatched gamma/beta shapes."""
    return [constant(ctx.g, v, s.dtype, s.dims) for v, s in zip((1, 0), ctx.in_shapes[1:3])]


def _affine(ctx, y: int, axis: int, features: int) -> int:
    """``y · gamma + beta`` with [C] (per example: [B, C]) vectors along ``axis`` of y,
    whose batch is at 0."""
    g = ctx.g
    rank = g.shape(y).rank
    for i, op in ((1, "Mul"), (2, "Add")):
        lead = ctx.size if ctx.batched(i) else 1
        v = ctx.moved(i, 0) if ctx.batched(i) else ctx.x[i]
        dims = [1] * rank
        dims[0], dims[axis] = lead, features
        y = binary(g, op, y, reshape(g, v, dims))
    return y


@batch_rule("LayerNorm", "RmsNorm")
def batch_axis_norm(ctx):
    rank = ctx.in_shapes[0].rank
    axis = ctx.attrs.axis % rank
    if not (ctx.batched(1) or ctx.batched(2)):
        d = ctx.bdims[0]
        return ctx.emit(ctx.node.kind, ctx.x, d, ctx.replace(axis=shift(axis, d)))
    payload = ctx.replace(axis=axis + 1)
    y = ctx.g.op(ctx.node.kind, (ctx.moved(0, 0), *_unit_affine(ctx)), payload)
    return _affine(ctx, y, axis + 1, ctx.in_shapes[0].dims[axis]), 0


def _fold_n(ctx, kind: str, rest, payload=None) -> tuple:
    """``kind`` on operand 0 with the batch folded into its leading N, then split out."""
    x = merge_leading(ctx.g, ctx.moved(0, 0), ctx.where)
    y = ctx.g.op(kind, (x, *rest), ctx.attrs if payload is None else payload)
    return split_leading(ctx.g, y, ctx.size, ctx.where), 0


def _to_channels(ctx, i: int, at: int) -> int:
    """Operand ``i`` with the batch at ``at`` merged into the next (channel) axis."""
    x = ctx.moved(i, at)
    dims = ctx.static(x)
    return reshape(ctx.g, x, dims[:at] + (dims[at] * dims[at + 1],) + dims[at + 2:])


def _from_channels(ctx, y: int, at: int) -> int:
    """Inverse of ``_to_channels``: the merged channel axis ``at`` split as [B, C]."""
    dims = ctx.static(y)
    return reshape(ctx.g, y, dims[:at] + (ctx.size, dims[at] // ctx.size) + dims[at + 1:])


@batch_rule("GroupNorm")
def batch_group_norm(ctx):
    """Shared gamma/beta: the batch folds into N. Batched: into the channels, with
    ``num_groups · B`` groups (each example's groups stay apart)."""
    if not (ctx.batched(1) or ctx.batched(2)):
        return _fold_n(ctx, "GroupNorm", ctx.x[1:])
    ins = [_to_channels(ctx, 0, 1)] + [_to_channels(ctx, i, 0) for i in (1, 2)]
    payload = ctx.replace(num_groups=ctx.attrs.num_groups * ctx.size)
    return _from_channels(ctx, ctx.g.op("GroupNorm", ins, payload), 1), 1


@batch_rule("LayerNorm2d")
def batch_layer_norm2d(ctx):
    if not (ctx.batched(1) or ctx.batched(2)):
        return _fold_n(ctx, "LayerNorm2d", ctx.x[1:])
    y, _ = _fold_n(ctx, "LayerNorm2d", _unit_affine(ctx))
    return _affine(ctx, y, 2, ctx.in_shapes[0].dims[1]), 0


@batch_rule("BatchNormInference")
def batch_batch_norm(ctx):
    """Channels are the last axis: a batch elsewhere stays; batched statistics fold the
    batch into the channels (``[..., B·C]`` against ``[B·C]`` vectors)."""
    rank = ctx.in_shapes[0].rank
    if not any(ctx.batched(i) for i in range(1, 5)):
        d = ctx.bdims[0]
        if d == rank:
            return ctx.emit("BatchNormInference", (ctx.moved(0, 0),) + ctx.x[1:], 0)
        return ctx.emit("BatchNormInference", ctx.x, d)
    ins = [_to_channels(ctx, 0, rank - 1)]
    ins += [reshape(ctx.g, ctx.moved(i, 0), (-1,)) for i in range(1, 5)]
    y = ctx.g.op("BatchNormInference", ins, ctx.attrs)
    return _from_channels(ctx, y, rank - 1), rank - 1


@batch_rule("Attention")
def batch_attention(ctx):
    """Every operand gets the batch at 0, which folds into Attention's own batch (a rank-2
    ``[S, H·D]`` example becomes the packed ``[B, S, H·D]`` layout); a mask operand's leading
    batch of 1 folds likewise."""
    g, rank = ctx.g, ctx.in_shapes[0].rank
    ins = [ctx.moved(i, 0) for i in range(len(ctx.x))]
    qkv = [merge_leading(g, x, ctx.where) if rank >= 3 else x for x in ins[:3]]
    masks = [merge_leading(g, x, ctx.where) for x in ins[3:]]
    y = g.op("Attention", qkv + masks, ctx.attrs)
    return (split_leading(g, y, ctx.size, ctx.where) if rank >= 3 else y), 0


@batch_rule("Rope")
def batch_rope(ctx):
    """The batch becomes one more leading (batch) axis of x. Shared per-position tables
    stay as they are unless their row count would then read as one row per token; batched
    or per-token tables are laid out per token for the whole batch, ``[B·batch·S, w]``."""
    g, a, rank = ctx.g, ctx.attrs, ctx.in_shapes[0].rank
    x_dims, t_dims = ctx.in_shapes[0].dims, ctx.in_shapes[1].dims
    half = a.n_rot // 2
    if half == 0:           # nothing rotates; the tables only need one shape
        tables = [ctx.moved(i, 0) for i in (1, 2)] if ctx.batched(1) or ctx.batched(2) \
            else list(ctx.x[1:])
        return ctx.emit("Rope", (ctx.moved(0, 0), *tables), 0)
    batch, seq, stride, rows, per_token = rope_tables(x_dims, t_dims, half)
    total = ctx.size * batch * seq
    shared = not (ctx.batched(1) or ctx.batched(2) or per_token)
    if shared and (rows != total or rows == seq):
        d = ctx.bdims[0]
        if d is not None and d <= rank - 2:
            return ctx.emit("Rope", ctx.x, d)
        return ctx.emit("Rope", (ctx.moved(0, 0), *ctx.x[1:]), 0)
    tables = []
    for i in (1, 2):
        t = ctx.moved(i, 0) if ctx.batched(i) else reshape(g, ctx.x[i], (1,) + t_dims)
        t = reshape(g, t, (ctx.static(t)[0], rows, stride))
        if per_token:
            t = reshape(g, t, (ctx.static(t)[0], batch, seq, stride))
        else:
            t = reshape(g, g.op("Narrow", (t,), axis=1, start=0, len=seq),
                        (ctx.static(t)[0], 1, seq, stride))
        t = g.op("Expand", (t,), target_shape=(ctx.size, batch, seq, stride))
        tables.append(reshape(g, t, (total, stride)))
    return ctx.emit("Rope", (ctx.moved(0, 0), *tables), 0)


@batch_rule("Conv", "ConvTranspose2d")
def batch_conv(ctx):
    """A shared weight: the batch folds into N. A batched one: x ``[N, B·C_in, ...]``
    against weights stacked along their first axis, ``groups · B`` groups."""
    if not ctx.batched(1):
        return _fold_n(ctx, ctx.node.kind, ctx.x[1:])
    x = _to_channels(ctx, 0, 1)
    w = merge_leading(ctx.g, ctx.moved(1, 0), ctx.where)
    payload = ctx.replace(groups=ctx.attrs.groups * ctx.size)
    return _from_channels(ctx, ctx.g.op(ctx.node.kind, (x, w), payload), 1), 1


@batch_rule("Pool", "Im2Col")
def batch_fold_n(ctx):
    """Windows never cross samples: the batch folds into N (Im2Col's rows split back as
    ``[B, N·H_out·W_out, ...]``)."""
    return _fold_n(ctx, ctx.node.kind, ())

