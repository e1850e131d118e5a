"""Samples of the fake-quantization kinds: random inputs per layout, scale mode and STE, and
hand-computed cases (ties, saturation, zero and NaN channels, the 1e-12 floor)."""
from __future__ import annotations

import numpy as np

from ._fake_quant_codec import STE_KINDS, ema
from .opdef import Sample

NAN, INF = float("nan"), float("inf")
TINY = np.float32(1e-12)            # RLX's scale floor, as f32


def _f32(*xs):
    return tuple(np.asarray(v, np.float32) for v in xs)


def _fq(bits, axis, ste="Identity", mode="PerBatch"):
    from .fake_quant import FakeQuantizeAttrs

    return FakeQuantizeAttrs(bits, axis, ste, mode)


def fake_quantize_samples(rng):
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    pos = lambda *s: (np.abs(r(*s)) + 0.1).astype(np.float32)  # noqa: E731
    out = [
        Sample((r(2, 5),), _fq(8, None), tags=("per-tensor", "prime-length")),
        Sample((r(3, 4),), _fq(4, 1, "ClippedIdentity"), tags=("per-axis",)),
        Sample((r(2, 3, 4),), _fq(2, 0, "Tanh"), tags=("per-axis", "non-last-axis", "rank-3")),
        Sample((r(2, 3, 5),), _fq(8, 2, "HardTanh"), tags=("per-axis", "rank-3")),
        Sample((r(3, 1),), _fq(4, 1), tags=("size-1", "per-axis")),
        Sample((np.zeros((0, 3), np.float32),), _fq(8, 1), tags=("empty", "per-axis")),
        Sample((np.float32(-2.5),), _fq(8, None), tags=("0-d", "per-tensor")),
        Sample((r(2, 3), pos(3)), _fq(8, 1, mode=ema(0.99)), tags=("EMA", "per-axis")),
        Sample((r(4, 3), pos(1)), _fq(4, None, "Tanh", ema(0.9)), tags=("EMA", "per-tensor")),
        Sample((r(2, 3), pos(2) * np.float32(0.2)), _fq(4, 0, mode="Fixed"),
               tags=("Fixed", "per-axis", "saturation")),
        # max 3, s = 3: x/s = -1, -1/3, 0, 0.47, 0.53, 1
        Sample(_f32([-3, -1, 0, 1.4, 1.6, 3]), _fq(2, None), tags=("hand", "per-tensor"),
               expect=_f32([-3, -0.0, 0, 0, 3, 3])[0]),
        # s = 127/127 = 1: the .5 ties round away from zero (half-to-even gives 0, 2, -2)
        Sample(_f32([127, 0.5, -0.5, 1.5, 2.5, -2.5]), _fq(8, None, "ClippedIdentity"),
               tags=("hand", "ties"), expect=_f32([127, 1, -1, 2, 3, -3])[0]),
        # channel 0 is all zero (scale 1e-12, stays 0); channel 1 has s = 1 and a tie
        Sample(_f32([[0, 0, 0], [127, -63.5, 0.25]]), _fq(8, 0, "HardTanh"),
               tags=("hand", "zero-channel", "per-axis", "ties"),
               expect=_f32([[0, 0, 0], [127, -64, 0]])[0]),
        # columns: s = 1, 1e-12 (zero), 4; -0.5 and 2/4 are ties
        Sample(_f32([[1, 0, -4], [-0.5, 0, 2]]), _fq(2, 1), tags=("hand", "per-axis", "ties"),
               expect=_f32([[1, 0, -4], [-1, 0, 4]])[0]),
        # the NaN loses the max: s = 2
        Sample(_f32([NAN, 1, -2]), _fq(2, None), tags=("hand", "nan"),
               expect=_f32([NAN, 2, -2])[0]),
        # s = inf: x/s is NaN or 0, and 0·inf is NaN
        Sample(_f32([INF, 1, -2]), _fq(2, None), tags=("hand", "inf"),
               expect=_f32([NAN, NAN, NAN])[0]),
        # Fixed s = 0.5, q = 7: 20, -20, 6.8 saturate or round up; 0.5 ties away
        Sample(_f32([10, -10, 3.4, 0.25, -0.26], [0.5]), _fq(4, None, mode="Fixed"),
               tags=("hand", "Fixed", "saturation", "ties"),
               expect=_f32([3.5, -3.5, 3.5, 0.5, -0.5])[0]),
        # a NaN and a negative state fall to the 1e-12 floor: everything saturates at ±7
        Sample(_f32([[1, 1], [2, -2]], [NAN, -1]), _fq(4, 1, "Tanh", "Fixed"),
               tags=("hand", "Fixed", "floor", "nan"),
               expect=np.array([[1, 1], [1, -1]], np.float32) * (np.float32(7) * TINY)),
        # EMA cold start (state 0): s = cur = 1
        Sample(_f32([127, 63.5], [0]), _fq(8, None, mode=ema(0.99)),
               tags=("hand", "EMA", "cold-start", "ties"), expect=_f32([127, 64])[0]),
        # EMA warm: s = 0.5·2 + 0.5·1 = 1.5; 127/1.5 = 84.7 -> 85, 63.5/1.5 = 42.3 -> 42
        Sample(_f32([127, 63.5], [2]), _fq(8, None, "HardTanh", ema(0.5)),
               tags=("hand", "EMA"), expect=_f32([127.5, 63])[0]),
        # a negative state is cold too
        Sample(_f32([[-127, 1]], [-3]), _fq(8, None, mode=ema(0.25)),
               tags=("hand", "EMA", "cold-start"), expect=_f32([[-127, 1]])[0]),
    ]
    return out


def backward_samples(rng):
    from .fake_quant import FakeQuantizeBackwardAttrs as A

    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    out = []
    for i, ste in enumerate(STE_KINDS):
        bits = (8, 4, 2, 8)[i]
        out += [Sample((r(2, 5), r(2, 5)), A(bits, None, ste), tags=(ste, "per-tensor")),
                Sample((r(3, 4), r(3, 4)), A(bits, 0, ste),
                       tags=(ste, "per-axis", "non-last-axis"))]
    out += [
        Sample((r(2, 3, 2), r(2, 3, 2)), A(4, 2, "HardTanh"), tags=("per-axis", "rank-3")),
        Sample((np.zeros((2, 0), np.float32),) * 2, A(8, 0, "Tanh"), tags=("empty",)),
        Sample((np.float32(0.7), np.float32(2.0)), A(8, None, "ClippedIdentity"),
               tags=("0-d",)),
        # s = 4, bound 4: attenuation 1 - |x/4| = 0, 0.5, 1, 0.75, 0.25
        Sample(_f32([-4, -2, 0, 1, 3], [2, 2, 2, 2, 2]), A(2, None, "HardTanh"),
               tags=("hand", "HardTanh"), expect=_f32([0, 1, 2, 1.5, 0.5])[0]),
        # the NaN loses the max (s = 4) and is outside every bound
        Sample(_f32([NAN, -4, 2], [1, 1, 1]), A(2, None, "ClippedIdentity"),
               tags=("hand", "ClippedIdentity", "nan"), expect=_f32([0, 1, 1])[0]),
        Sample(_f32([NAN, -4, 2], [1, 1, 1]), A(2, None, "HardTanh"),
               tags=("hand", "HardTanh", "nan"), expect=_f32([0, 0, 0.5])[0]),
        # zero channels: s = 1e-12, x/s = 0, tanh 0 = 0: dy passes
        Sample(_f32([[0, 0], [0, 0]], [[3, -1], [0.5, 2]]), A(2, 0, "Tanh"),
               tags=("hand", "Tanh", "zero-channel"), expect=_f32([[3, -1], [0.5, 2]])[0]),
        # s = m/7 and then s·7 rounds below m: the max element counts as clipped (as RLX)
        Sample(_f32([7.1830277, 1], [1, 1]), A(4, None, "ClippedIdentity"),
               tags=("hand", "ClippedIdentity", "rounding-edge"), expect=_f32([0, 1])[0]),
        Sample(_f32([1, 5], [NAN, -2]), A(4, None, "Identity"),
               tags=("hand", "Identity", "nan"), expect=_f32([NAN, -2])[0]),
    ]
    return out


# x = (0.375, -0.75, 2, 10, -3.75) with s = 0.5, q = 7: z = 0.75, -1.5, 4, 20, -7.5
_X5, _S5, _DY5 = _f32([0.375, -0.75, 2, 10, -3.75], [0.5], [1, 2, 3, 4, 5])
# per column: s = 0.5 (z = 0.75, -1.5) and 2 (z = 0.5, -1.5)
_X22, _S2, _ONES = _f32([[0.375, 1], [-0.75, -3]], [0.5, 2], [[1, 1], [1, 1]])
# the floor: s = 1e-12, q = 1: z = 0, 3, -1e12
_XF, _SF, _DYF = _f32([0, 3e-12, -1], [-1], [1, 2, 3])
_XN, _SN, _DYN = _f32([NAN, 0.5], [0.25], [1, 2])     # z = NaN, 2 (q = 1)

_HAND = {
    "FakeQuantizeLSQ": (_f32([0.5, -1, 2, 3.5, -3.5])[0], _f32([[0.5, 2], [-1, -4]])[0],
                        _f32([0, 1, -1])[0] * TINY, _f32([NAN, 0.25])[0]),
    "FakeQuantizeLSQBackwardX": (_f32([1, 2, 3, 0, 0])[0], _ONES, _f32([1, 0, 0])[0],
                                 _f32([0, 0])[0]),
    # psi: 0.25, -0.5, 0, 7, -7 | 0.25, -0.5 and 0.5, -0.5 | 0, 1, -1 | -1, 1
    "FakeQuantizeLSQBackwardScale": (_f32([-7.75])[0], _f32([-0.25, 0])[0],
                                     _f32([-1])[0], _f32([1])[0]),
}


def lsq_samples(kind: str):
    three = kind != "FakeQuantizeLSQ"

    def samples(rng):
        from .fake_quant import LsqAttrs as A

        r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
        pos = lambda *s: ((np.abs(r(*s)) + 0.1) * 0.2).astype(np.float32)  # noqa: E731

        def ops(x, s, dy=None):
            return (x, s, r(*np.shape(x)) if dy is None else dy) if three else (x, s)

        hand = _HAND[kind]
        return [
            Sample(ops(r(3, 4), pos(3)), A(4, 0), tags=("per-axis", "non-last-axis",
                                                        "saturation")),
            Sample(ops(r(2, 3, 4), pos(3)), A(8, 1), tags=("per-axis", "rank-3")),
            Sample(ops(r(5), pos(1)), A(2, None), tags=("per-tensor", "prime-length")),
            Sample(ops(r(3, 4), pos(1, 4)), A(4, 1), tags=("per-axis", "scale-rank-2")),
            Sample(ops(np.zeros((0, 3), np.float32), pos(3)), A(8, 1), tags=("empty",),
                   expect=np.zeros(3, np.float32) if kind.endswith("Scale") else None),
            Sample(ops(np.float32(0.3), pos(1)), A(2, None), tags=("0-d",)),
            Sample(ops(_X5, _S5, _DY5), A(4, None), tags=("hand", "ties", "saturation"),
                   expect=hand[0]),
            Sample(ops(_X22, _S2, _ONES), A(4, 1), tags=("hand", "per-axis", "ties"),
                   expect=hand[1]),
            Sample(ops(_XF, _SF, _DYF), A(2, None), tags=("hand", "floor", "saturation"),
                   expect=hand[2]),
            Sample(ops(_XN, _SN, _DYN), A(2, None), tags=("hand", "nan"), expect=hand[3]),
        ]
    return samples
