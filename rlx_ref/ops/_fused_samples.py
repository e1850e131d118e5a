"""Samples of the fused kinds: small operands, edge tags, hand-computed expectations."""
from __future__ import annotations

import numpy as np

from ..ir.dtype import DType
from .opdef import Sample

f32 = np.float32


def _r(rng, *dims, scale=1.0):
    return (rng.standard_normal(dims) * scale).astype(f32)


def matmul_bias_act(rng):
    from .fused import FusedMatMulBiasActAttrs as A

    x = np.array([[1, 2], [-3, 0.5]], f32)
    w = np.array([[1, 0, -1], [0.5, 1, 2]], f32)
    b = np.array([0.0, -2.5, 1.0], f32)
    want = np.maximum(x @ w + b, 0)         # [[2, 0, 4], [0, 0, 5]]
    return [
        Sample((x, w, b), A("Relu"), expect=want, tags=("hand",)),
        Sample((x, w, b), A(None), expect=x @ w + b, tags=("no-activation",)),
        Sample((_r(rng, 2, 3, 4), _r(rng, 4, 5), _r(rng, 1, 5)), A("Gelu"),
               tags=("batched", "broadcast")),
        Sample((_r(rng, 1, 7), _r(rng, 7, 3), f32(0.25)), A("Tanh"), tags=("0-d", "prime")),
        Sample((np.zeros((0, 3), f32), _r(rng, 3, 2), _r(rng, 2)), A("Silu"),
               tags=("empty",)),
    ]


def matmul_residual(rng):
    x = np.array([[1, 2], [-3, 0.5]], f32)
    w = np.array([[1, 0, -1], [0.5, 1, 2]], f32)
    res = np.array([[0.5, -2, 0], [1, 1, -5]], f32)
    want = np.array([[2.5, 0, 3], [-1.75, 1.5, -1]], f32)     # x @ w + res by hand
    return [
        Sample((x, w, res), None, expect=want, tags=("hand",)),
        Sample((_r(rng, 2, 3, 4), _r(rng, 4, 5), _r(rng, 2, 3, 5)), None,
               tags=("batched",)),
        Sample((_r(rng, 1, 7), _r(rng, 7, 3), _r(rng, 1, 3)), None, tags=("size-1", "prime")),
        Sample((np.zeros((0, 3), f32), _r(rng, 3, 2), np.zeros((0, 2), f32)), None,
               tags=("empty",)),
        Sample((_r(rng, 2, 0), _r(rng, 0, 3), _r(rng, 2, 3)), None, tags=("empty-k",)),
    ]


def conv_bias_act(rng):
    from .fused import FusedConvBiasActAttrs as A

    x = np.arange(9, dtype=f32).reshape(1, 1, 3, 3)
    w = np.ones((2, 1, 2, 2), f32)
    b = np.array([-20.0, 1.0], f32)
    sums = np.array([[8, 12], [20, 24]], f32)       # 2×2 window sums of 0..8
    want = np.stack([np.maximum(sums - 20, 0), sums + 1])[None]
    return [
        Sample((x, w, b), A((2, 2), activation="Relu"), expect=want, tags=("hand",)),
        Sample((_r(rng, 1, 2, 5, 5), _r(rng, 4, 1, 3, 3), _r(rng, 4)),
               A((3, 3), (2, 2), (1, 1), (1, 1), 2), tags=("groups", "stride", "pad")),
        Sample((_r(rng, 2, 2, 4, 4), _r(rng, 3, 2, 3, 3), _r(rng, 3), _r(rng, 2, 3, 4, 4)),
               A((3, 3), padding=(1, 1), activation="Relu", has_residual=True),
               tags=("residual",)),
    ]


def _norm_samples(rng, norm: str):
    from .fused import FusedResidualNormAttrs as A

    x = np.array([[1.0, 2.0, 3.0, 4.0]], f32)
    r = np.array([[1.0, 0.0, -1.0, -2.0]], f32)     # x + r = [2, 2, 2, 2]
    g, be = np.full(4, 2.0, f32), np.full(4, 0.5, f32)
    flat = np.full((1, 4), 0.5, f32) if norm == "LayerNorm" else None
    return [
        Sample((x, r, g, be), A(False, 1e-5), expect=flat, tags=("hand", "constant-row")),
        Sample((_r(rng, 2, 3, 8), _r(rng, 2, 3, 8), _r(rng, 8), _r(rng, 8), _r(rng, 8)),
               A(True, 1e-5), tags=("bias",)),
        Sample((_r(rng, 5, 7), _r(rng, 5, 7), _r(rng, 7), _r(rng, 7)), A(False, 1e-3),
               tags=("prime",)),
        Sample((_r(rng, 1, 1), _r(rng, 1, 1), f32([1.0]), f32([0.0]), f32([0.0])),
               A(True, 1e-6), tags=("size-1",)),
    ]


def residual_norm_LayerNorm(rng):
    return _norm_samples(rng, "LayerNorm")


def residual_norm_RmsNorm(rng):
    return _norm_samples(rng, "RmsNorm")


def swiglu(rng):
    from .fused import FusedSwiGLUAttrs as A

    p = np.array([[2.0, -1.0, 0.0, 3.0]], f32)      # up [2, -1], gate [0, 3]
    silu3 = 3 / (1 + np.exp(-3.0))
    want = np.array([[0.0, -silu3]], f32)
    return [
        Sample((p,), A(), expect=want, tags=("hand",)),
        Sample((p,), A(gate_first=True), tags=("gate-first",)),
        Sample((_r(rng, 2, 3, 10),), A(), tags=("batched",)),
        Sample((_r(rng, 6),), A(DType.F16), tags=("cast",)),
        Sample((np.zeros((0, 4), f32),), A(), tags=("empty",)),
    ]


def attention_block(rng):
    from .fused import FusedAttentionBlockAttrs as A

    b, s, nh, dh = 2, 3, 2, 2
    hd = nh * dh
    h, qkv, out = _r(rng, b, s, 4), _r(rng, 4, 3 * hd, scale=0.5), _r(rng, hd, 4)
    mask = np.array([[1, 1, 0], [1, 1, 1]], f32)
    ang = rng.uniform(-3, 3, (s, dh)).astype(f32)
    return [
        Sample((h, qkv, out, mask), A(nh, dh)),
        Sample((h, qkv, out, mask, _r(rng, 3 * hd), _r(rng, 4)), A(nh, dh, True),
               tags=("bias",)),
        Sample((h, qkv, out, mask, np.cos(ang), np.sin(ang)), A(nh, dh, False, True),
               tags=("rope",)),
        Sample((h[:1, :1], qkv, out, np.ones((1, 1), bool)), A(nh, dh), tags=("S=1", "bool")),
    ]


def transformer_layer(rng):
    from .fused import FusedTransformerLayerAttrs as A

    b, s, nh, dh, inter = 1, 3, 2, 2, 6
    d = nh * dh
    w = dict(hidden=_r(rng, b, s, d), qkv_w=_r(rng, d, 3 * d, scale=0.5),
             qkv_b=_r(rng, 3 * d), out_w=_r(rng, d, d), out_b=_r(rng, d),
             ln1_g=_r(rng, d), ln1_b=_r(rng, d), fc1_w=_r(rng, d, inter),
             fc1_b=_r(rng, inter), fc2_w=_r(rng, inter, d), fc2_b=_r(rng, d),
             ln2_g=_r(rng, d), ln2_b=_r(rng, d), mask=np.array([[1, 1, 0]], f32))
    full = ("hidden", "qkv_w", "qkv_b", "out_w", "out_b", "ln1_g", "ln1_b", "fc1_w",
            "fc1_b", "fc2_w", "fc2_b", "ln2_g", "ln2_b", "mask")
    bare = ("hidden", "qkv_w", "out_w", "ln1_g", "fc1_w", "fc2_w", "ln2_g", "mask")
    return [
        Sample(tuple(w[n] for n in full), A(nh, dh, inter, 1e-5, 1e-5, "Gelu", True),
               tags=("bias",)),
        Sample(tuple(w[n] for n in bare), A(nh, dh, inter, 1e-5, 1e-6, "Relu", False),
               tags=("no-bias",)),
    ]


def _ada(rng, attrs_cls, backward: bool):
    x = np.array([[[1.0, 3.0], [2.0, 2.0]]], f32)   # LayerNorm rows: [-1, 1], [0, 0]
    sc, sh = np.array([[[1.0, 0.0]]], f32), np.array([[[0.5, -0.5]]], f32)
    out = []
    for norm in ("LayerNorm", "RmsNorm"):
        a = attrs_cls(norm, 1e-5)
        ops = [(_r(rng, 2, 3, 4), _r(rng, 2, 1, 4), _r(rng, 2, 1, 4)),
               (_r(rng, 3, 5), _r(rng, 5), _r(rng, 5)),
               (_r(rng, 2, 2, 3), _r(rng, 2, 2, 3), _r(rng, 2, 2, 3))]
        tags = [("broadcast",), ("1-d modulation", "prime"), ("full",)]
        for (xx, s, t), tg in zip(ops, tags):
            ins = (xx, s, t, _r(rng, *xx.shape)) if backward else (xx, s, t)
            out.append(Sample(ins, a, tags=(norm,) + tg))
    if not backward:
        ln = np.array([[[-1.0, 1.0], [0.0, 0.0]]], f32) * (1 / np.sqrt(1 + 1e-5))
        out.insert(0, Sample((x, sc, sh), attrs_cls("LayerNorm", 1e-5),
                             expect=(ln * (1 + sc) + sh).astype(f32), tags=("hand",)))
    return out


def ada_layer_norm(rng):
    from ._fused_dit import AdaLayerNormAttrs

    return _ada(rng, AdaLayerNormAttrs, False)


def ada_layer_norm_backward(rng):
    from ._fused_dit import AdaLayerNormAttrs

    return _ada(rng, AdaLayerNormAttrs, True)


def gated_residual(rng):
    x, y = np.array([[1.0, 2.0], [3.0, 4.0]], f32), np.array([[10.0, 20.0], [30.0, 40.0]], f32)
    g = np.array([0.5, -1.0], f32)
    return [
        Sample((x, y, g), expect=np.array([[6, -18], [18, -36]], f32), tags=("hand",)),
        Sample((_r(rng, 2, 3, 4), _r(rng, 2, 3, 4), _r(rng, 2, 1, 4)), tags=("broadcast",)),
        Sample((_r(rng, 5), _r(rng, 5), _r(rng, 5)), tags=("prime",)),
    ]


def gated_residual_backward(rng):
    x, y = np.array([[1.0, 2.0], [3.0, 4.0]], f32), np.array([[10.0, 20.0], [30.0, 40.0]], f32)
    g, dy = np.array([0.5, -1.0], f32), np.ones((2, 2), f32)
    want = np.concatenate([dy.ravel(), (dy * g).ravel(), [40.0, 60.0]]).astype(f32)
    return [
        Sample((x, y, g, dy), expect=want, tags=("hand",)),
        Sample((_r(rng, 2, 3, 4), _r(rng, 2, 3, 4), _r(rng, 2, 1, 4), _r(rng, 2, 3, 4)),
               tags=("broadcast",)),
        Sample((_r(rng, 3, 5), _r(rng, 3, 5), _r(rng, 3, 5), _r(rng, 3, 5)), tags=("full",)),
    ]
