"""aten network ops onto Conv, Pool, MatMul, LayerNorm, Softmax, Reduce, Gather, Attention."""
from __future__ import annotations

import math

import numpy as np

from ._convert import T, handles, meta, rlx_dtype

A = "aten."


def _pair(v, n=2):
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return v * n if len(v) == 1 else v


# ── convolution ──────────────────────────────────────────────────────────────

def _conv_supported(node):
    args = node.args
    if str(node.target) == A + "convolution.default":
        if args[6]:
            return "transposed convolution"
        rank = len(meta(node).shape)
    else:
        pad = args[4] if len(args) > 4 else node.kwargs.get("padding", 0)
        if isinstance(pad, str):
            return f"padding={pad!r} (give the padding as numbers)"
        rank = len(meta(node).shape)
    return None if rank in (3, 4) else f"a {rank - 2}-d convolution"


@handles(A + "conv2d.default", A + "conv1d.default", A + "convolution.default",
         supports=_conv_supported)
def _conv(ctx, node):
    if str(node.target) == A + "convolution.default":
        x, w, b, stride, padding, dilation, _, _, groups = ctx.args(node)[:9]
    else:
        x, w, b, stride, padding, dilation, groups = ctx.args(node, (None, None, None, 1, 0,
                                                                     1, 1))[:7]
    wd = ctx.dims(w)
    if len(wd) == 3:       # Conv reads rank 3 as [N, C, 1, L] with a [1, k] kernel
        ks, stride, padding = [1, wd[2]], [1, _pair(stride, 1)[0]], [0, _pair(padding, 1)[0]]
        dilation = [1, _pair(dilation, 1)[0]]
    else:
        ks, stride, padding, dilation = list(wd[2:]), _pair(stride), _pair(padding), \
            _pair(dilation)
    y = ctx.g.op("Conv", (x, w), kernel_size=tuple(ks), stride=tuple(stride),
                 padding=tuple(padding), dilation=tuple(dilation), groups=int(groups))
    return y if b is None else ctx.g.add(y, channel_vector(ctx, b, len(ctx.dims(y))))


def channel_vector(ctx, v, rank):
    """A [C] vector shaped [1, C, 1, ...] to broadcast along axis 1 of a rank-``rank`` x."""
    return ctx.reshape(v, [1, ctx.dims(v)[0]] + [1] * (rank - 2))


# ── normalization ────────────────────────────────────────────────────────────

def _bn_supported(node):
    if str(node.target) == A + "batch_norm.default" and node.args[5]:
        return "batch_norm in training mode (export the module in eval())"
    return None


@handles(A + "_native_batch_norm_legit_no_training.default", A + "batch_norm.default",
         supports=_bn_supported)
def _batch_norm(ctx, node):
    """Eval batch norm along axis 1 as ``x·s + t`` with s = γ/√(var+ε), t = β − mean·s.

    The statistics stay Params (the module's buffers), so s and t are computed in the
    graph from [C] vectors; BatchNormInference wants channels last, which NCHW is not."""
    if str(node.target) == A + "batch_norm.default":
        x, w, b, mean, var, _, _, eps = ctx.args(node)[:8]
    else:
        x, w, b, mean, var, _, eps = ctx.args(node)[:7]
    g, dt, rank = ctx.g, ctx.dtype(x), len(ctx.dims(x))
    scale = g.activation("Rsqrt", g.add(var, ctx.scalar(eps, dt)))
    if w is not None:
        scale = g.mul(scale, w)
    shift = g.mul(g.activation("Neg", mean), scale)
    if b is not None:
        shift = g.add(shift, b)
    y = g.add(g.mul(x, channel_vector(ctx, T(scale), rank)), channel_vector(ctx, T(shift), rank))
    return (y, None, None) if "legit" in str(node.target) else y


def _ln_affine(ctx, v, n, dt, fill):
    if v is None:
        return ctx.g.constant([fill] * n, dt)
    return ctx.reshape(v, [n])


@handles(A + "layer_norm.default", A + "native_layer_norm.default")
def _layer_norm(ctx, node):
    x, shape, w, b, eps = ctx.args(node, (None, None, None, None, 1e-5))[:5]
    dims, dt = ctx.dims(x), ctx.dtype(x)
    n = math.prod(shape)
    flat = ctx.reshape(x, list(dims[:len(dims) - len(shape)]) + [n])
    y = ctx.g.op("LayerNorm", (flat, _ln_affine(ctx, w, n, dt, 1.0),
                               _ln_affine(ctx, b, n, dt, 0.0)), axis=-1, eps=float(eps))
    y = ctx.reshape(T(y), dims)
    return (y, None, None) if "native" in str(node.target) else y


# ── linear algebra ───────────────────────────────────────────────────────────

@handles(A + "linear.default")
def _linear(ctx, node):
    lazy = ctx.weight(node.args[1])
    if lazy is not None:        # W^T once at import, not a Transpose on every run
        out_f, in_f = lazy.dims
        wt = ctx.derived_param(lazy, ".T", lambda a: np.ascontiguousarray(a.T), (in_f, out_f))
        node = _without_weight(node)
    x, w, b = ctx.args(node, (None, None, None))[:3]
    y = ctx.g.matmul(x, wt if lazy is not None else ctx.g.transpose(w, (1, 0)))
    return y if b is None else ctx.g.add(y, b)


class _Args:
    """An FX call's view with the weight argument replaced (it is read another way)."""

    def __init__(self, node, args):
        self.target, self.args, self.kwargs = node.target, args, node.kwargs


def _without_weight(node):
    return _Args(node, (node.args[0], None) + tuple(node.args[2:]))


def _addmm_supported(node):
    beta, alpha = node.kwargs.get("beta", 1), node.kwargs.get("alpha", 1)
    return None if (beta, alpha) == (1, 1) else f"addmm beta={beta} alpha={alpha}"


@handles(A + "addmm.default", supports=_addmm_supported)
def _addmm(ctx, node):
    bias, a, b = ctx.args(node)[:3]
    return ctx.g.add(ctx.g.matmul(a, b), bias)


@handles(A + "mm.default", A + "bmm.default", A + "matmul.default")
def _matmul(ctx, node):
    a, b = ctx.args(node)[:2]
    ra, rb = len(ctx.dims(a)), len(ctx.dims(b))
    a2 = ctx.reshape(a, [1, ctx.dims(a)[0]]) if ra == 1 else a
    b2 = ctx.reshape(b, [ctx.dims(b)[0], 1]) if rb == 1 else b
    return ctx.reshape(T(ctx.g.matmul(a2, b2)), meta(node).shape)


@handles(A + "embedding.default")
def _embedding(ctx, node):
    w, idx = ctx.args(node)[:2]
    return ctx.g.op("Gather", (w, idx), axis=0)


@handles(A + "index_select.default")
def _index_select(ctx, node):
    x, dim, idx = ctx.args(node)[:3]
    return ctx.g.op("Gather", (x, idx), axis=dim % len(ctx.dims(x)))


# ── reductions ───────────────────────────────────────────────────────────────

@handles(A + "_softmax.default", A + "softmax.int", A + "_log_softmax.default",
         A + "log_softmax.int")
def _softmax(ctx, node):
    x, dim = ctx.args(node)[:2]
    x = ctx.as_dtype(x, rlx_dtype(meta(node).dtype))
    y = ctx.g.softmax(x, int(dim))
    return ctx.g.activation("Log", y) if "log_softmax" in str(node.target) else y


_REDUCE = {"mean": "Mean", "sum": "Sum", "amax": "Max", "amin": "Min", "prod": "Prod"}


@handles(*[f"{A}{n}.{o}" for n in _REDUCE for o in ("dim", "dim_IntList", "default")])
def _reduce(ctx, node):
    args = ctx.args(node, (None, None, False))
    x, rank = args[0], len(ctx.dims(args[0]))
    dims = args[1] if len(args) > 1 and isinstance(args[1], (list, tuple)) else None
    dims = list(range(rank)) if not dims else [d % rank for d in dims]
    keep = bool(args[2]) if len(args) > 2 and isinstance(args[2], bool) else False
    x = ctx.as_dtype(x, rlx_dtype(meta(node).dtype))
    return ctx.g.reduce(x, _REDUCE[str(node.target).split(".")[1]], dims, keep)


# ── pooling ──────────────────────────────────────────────────────────────────

def _maxpool_supported(node):
    args = list(node.args) + [None] * 6
    dil, ceil = args[4] or node.kwargs.get("dilation", 1), args[5] or node.kwargs.get(
        "ceil_mode", False)
    if any(d != 1 for d in _pair(dil)):
        return "max_pool2d with dilation"
    return "max_pool2d with ceil_mode" if ceil else None


@handles(A + "max_pool2d.default", A + "max_pool2d_with_indices.default",
         supports=_maxpool_supported)
def _max_pool(ctx, node):
    x, k, stride, padding = ctx.args(node, (None, None, (), 0))[:4]
    y = _pool(ctx, x, "Max", _pair(k), _pair(stride or k), _pair(padding))
    return (y, None) if "indices" in str(node.target) else y


def _avgpool_supported(node):
    args = list(node.args) + [None] * 7
    if args[4]:
        return "avg_pool2d with ceil_mode"
    if args[6] is not None or node.kwargs.get("divisor_override") is not None:
        return "avg_pool2d with divisor_override"
    pad = args[3] or 0
    include = args[5] if args[5] is not None else node.kwargs.get("count_include_pad", True)
    return None if include or not any(_pair(pad)) else "avg_pool2d excluding padding"


@handles(A + "avg_pool2d.default", supports=_avgpool_supported)
def _avg_pool(ctx, node):
    x, k, stride, padding = ctx.args(node, (None, None, (), 0))[:4]
    return _pool(ctx, x, "Mean", _pair(k), _pair(stride or k), _pair(padding))


def _pool(ctx, x, kind, k, stride, padding):
    return ctx.g.op("Pool", (x,), kind=kind, kernel_size=tuple(k), stride=tuple(stride),
                    padding=tuple(padding))


def _adaptive_supported(node):
    ins, out = meta(node.args[0]).shape[-2:], meta(node).shape[-2:]
    if all(i % o == 0 for i, o in zip(ins, out)):
        return None
    return f"adaptive_avg_pool2d from {tuple(ins)} to {tuple(out)} (uneven windows)"


@handles(A + "adaptive_avg_pool2d.default", A + "_adaptive_avg_pool2d.default",
         supports=_adaptive_supported)
def _adaptive_avg_pool(ctx, node):
    x = ctx.arg(node.args[0])
    ins, out = ctx.dims(x)[-2:], tuple(meta(node).shape[-2:])
    if out == (1, 1):
        return ctx.g.reduce(x, "Mean", [len(ctx.dims(x)) - 2, len(ctx.dims(x)) - 1], True)
    k = [i // o for i, o in zip(ins, out)]
    return _pool(ctx, x, "Mean", k, k, (0, 0))


# ── attention ────────────────────────────────────────────────────────────────

def _sdpa_supported(node):
    q, k = meta(node.args[0]), meta(node.args[1])
    if q.dim() != 4:
        return f"scaled_dot_product_attention on rank-{q.dim()} tensors"
    causal = node.kwargs.get("is_causal", node.args[5] if len(node.args) > 5 else False)
    if "flash" in str(node.target):
        causal = node.kwargs.get("is_causal", node.args[4] if len(node.args) > 4 else False)
    if causal and q.shape[2] != k.shape[2]:
        return "is_causal with query and key lengths that differ (top-left alignment)"
    return None


@handles(A + "scaled_dot_product_attention.default",
         A + "_scaled_dot_product_flash_attention_for_cpu.default", supports=_sdpa_supported)
def _sdpa(ctx, node):
    flash = "flash" in str(node.target)
    if flash:
        q, k, v, _, causal = ctx.args(node, (None, None, None, 0.0, False))[:5]
        mask, scale = ctx.arg(node.kwargs.get("attn_mask")), node.kwargs.get("scale")
    else:
        q, k, v, mask, _, causal, scale = ctx.args(
            node, (None, None, None, None, 0.0, False, None))[:7]
    b, h, sq, d = ctx.dims(q)
    ops, kind = [q, k, v], "Causal" if causal else "None"
    if mask is not None:
        ops.append(_bias(ctx, mask, (b, h, sq, ctx.dims(k)[2]), ctx.dtype(q)))
        kind = "Bias"
    y = ctx.g.op("Attention", tuple(ops), num_heads=h, head_dim=d, v_head_dim=_vd(ctx, v, d),
                 mask_kind=kind, score_scale=None if scale is None else float(scale))
    return (y, None) if flash else y


def _vd(ctx, v, d):
    return None if ctx.dims(v)[3] == d else ctx.dims(v)[3]


def _bias(ctx, mask, dims, dt):
    g = ctx.g
    if ctx.dtype(mask).is_bool:
        mask = g.where_(mask, ctx.scalar(0.0, dt), ctx.scalar(-math.inf, dt))
    mask = ctx.as_dtype(T(mask), dt)
    return mask if ctx.dims(mask) == dims else g.op("Expand", (mask,), target_shape=dims)

