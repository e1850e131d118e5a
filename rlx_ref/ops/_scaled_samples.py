"""Samples of the Scaled* kinds: every format and layout on random data (codes and scales
made by the reference's own quantizer), and hand-computed cases: ties, saturation, NaN and
±inf, ±0, zero and NaN scales, short last blocks, high code bits, expert routing."""
from __future__ import annotations

import numpy as np

from . import _lowp_codec as lc
from . import _scaled_math as sm
from .opdef import Sample

NAN, INF = float("nan"), float("inf")
LAYOUTS = (("PerTensor", "per-tensor"), (lc.mx(2), "mx"), (lc.nvfp4(4), "nvfp4"))
FORMATS = lc.NAMED + (lc.custom(3, 0), lc.custom(2, 2))


def _u8(*v):
    return np.asarray(v, np.uint8)


def _f32(*v):
    return np.asarray(v, np.float32)


def _A(fmt, layout):
    from .scaled import ScaledQuantAttrs

    return ScaledQuantAttrs(fmt, layout)


def _M(lf, rf, layout, bias):
    from .scaled import ScaledMatMulAttrs

    return ScaledMatMulAttrs(lf, rf, layout, bias)


def _tag(fmt) -> str:
    return fmt if isinstance(fmt, str) else "custom"


def _quantized(rng, fmt, layout, shape, spread=3.0):
    """(x, stored scale, codes) of a random f32 tensor."""
    x = (rng.standard_normal(shape) * spread).astype(np.float32)
    scale = sm.stored_scales(sm.quant_scales(x, fmt, layout), layout)
    if lc.layout_tag(layout) != "PerTensor":
        rows, cols = sm.rows_cols(x.shape)
        scale = scale.reshape(rows, sm.nblk(cols, layout))
    return x, scale, sm.quantize(x, scale, fmt, layout)


def scale_samples(rng):
    out = [Sample((_quantized(rng, f, lay, (2, 5))[0],), _A(f, lay), tags=(_tag(f), lt))
           for i, f in enumerate(FORMATS) for lay, lt in LAYOUTS[i % 3:i % 3 + 1]]
    out += [
        Sample((rng.standard_normal((2, 3, 4)).astype(np.float32),), _A("F8E5M2", lc.mx(3)),
               tags=("mx", "rank-3")),
        Sample((np.zeros((0, 4), np.float32),), _A("F8E4M3", lc.mx(2)), tags=("empty",)),
        Sample((_f32([1, -896], [0, 3]),), _A("F8E4M3", "PerTensor"), tags=("hand",),
               expect=_f32(2.0)),
        Sample((np.zeros((2, 2), np.float32),), _A("F8E4M3", "PerTensor"),
               tags=("hand", "zero"), expect=_f32(1.0)),
        # amax 12, 3, 0, 0.75 over 6 -> 2, 0.5, 1 (zero block), 0.125 -> 2^k bytes
        Sample((_f32([1, -12, 3], [0, 0, 0.75]),), _A("F4E2M1", lc.mx(2)),
               tags=("hand", "mx", "short-block", "zero"), expect=_u8([128, 126], [127, 124])),
        # amax 9 -> 1.5 rounds UP to the power 2; NaN is ignored; inf gives byte 0
        Sample((_f32([9, NAN], [INF, 1]),), _A("F4E2M1", lc.mx(2)),
               tags=("hand", "mx", "nan", "inf"), expect=_u8([128], [0])),
        # amax 6 -> 1.0 (E4M3 0x38); amax 0.6 -> 0.1, nearest E4M3 0.1015625 (0x1D)
        Sample((_f32([6, 3, 0.6, -0.3]),), _A("F4E2M1", lc.nvfp4(2)),
               tags=("hand", "nvfp4"), expect=_u8([0x38, 0x1D])),
    ]
    return out


def quantize_samples(rng):
    out = []
    for i, f in enumerate(FORMATS):
        lay, lt = LAYOUTS[i % 3]
        x, scale, _ = _quantized(rng, f, lay, (3, 4))
        out.append(Sample((x, scale), _A(f, lay), tags=(_tag(f), lt)))
    x, scale, _ = _quantized(rng, "F6E3M2", lc.mx(4), (2, 6))
    out += [
        Sample((x, scale), _A("F6E3M2", lc.mx(4)), tags=("mx", "short-block")),
        Sample((np.zeros((0, 3), np.float32), np.ones(1, np.float32)),
               _A("F8E4M3", "PerTensor"), tags=("empty",)),
        # x/2 = 0.5, -1.5, 500 (saturates to 448), NaN, inf (code 0), -0, 0
        Sample((_f32(1, -3, 1000, NAN, INF, -0.0, 0), _f32(2)), _A("F8E4M3", "PerTensor"),
               tags=("hand", "nan", "inf", "saturation", "±0"),
               expect=_u8(0x30, 0xBC, 0x7E, 0, 0, 0, 0)),
        # midpoints of the FP4 grid: ties go to the even code (half to even)
        Sample((_f32(0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, -5, 7), _f32(1)),
               _A("F4E2M1", "PerTensor"), tags=("hand", "ties", "saturation"),
               expect=_u8(0, 2, 2, 4, 4, 6, 6, 14, 7)),
        Sample((_f32(1, -2, 3), _f32(0)), _A("F8E5M2", "PerTensor"),
               tags=("hand", "zero-scale"), expect=_u8(0, 0, 0)),
        # E8M0 bytes 128, 126 = scales 2, 0.5: x/s = 0.5, -6, 6
        Sample((_f32([1, -12, 3]), _u8([128, 126])), _A("F4E2M1", lc.mx(2)),
               tags=("hand", "mx", "short-block"), expect=_u8([1, 15, 7])),
    ]
    return out


def dequantize_samples(rng):
    out = []
    for i, f in enumerate(FORMATS):
        lay, lt = LAYOUTS[i % 3]
        _, scale, codes = _quantized(rng, f, lay, (2, 4))
        out.append(Sample((codes, scale), _A(f, lay), tags=(_tag(f), lt)))
    out += [
        Sample((np.zeros((2, 0), np.uint8), np.ones(1, np.float32)),
               _A("F8E4M3", "PerTensor"), tags=("empty",)),
        Sample((_u8(0x30, 0xBC, 0x7E, 0x7F, 0xFF, 0x80), _f32(2)), _A("F8E4M3", "PerTensor"),
               tags=("hand", "nan", "±0"), expect=_f32(1, -3, 896, NAN, NAN, -0.0)),
        Sample((_u8(0x7C, 0xFC, 0x7D, 0x3C), _f32(1)), _A("F8E5M2", "PerTensor"),
               tags=("hand", "inf", "nan"), expect=_f32(INF, -INF, NAN, 1)),
        Sample((_u8(0x80, 0x40, 0x00), _f32(1)), _A("F8E4M3Fnuz", "PerTensor"),
               tags=("hand", "nan", "fnuz"), expect=_f32(NAN, 1, 0)),
        # the sign is bit 5; bits above it are ignored (0xDF reads as 0x1F)
        Sample((_u8(0x1F, 0x3F, 0xDF), _f32(1)), _A("F6E2M3", "PerTensor"),
               tags=("hand", "high-bits"), expect=_f32(7.5, -7.5, 7.5)),
        Sample((_u8(0, 8, 7, 15, 0xF7), _f32(0.5)), _A("F4E2M1", "PerTensor"),
               tags=("hand", "±0", "high-bits"), expect=_f32(0, -0.0, 3, -3, 3)),
        Sample((_u8([1, 15, 7]), _u8([128, 126])), _A("F4E2M1", lc.mx(2)),
               tags=("hand", "mx", "short-block"), expect=_f32([1, -12, 3])),
        # a NaN E8M0 byte (0xFF) poisons its block only
        Sample((_u8([1, 2, 3]), _u8([0xFF, 127])), _A("F4E2M1", lc.mx(2)),
               tags=("hand", "mx", "nan"), expect=_f32([NAN, NAN, 1.5])),
        # f4e3m0 (bias 3): 2^(e-3), no mantissa
        Sample((_u8(1, 7, 9), _f32(1)), _A(lc.custom(3, 0), "PerTensor"),
               tags=("hand", "custom"), expect=_f32(0.25, 16, -0.25)),
    ]
    return out


def _operands(rng, lf, rf, lay, m, n, k):
    _, ls, lhs = _quantized(rng, lf, lay, (m, k))
    _, rs, rhs = _quantized(rng, rf, lay, (n, k))
    return lhs, rhs, ls, rs


def matmul_samples(rng):
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    out = [
        Sample(_operands(rng, "F8E4M3", "F8E4M3", "PerTensor", 3, 4, 5),
               _M("F8E4M3", "F8E4M3", "PerTensor", False), tags=("per-tensor",)),
        Sample(_operands(rng, "F8E5M2", "F4E2M1", lc.mx(4), 2, 3, 9) + (r(3),),
               _M("F8E5M2", "F4E2M1", lc.mx(4), True), tags=("mx", "short-block", "bias")),
        Sample(_operands(rng, "F4E2M1", "F4E2M1", lc.nvfp4(4), 2, 2, 8),
               _M("F4E2M1", "F4E2M1", lc.nvfp4(4), False), tags=("nvfp4",)),
        Sample(_operands(rng, "F8E4M3Fnuz", lc.custom(3, 1), "PerTensor", 1, 3, 4),
               _M("F8E4M3Fnuz", lc.custom(3, 1), "PerTensor", False),
               tags=("fnuz", "custom", "m=1")),
        Sample(_operands(rng, "F6E2M3", "F6E3M2", lc.mx(2), 2, 2, 0),
               _M("F6E2M3", "F6E3M2", lc.mx(2), False), tags=("empty", "k=0")),
        # codes of [[1, 2], [0.5, -1]] and [[1, 1], [2, 0]]; scales 2·0.5 = 1
        Sample((_u8([56, 64], [48, 184]), _u8([56, 56], [64, 0]), _f32(2), _f32(0.5),
                _f32(10, 20)), _M("F8E4M3", "F8E4M3", "PerTensor", True),
               tags=("hand", "bias"), expect=_f32([13, 22], [9.5, 21])),
        # k = 3 in blocks of 2: block scales (1, 2) for lhs, (1, 1) and (2, 0.5) for rhs
        Sample((_u8([2, 4, 5]), _u8([2, 2, 2], [1, 0, 10]), _u8([127, 128]),
                _u8([127, 127], [128, 126])), _M("F4E2M1", "F4E2M1", lc.mx(2), False),
               tags=("hand", "mx", "short-block"), expect=_f32([9, -2])),
    ]
    return out


def grouped_samples(rng):
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    out = []
    for lay, lt, bias in (("PerTensor", "per-tensor", False), (lc.mx(2), "mx", True)):
        _, isc, inp = _quantized(rng, "F8E4M3", lay, (4, 6))
        _, wsc, w = _quantized(rng, "F4E2M1", lay, (3 * 2, 6))
        w = w.reshape(3, 2, 6)
        if lc.layout_tag(lay) != "PerTensor":
            wsc = wsc.reshape(3, 2, -1)
        ids = _f32(2, 0, 1.7, 2)
        ops = (inp, w, isc, wsc, ids) + ((r(3, 2),) if bias else ())
        out.append(Sample(ops, _M("F8E4M3", "F4E2M1", lay, bias), tags=(lt, "routing")))
    # experts [1, 1] and [2, 0]; rows [1, 2] and [1.5, 1.5]; ids 1 and NaN (-> 0)
    out.append(Sample((_u8([2, 4], [3, 3]), _u8([[2, 2]], [[4, 0]]), _f32(1), _f32(1),
                       _f32(1, NAN), _f32([10], [20])),
                      _M("F4E2M1", "F4E2M1", "PerTensor", True),
                      tags=("hand", "nan", "bias"), expect=_f32([22], [13])))
    return out
