"""Decompositions of AttentionBackward and AttentionBackwardAll into the textbook backward
pass over primitives: layouts to ``[B, H, S, D]`` (Transpose/Reshape), GQA by Expand, the
recomputed scores (MatMul, the mask by Where), Softmax, and MatMuls for the gradients.
AttentionBackwardAll recomputes the scores once for all three gradients.
"""
from __future__ import annotations

import numpy as np

from ..ir.dtype import DType
from ..ir.graph import Graph
from ..ops import _attention_geom as geo
from ..ops.backward_attention import forward_attrs
from .decompose import _binary, _reshape, _static, _transpose, constant, decomposes
from .decompose_backward_nn import narrow_to, widen

PRODUCTS = ("Cast", "Transpose", "Reshape", "Expand", "MatMul", "Binary", "Constant",
            "Where", "Compare", "Softmax", "Reduce")
_NOTE = ("MatMul, Softmax and Reduce round in their own summation order, not numpy's "
         "(last-bit differences); f16/bf16 run in f32 as the oracle does")
_SWAP = (0, 1, 3, 2)


def _to_bhsd(g, x, gm, heads, width):
    if gm.layout == "BHSD":
        return x
    if gm.layout != "BSHD":                        # packed [B, S, h*w] or [S, h*w]
        x = _reshape(g, x, (gm.batch, g.shape(x).dims[-2], heads, width))
    return _transpose(g, x, (0, 2, 1, 3))


def _from_bhsd(g, x, gm, dims):
    if gm.layout == "BHSD":
        return x
    x = _transpose(g, x, (0, 2, 1, 3))
    return x if gm.layout == "BSHD" else _reshape(g, x, dims)


def _repeat_heads(g, x, gm):
    """K/V heads repeated for their query-head groups (GQA): ``[B, H, S, D]``."""
    group = gm.heads // gm.kv_heads
    if group == 1:
        return x
    b, hk, s, d = g.shape(x).dims
    x = g.op("Expand", (_reshape(g, x, (b, hk, 1, s, d)),), target_shape=(b, hk, group, s, d))
    return _reshape(g, x, (b, gm.heads, s, d))


def _fold_heads(g, x, gm):
    """Sum each K/V head's query group: ``[B, H, S, D] -> [B, H_kv, S, D]``."""
    group = gm.heads // gm.kv_heads
    if group == 1:
        return x
    b, _, s, d = g.shape(x).dims
    x = _reshape(g, x, (b, gm.kv_heads, group, s, d))
    return g.op("Reduce", (x,), op="Sum", axes=(2,), keep_dim=False)


def _visibility(g, a, gm, mask):
    """(keep, hidden): bool masks broadcasting over the scores (either may be None)."""
    if a.mask_kind == "Custom":
        m = mask if g.shape(mask).dtype in (DType.F32, DType.F64) else \
            g.op("Cast", (mask,), to=DType.F32)
        below = g.op("Compare", (m, constant(g, geo.MASK_THRESHOLD, g.shape(m).dtype)),
                     op="Lt")                     # NaN is not below: that key stays visible
        return None, _reshape(g, below, (gm.batch, 1, 1, gm.s_k))
    allowed = geo.synthetic_allowed(a.mask_kind, gm.s_q, gm.s_k)
    return (None if allowed.all() else constant(g, allowed, DType.BOOL)), None


def _hide(g, x, keep, hidden, value):
    if keep is not None:
        x = g.op("Where", (keep, x, value))
    if hidden is not None:
        x = g.op("Where", (hidden, value, x))
    return x


def emit_attention_grads(g: Graph, node, ins, wanted) -> dict:
    """``{"Query": dQ, "Key": dK, "Value": dV}`` (the ``wanted`` ones) in the operands'
    layouts and the node's dtype; None when shapes are dynamic."""
    if not _static(g, ins):
        return None
    a = node.attrs
    q, k, v, dy = (widen(g, x) for x in ins[:4])
    mask = ins[4] if len(ins) > 4 else None
    dims = [g.shape(x).dims for x in (q, k, v)]
    gm = geo.attention_geom(*dims, forward_attrs(a))
    wt = g.shape(q).dtype
    Q, DY = _to_bhsd(g, q, gm, gm.heads, gm.d), _to_bhsd(g, dy, gm, gm.heads, gm.dv)
    K = _repeat_heads(g, _to_bhsd(g, k, gm, gm.kv_heads, gm.d), gm)
    V = _repeat_heads(g, _to_bhsd(g, v, gm, gm.kv_heads, gm.dv), gm)
    dt = wt.np.type
    scale = constant(g, dt(1) / np.sqrt(dt(gm.d)), wt)
    s = _binary(g, "Mul", g.op("MatMul", (Q, _transpose(g, K, _SWAP))), scale)
    if a.mask_kind == "Bias":
        bias = mask if g.shape(mask).dtype == wt else g.op("Cast", (mask,), to=wt)
        s = _binary(g, "Add", s, bias)
    keep, hidden = _visibility(g, a, gm, mask)
    p = g.op("Softmax", (_hide(g, s, keep, hidden, constant(g, geo.MASK_FILL, wt)),), axis=3)
    out = {}
    if "Value" in wanted:
        dv = _fold_heads(g, g.op("MatMul", (_transpose(g, p, _SWAP), DY)), gm)
        out["Value"] = _from_bhsd(g, dv, gm, dims[2])
    if "Query" in wanted or "Key" in wanted:
        dp = g.op("MatMul", (DY, _transpose(g, V, _SWAP)))
        row = g.op("Reduce", (_binary(g, "Mul", p, dp),), op="Sum", axes=(3,), keep_dim=True)
        ds = _binary(g, "Mul", p, _binary(g, "Sub", dp, row))
        ds = _hide(g, ds, keep, hidden, constant(g, 0, wt))      # hidden scores: constants
        if "Query" in wanted:
            dq = _binary(g, "Mul", g.op("MatMul", (ds, K)), scale)
            out["Query"] = _from_bhsd(g, dq, gm, dims[0])
        if "Key" in wanted:
            dk = _binary(g, "Mul", g.op("MatMul", (_transpose(g, ds, _SWAP), Q)), scale)
            out["Key"] = _from_bhsd(g, _fold_heads(g, dk, gm), gm, dims[1])
    return {w: narrow_to(g, x, node.shape.dtype) for w, x in out.items()}


@decomposes("AttentionBackward", PRODUCTS, exact=False, note=_NOTE)
def lower_attention_backward(g: Graph, node, ins) -> int | None:
    grads = emit_attention_grads(g, node, ins, (node.attrs.wrt,))
    return None if grads is None else grads[node.attrs.wrt]


@decomposes("AttentionBackwardAll", PRODUCTS + ("Concat",), exact=False, note=_NOTE)
def lower_attention_backward_all(g: Graph, node, ins) -> int | None:
    grads = emit_attention_grads(g, node, ins, ("Query", "Key", "Value"))
    if grads is None:
        return None
    return g.op("Concat", [grads[w] for w in ("Query", "Key", "Value")], axis=0)
