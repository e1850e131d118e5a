"""Samples for Attention and Rope: every mask kind, layout, GQA, v_head_dim, edge cases."""
from __future__ import annotations

import numpy as np

from .attention import AttentionAttrs, RopeAttrs
from .opdef import Sample


def _att(h, d, mask="None", vd=None, scale=None, cap=None):
    return AttentionAttrs(num_heads=h, head_dim=d, v_head_dim=vd, mask_kind=mask,
                          score_scale=scale, attn_logit_softcap=cap)


def attention_samples(rng):
    """Small Attention cases; the ``hand`` ones carry exact expected outputs."""
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    f = lambda x: np.asarray(x, np.float32)  # noqa: E731
    causal_sw = [
        Sample((r(2, 3, 8), r(2, 3, 8), r(2, 3, 8)), _att(2, 4), tags=("packed", "odd")),
        Sample((r(1, 2, 3, 4), r(1, 2, 3, 4), r(1, 2, 3, 4)), _att(2, 4, "Causal"),
               tags=("BHSD", "causal")),
        Sample((r(1, 3, 2, 4), r(1, 5, 2, 4), r(1, 5, 2, 4)), _att(2, 4, "Causal"),
               tags=("BSHD", "causal", "kv-cache", "prime-length")),
        Sample((r(5, 8), r(5, 8), r(5, 8)), _att(2, 4, ("SlidingWindow", 1)),
               tags=("rank-2", "sliding-window")),
        Sample((r(1, 4, 4), r(1, 6, 4), r(1, 6, 4)), _att(1, 4, ("SlidingWindow", 0)),
               tags=("sliding-window", "w=0", "kv-cache")),
        Sample((r(1, 3, 4), r(1, 2, 4), r(1, 2, 4)), _att(1, 4, "Causal"),
               tags=("causal", "S_k<S_q")),
    ]
    masks = [
        Sample((r(2, 3, 4), r(2, 5, 4), r(2, 5, 4), f([[1, 1, 0, 1, 0], [0, 0, 0, 0, 0]])),
               _att(1, 4, "Custom"), tags=("custom-mask", "fully-masked")),
        Sample((r(1, 2, 4), r(1, 3, 4), r(1, 3, 4), np.array([[True, False, True]])),
               _att(2, 2, "Custom"), tags=("custom-mask", "bool")),
        Sample((r(1, 2, 3, 4), r(1, 2, 3, 4), r(1, 2, 3, 4), r(1, 2, 3, 3)),
               _att(2, 4, "Bias"), tags=("bias", "BHSD")),
        Sample((r(2, 3, 4), r(2, 3, 4), r(2, 3, 4), r(2, 1, 3, 3) * 3),
               _att(1, 4, "Bias", cap=2.0), tags=("bias", "softcap")),
    ]
    heads = [
        Sample((r(1, 3, 4, 2), r(1, 3, 2, 2), r(1, 3, 2, 2)), _att(4, 2, "Causal"),
               tags=("GQA", "BSHD")),
        Sample((r(1, 4, 3, 2), r(1, 1, 3, 2), r(1, 1, 3, 2)), _att(4, 2), tags=("MQA", "BHSD")),
        Sample((r(2, 3, 12), r(2, 4, 4), r(2, 4, 4)), _att(3, 4), tags=("MQA", "packed")),
        Sample((r(1, 3, 8), r(1, 3, 8), r(1, 3, 6)), _att(2, 4, "Causal", vd=3),
               tags=("v_head_dim", "packed")),
        Sample((r(1, 2, 3, 4), r(1, 1, 3, 4), r(1, 1, 3, 5)), _att(2, 4, vd=5),
               tags=("v_head_dim", "GQA", "BHSD")),
        Sample((r(1, 3, 8) * 4, r(1, 3, 8) * 4, r(1, 3, 8)), _att(2, 4, scale=0.5, cap=1.5),
               tags=("score_scale", "softcap")),
        Sample((r(1, 4, 4) * 5, r(1, 4, 4) * 5, r(1, 4, 4)), _att(1, 4, "Causal", cap=3.0),
               tags=("softcap", "causal")),
        Sample((r(1, 2, 4), r(1, 2, 4), r(1, 2, 4)), _att(1, 4, scale=0.0),
               tags=("score_scale", "zero-scale")),
    ]
    edge = [
        Sample((rng.standard_normal((1, 3, 8)), rng.standard_normal((1, 4, 8)),
                rng.standard_normal((1, 4, 8))), _att(2, 4, "Causal"), tags=("f64",)),
        Sample(tuple(r(1, 3, 8).astype(np.float16) for _ in range(3)), _att(2, 4, "Causal"),
               tags=("f16",)),
        Sample((r(1, 0, 8), r(1, 3, 8), r(1, 3, 8)), _att(2, 4, "Causal"), tags=("empty",)),
        Sample((r(0, 2, 4), r(0, 0, 4), r(0, 0, 4)), _att(1, 4), tags=("empty",)),
        Sample((f([[[np.nan, 0, 0, 0], [1, 0, 0, 0]]]), r(1, 2, 4), r(1, 2, 4)), _att(1, 4),
               tags=("nan",)),
        Sample((f([[[np.inf, 0, 0, 0]]]), r(1, 2, 4), r(1, 2, 4)), _att(1, 4), tags=("inf",)),
    ]
    v2 = f([[1, 2], [3, 4]])
    hand = [
        # Q = 0 -> equal scores; causal: q0 sees key 0, q1 sees both (weights 1/2)
        Sample((np.zeros((2, 2), np.float32), r(2, 2), v2), _att(1, 2, "Causal"),
               tags=("hand", "causal"), expect=f([[1, 2], [2, 3]])),
        # one key: the output is that key's value, whatever the score
        Sample((r(1, 2, 4), r(1, 1, 4), f([[[5, -1, 0.5, 2]]])), _att(1, 4),
               tags=("hand", "size-1"), expect=f([[[5, -1, 0.5, 2]] * 2])),
        # batch 0 sees key 0 only; batch 1 has every key hidden -> mean of its V rows
        Sample((np.zeros((2, 1, 2), np.float32), r(2, 2, 2), f([[[1, 2], [9, 9]],
                                                                [[1, 2], [3, 8]]]),
                f([[1, 0], [0, 0]])), _att(1, 2, "Custom"),
               tags=("hand", "fully-masked", "custom-mask"), expect=f([[[1, 2]], [[2, 5]]])),
    ]
    return causal_sw + masks + heads + edge + hand


def rope_samples(rng):
    """Small Rope cases for both styles, partial rotation and every table form."""
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731

    def tabs(*shape):
        # A random unit vector (a, b)/r gives cos and sin of a random angle without libm
        # calls, whose last bit may differ between platforms (case ids hash the inputs).
        a, b = rng.standard_normal(shape), rng.standard_normal(shape)
        r = np.sqrt(a * a + b * b) + 1e-300
        return (a / r).astype(np.float32), (b / r).astype(np.float32)

    out = []
    for style in ("NeoX", "GptJ"):
        A = lambda d, n: RopeAttrs(d, n, style)  # noqa: E731, B023
        out += [
            Sample((r(1, 3, 8), *tabs(3, 2)), A(4, 4), tags=(style, "packed")),
            Sample((r(1, 5, 12), *tabs(5, 3)), A(6, 2), tags=(style, "partial", "prime-length")),
            Sample((r(1, 2, 3, 4), *tabs(3, 2)), A(4, 4), tags=(style, "BHSD")),
            Sample((r(2, 3, 8), *tabs(2, 3, 2)), A(4, 4), tags=(style, "per-token")),
            Sample((r(3, 8), *tabs(3, 4)), A(8, 4), tags=(style, "rank-2", "wide-table")),
            Sample((r(1, 2, 4), *tabs(4)), A(4, 4), tags=(style, "rank-1-table")),
            Sample((r(1, 2, 4), *tabs(6, 2)), A(4, 4), tags=(style, "long-table")),
            Sample((rng.standard_normal((1, 3, 4)), *(t.astype(np.float64) for t in tabs(3, 2))),
                   A(4, 4), tags=(style, "f64")),
            Sample((r(1, 3, 4).astype(np.float16), *(t.astype(np.float16) for t in tabs(3, 2))),
                   A(4, 4), tags=(style, "f16")),
            Sample((np.zeros((1, 0, 8), np.float32), *tabs(0, 2)), A(4, 4),
                   tags=(style, "empty")),
        ]
    x = np.array([[1, 2, 3, 4]], np.float32)
    quarter = (np.zeros((1, 2), np.float32), np.ones((1, 2), np.float32))  # 90° turns
    out += [
        Sample((x, *quarter), RopeAttrs(4, 4, "NeoX"), tags=("hand",),
               expect=np.array([[-3, -4, 1, 2]], np.float32)),
        Sample((x, *quarter), RopeAttrs(4, 4, "GptJ"), tags=("hand",),
               expect=np.array([[-2, 1, -4, 3]], np.float32)),
        Sample((x, *quarter), RopeAttrs(4, 2, "NeoX"), tags=("hand", "partial"),
               expect=np.array([[-2, 1, 3, 4]], np.float32)),
        Sample((x, np.ones((1, 1), np.float32), np.ones((1, 1), np.float32)),
               RopeAttrs(4, 0, "NeoX"), tags=("hand", "n_rot=0"), expect=x),
    ]
    return out
