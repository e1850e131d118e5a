"""ONNX Attention (opset 23+) as MatMul, Softmax and an additive bias, as ONNX defines it.

The order follows ONNX's definition: Q and K are each scaled by sqrt(scale), softcap
comes before the bias, the bias adds the mask (bool: -inf where False), the causal
frontier (a query at i sees keys j <= i + offset, offset = past length or
nonpad_kv_seqlen - q length) and the kv padding; a row the bias masks entirely gives 0.
"""
from __future__ import annotations

import math

import numpy as np

from ..context import Unmappable
from . import converts


def _heads(ctx, x, n):
    """[B, S, H·D] → [B, H, S, D]."""
    b, s, hd = ctx.dims(x)
    return ctx.op("Transpose", (ctx.reshape(x, (b, s, n, hd // n)),), perm=(0, 2, 1, 3))


def _opt(ctx, ins, i):
    return ctx.id(ins[i]) if len(ins) > i and ins[i] else None


def _add(ctx, a, b):
    return b if a is None else ctx.bin("Add", a, b)


def _neg_inf_where(ctx, allowed, like):
    return ctx.where(allowed, ctx.like(0, like), ctx.like(-math.inf, like))


@converts("Attention")
def attention(ctx, node, ins, attrs):
    q, k, v = (ctx.id(n) for n in ins[:3])
    mask, past_k, past_v, nonpad = (_opt(ctx, ins, i) for i in (3, 4, 5, 6))
    rank3 = len(ctx.dims(q)) == 3
    qh, kvh = attrs.get("q_num_heads"), attrs.get("kv_num_heads")
    window = (attrs.get("left_window_size", -1), attrs.get("right_window_size", -1))
    attrs.get("softmax_precision")      # the softmax runs in the case dtype (or wider)
    softcap, mode = attrs.get("softcap"), attrs.get("qk_matmul_output_mode", 0)
    causal = attrs.get("is_causal", 0)
    if rank3:
        if qh is None or kvh is None:
            raise Unmappable("3-D inputs need q_num_heads and kv_num_heads")
        q, k, v = _heads(ctx, q, qh), _heads(ctx, k, kvh), _heads(ctx, v, kvh)
    if past_k is not None:
        k = ctx.op("Concat", (past_k, k), axis=2)
        v = ctx.op("Concat", (past_v, v), axis=2)
    present_k, present_v = k, v
    bsz, hq, s, d = ctx.dims(q)
    hk, t = ctx.dims(k)[1], ctx.dims(k)[2]
    scale = attrs.get("scale")
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    root = ctx.like(float(np.asarray(math.sqrt(scale), ctx.dt(q).np)), q)
    bias = _bias(ctx, q, mask, causal, window, past_k, nonpad, s, t, bsz)
    if hq != hk:        # grouped heads: query head h reads kv head h // (hq / hk)
        idx = ctx.const(np.arange(hq) // (hq // hk))
        k = ctx.op("Gather", (k, idx), axis=1)
        v = ctx.op("Gather", (v, idx), axis=1)
    kt = ctx.op("Transpose", (k,), perm=(0, 1, 3, 2))
    qk = ctx.op("MatMul", (ctx.bin("Mul", q, root), ctx.bin("Mul", kt, root)))
    if softcap:
        cap = ctx.like(softcap, qk)
        qk = ctx.bin("Mul", ctx.act("Tanh", ctx.bin("Div", qk, cap)), cap)
    with_bias = qk if bias is None else ctx.bin("Add", qk, bias)
    sm = ctx.op("Softmax", (with_bias,), axis=-1)
    if bias is not None:
        top = ctx.op("Reduce", (bias,), op="Max", axes=(len(ctx.dims(bias)) - 1,),
                     keep_dim=True)
        dead = ctx.cmp("Eq", top, ctx.like(-math.inf, top))
        sm = ctx.where(dead, ctx.like(0, sm), sm)
    qk_out = {0: qk, 1: qk, 2: with_bias, 3: sm}.get(mode)
    if qk_out is None:
        raise Unmappable(f"qk_matmul_output_mode={mode}", "qk_matmul_output_mode")
    y = ctx.op("MatMul", (sm, v))
    if rank3:
        y = ctx.op("Transpose", (y,), perm=(0, 2, 1, 3))
        y = ctx.reshape(y, (bsz, s, hq * ctx.dims(v)[3]))
    return [y, present_k, present_v, qk_out]


def _bias(ctx, q, mask, causal, window, past_k, nonpad, s, t, bsz):
    """The additive bias ([S, T] or broadcastable to [B, H, S, T]), or None."""
    bias = None
    if mask is not None:
        if ctx.dt(mask).is_bool:
            mask = _neg_inf_where(ctx, mask, q)
        short = t - ctx.dims(mask)[-1]
        if short > 0:
            r = len(ctx.dims(mask))
            mask = ctx.op("Pad", (mask,), pads=((0, 0),) * (r - 1) + ((0, short),),
                          mode=("Constant", -math.inf))
        bias = mask
    left, right = window
    if not (causal or left >= 0 or right >= 0):
        pass
    elif past_k is not None or nonpad is None:
        # the query's absolute position: i + past length, known at import time
        off = ctx.dims(past_k)[2] if past_k is not None else 0
        diff = np.arange(s).reshape(s, 1) + off - np.arange(t).reshape(1, t)
        allowed = np.ones((s, t), bool)
        for ok, on in ((diff >= 0, causal), (diff <= left, left >= 0),
                       (-diff <= right, right >= 0)):
            allowed &= ok if on else True
        bias = _add(ctx, bias, _neg_inf_where(ctx, ctx.const(allowed), q))
    else:
        # per batch: i + nonpad_kv_seqlen[b] - S, known only at run time
        off = ctx.bin("Sub", ctx.cast(nonpad, _i64()), ctx.scalar(s, _i64()))
        off = ctx.reshape(off, (bsz, 1, 1, 1))
        rel = np.arange(s).reshape(1, 1, s, 1) - np.arange(t).reshape(1, 1, 1, t)
        diff = ctx.bin("Add", ctx.const(rel.astype(np.int64)), off)
        zero = ctx.scalar(0, _i64())
        checks = [(ctx.cmp("Ge", diff, zero), causal),
                  (ctx.cmp("Le", diff, ctx.scalar(left, _i64())), left >= 0),
                  (ctx.cmp("Ge", diff, ctx.scalar(-right, _i64())), right >= 0)]
        allowed = None
        for c, on in checks:
            if on:
                allowed = c if allowed is None else ctx.bin("BitAnd", allowed, c)
        bias = _add(ctx, bias, _neg_inf_where(ctx, allowed, q))
    if nonpad is not None:
        lens = ctx.reshape(ctx.cast(nonpad, _i64()), (bsz, 1, 1, 1))
        j_idx = np.arange(t).reshape(1, 1, 1, t).astype(np.int64)
        inside = ctx.cmp("Lt", ctx.const(j_idx), lens)
        bias = _add(ctx, bias, _neg_inf_where(ctx, inside, q))
    return bias


def _i64():
    from ...ir.dtype import DType

    return DType.I64
