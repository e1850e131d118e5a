"""Quant family, integer ops: Quantize, Dequantize, QMatMul, QConv2d.

Symmetric or affine int8 with an f32 scale: ``x ≈ (q - zero_point) · scale``. QMatMul and
QConv2d accumulate ``(x - x_zp)(w - w_zp)`` exactly in integers and requantize to i8 with
RLX's rounding (``_quant_int``). The dequantizing matmuls live in ``quant_matmul.py``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..conformance.accuracy import exact
from ..ir.dtype import DType
from ..ir.shape import Dyn, Shape
from . import _conv_ref as R
from . import _quant_int as Q
from .codec import F32, I32, USIZE, ListOf, Optional, attr
from .conv import _window
from .opdef import Caps, OpDef, register, want

BLAS = Caps.BLAS | Caps.FUSION_BOUNDARY
_I8, _I32, _F32 = DType.I8, DType.I32, DType.F32


def _lazy_samples(name: str):
    """Samples live in ``_quant_samples`` (it imports this module's attrs classes)."""
    def samples(rng):
        from . import _quant_samples

        return getattr(_quant_samples, name)(rng)
    return samples


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


# ── Quantize and Dequantize ─────────────────────────────────────────────────

@dataclass(frozen=True)
class QuantAxisAttrs:
    axis: int | None = attr(Optional(USIZE), doc="the channel axis; null = per-tensor")
    scales: tuple = attr(ListOf(F32), doc="one f32 scale per channel (one when per-tensor)")
    zero_points: tuple = attr(ListOf(I32), doc="one i32 zero point per channel")


def _check_channels(shapes, a, kind: str, dtype: DType, nonzero: bool):
    x = shapes[0]
    want(x.dtype == dtype, f"(C1) {kind} takes a {dtype} tensor, got {x.dtype}")
    ns, nz = len(a.scales), len(a.zero_points)
    if a.axis is None:
        want(ns == 1 and nz == 1, f"(C2) per-tensor {kind} (axis null) needs exactly one "
                                  f"scale and one zero point, got {ns} and {nz}")
    else:
        want(a.axis < x.rank, f"(C2) {kind} axis {a.axis} is out of range for rank {x.rank}")
        c = x.dims[a.axis]
        want(isinstance(c, Dyn) or ns == nz == c,
             f"(C2) per-channel {kind} on axis {a.axis} needs {c} scales and zero points "
             f"(the axis length), got {ns} and {nz}")
    bad = [s for s in a.scales if not _finite(s) or (nonzero and s == 0)]
    want(not bad, f"(C3) {kind} scales must be finite{' and non-zero' if nonzero else ''}, "
                  f"got {bad[0] if bad else ''}")


def _channel_vectors(ctx, x):
    """Scales (f32) and zero points (i64) shaped to broadcast along the channel axis."""
    a = ctx.attrs
    if a.axis is not None:
        want(x.shape[a.axis] == len(a.scales), f"(C2) axis {a.axis} has {x.shape[a.axis]} "
                                               f"channels but {len(a.scales)} scales")
    scale = Q.along(np.asarray(a.scales, np.float32), a.axis, x.ndim)
    zp = Q.along(np.asarray(a.zero_points, np.int64), a.axis, x.ndim)
    return scale, zp


def _ref_quantize(ctx, x):
    scale, zp = _channel_vectors(ctx, x)
    return Q.quantize(x, scale, zp)


def _ref_dequantize(ctx, q):
    scale, zp = _channel_vectors(ctx, q)
    wide = ctx.out_np
    # RLX: `(q - zp) as f32 * scale`. The difference is exact in i64 and its f32 value is
    # part of the definition (it rounds once |q - zp| > 2**24); then one product rounding.
    diff = (q.astype(np.int64) - zp).astype(np.float32)
    return (diff.astype(wide) * scale.astype(wide)).astype(wide)


_QUANT_CONSTRAINTS = (
    "C2: `axis` null takes one scale and one zero point; `axis` = d needs d < rank and "
    "exactly `dims[d]` of each (channel c = the index along axis d).",
)

register(OpDef(
    kind="Quantize", family="quant", attrs=QuantAxisAttrs, payload="struct", arity=1,
    caps=Caps.NONE, input_names=("x",),
    infer=lambda s, a: Shape(s[0].dims, _I8),
    check=lambda s, a, o: _check_channels(s, a, "Quantize", _F32, True),
    reference=_ref_quantize,
    doc="Affine int8 quantization, per tensor or per channel: `q = clamp(round(x · (1 / "
        "scale[c])) + zero_point[c], -128, 127)` as i8, with `1 / scale` rounded to f32 and "
        "the product taken in f32 (RLX's CPU multiplies by the reciprocal), `round` half away "
        "from zero (Rust's `f32::round`), NaN quantized as 0 and ±inf saturating. The output "
        "has x's shape and dtype i8.",
    constraints=("C1: x is f32; the output is i8 of x's shape.",) + _QUANT_CONSTRAINTS + (
        "C3: every scale is finite and non-zero.",),
    samples=_lazy_samples("quantize_samples"), dtypes=(_F32,), accuracy=exact(),
    notes="RLX computes `round(x·(1/scale)) as i32 + zp` in i32, so a saturated i32 plus a "
          "positive zero point wraps in its release build; rlx_ref adds in i64 and clamps "
          "(the result differs only for |x/scale| ≥ 2³¹). RLX has no verifier rule for C2/C3.",
))

register(OpDef(
    kind="Dequantize", family="quant", attrs=QuantAxisAttrs, payload="struct", arity=1,
    caps=Caps.NONE, input_names=("q",),
    infer=lambda s, a: Shape(s[0].dims, _F32),
    check=lambda s, a, o: _check_channels(s, a, "Dequantize", _I8, False),
    reference=_ref_dequantize,
    doc="Inverse of Quantize: `x = f32(q - zero_point[c]) · scale[c]`: the difference taken "
        "exactly as an integer and converted to f32 (rounding only when it exceeds 2²⁴), "
        "then one f32 product. The output is f32 of q's shape.",
    constraints=("C1: q is i8; the output is f32 of q's shape.",) + _QUANT_CONSTRAINTS + (
        "C3: every scale is finite.",),
    samples=_lazy_samples("dequantize_samples"), dtypes=(_I8,), accuracy=exact(),
    notes="RLX subtracts in i32 (wrapping for zero points near i32::MIN); rlx_ref is exact.",
))


# ── QMatMul ─────────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class QMatMulAttrs:
    x_zp: int = attr(I32, doc="zero point of x")
    w_zp: int = attr(I32, doc="zero point of w")
    out_zp: int = attr(I32, doc="zero point of the i8 output")
    mult: float = attr(F32, doc="requantize multiplier x_scale·w_scale/out_scale")


def _check_requant(a, kind: str, cid: str):
    want(_finite(a.mult), f"({cid}) {kind} mult must be finite, got {a.mult}")


def _check_bias(bias: Shape, c, kind: str, cid: str):
    want(bias.dtype == _I32, f"({cid}) {kind} bias must be i32 (accumulator scale), got "
                             f"{bias.dtype}")
    want(bias.rank == 1 and (isinstance(c, Dyn) or bias.dims[0] == c),
         f"({cid}) {kind} bias must be [{c}] (one i32 per output channel), got {bias}")


def _infer_qmatmul(shapes, a):
    x, w, bias = shapes
    want(x.dtype == _I8 and w.dtype == _I8, f"(C1) QMatMul operands x and w must be i8, "
                                            f"got {x.dtype} and {w.dtype}")
    want(x.rank == 2 and w.rank == 2, f"(C2) QMatMul is 2-D: x [M, K] and w [K, N], got {x} "
                                      f"and {w}")
    k1, k2 = x.dims[1], w.dims[0]
    want(k1 == k2 or isinstance(k1, Dyn) or isinstance(k2, Dyn),
         f"(C2) QMatMul K mismatch: x {x.dims_text()} has K={k1}, w {w.dims_text()} has K={k2}")
    _check_bias(bias, w.dims[1], "QMatMul", "C3")
    _check_requant(a, "QMatMul", "C4")
    return Shape((x.dims[0], w.dims[1]), _I8)


def _ref_qmatmul(ctx, x, w, bias):
    a = ctx.attrs
    xs = x.astype(np.int64) - a.x_zp
    ws = w.astype(np.int64) - a.w_zp
    acc = bias.astype(np.int64)[None, :] + xs @ ws
    return Q.requantize(acc, a.mult, a.out_zp)


_REQUANT_DOC = ("`requantize(acc) = clamp(round(f32(acc) · mult) + out_zp, -128, 127)`: the "
                "accumulator rounded to f32, one f32 product, `round` half away from zero "
                "(Rust's `f32::round`), saturated to i32, then the zero point added and the "
                "sum clamped to i8.")

register(OpDef(
    kind="QMatMul", family="quant", attrs=QMatMulAttrs, payload="struct", arity=3, caps=BLAS,
    input_names=("x", "w", "bias"), infer=_infer_qmatmul,
    check=lambda s, a, o: _infer_qmatmul(s, a), reference=_ref_qmatmul,
    doc="Integer matmul with requantization: `acc[m, n] = bias[n] + Σ_k (x[m, k] - x_zp)·"
        "(w[k, n] - w_zp)` exactly in integers, then " + _REQUANT_DOC,
    constraints=("C1: x and w are i8; the output is i8 [M, N].",
                 "C2: x is [M, K] and w is [K, N] (2-D only, as RLX).",
                 "C3: bias is i32 [N].",
                 "C4: mult is finite."),
    samples=_lazy_samples("qmatmul_samples"), dtypes=(_I8,), accuracy=exact(),
    notes="RLX accumulates in i32 (wrapping past 2³¹, out of reach while K < 33 000 with "
          "zero points in i8 range); rlx_ref accumulates exactly. RLX does not check C4; a "
          "NaN mult there yields out_zp.",
))


# ── QConv2d ─────────────────────────────────────────────────────────────────

_LIST = ListOf(USIZE)


@dataclass(frozen=True)
class QConv2dAttrs:
    kernel_size: tuple = attr(_LIST, doc="[kH, kW]")
    stride: tuple = attr(_LIST, (1, 1), doc="[sH, sW]; missing entries are 1")
    padding: tuple = attr(_LIST, (0, 0), doc="[pH, pW], symmetric; missing entries are 0")
    dilation: tuple = attr(_LIST, (1, 1), doc="[dH, dW]; missing entries are 1")
    groups: int = attr(USIZE, 1, doc="channel groups")
    x_zp: int = attr(I32, 0, doc="zero point of x (padding reads it: taps outside skip)")
    w_zp: int = attr(I32, 0, doc="zero point of w")
    out_zp: int = attr(I32, 0, doc="zero point of the output")
    mult: float = attr(F32, 1.0, doc="requantize multiplier")


def _infer_qconv(shapes, a):
    x, w, bias = shapes
    want(x.rank == 4 and w.rank == 4, f"(C1) QConv2d takes x [N, C_in, H, W] and w [C_out, "
                                      f"C_in/groups, kH, kW] (rank 4), got {x} and {w}")
    g = _window(a, 2)
    want(a.groups >= 1, f"(C3) groups must be >= 1, got {a.groups}")
    want(x.dtype == _I8 and w.dtype == _I8, f"(C4) QConv2d x and w must be i8, got {x.dtype} "
                                            f"and {w.dtype}")
    _check_requant(a, "QConv2d", "C7")
    if any(isinstance(d, Dyn) for d in tuple(x.dims[1:]) + tuple(w.dims)):
        return None
    c_in, (c_out, c_g, kh, kw) = x.dims[1], w.dims
    want((kh, kw) == g["kernel"], f"(C2) kernel_size {list(a.kernel_size)} does not match the "
                                  f"weight's spatial dims [{kh}, {kw}]")
    want(c_g * a.groups == c_in and c_out % a.groups == 0,
         f"(C3) weight C_in/groups={c_g} × groups={a.groups} must equal input C={c_in}, and "
         f"groups must divide C_out={c_out}")
    _check_bias(bias, c_out, "QConv2d", "C6")
    outs = [R.conv_out_size(x.dims[2 + i], g["kernel"][i], g["stride"][i], g["padding"][i],
                            g["dilation"][i], ax) for i, ax in enumerate("HW")]
    return Shape((x.dims[0], c_out, *outs), _I8)


def _ref_qconv(ctx, x, w, bias):
    a = ctx.attrs
    g = _window(a, 2)
    # shifted by x_zp, the zero padding is a tap that adds nothing: RLX skips those taps
    xs = x.astype(np.int64) - a.x_zp
    ws = w.astype(np.int64) - a.w_zp
    acc = R.conv2d(xs, ws, g["stride"], g["padding"], g["dilation"], a.groups)
    acc = acc + bias.astype(np.int64)[None, :, None, None]
    return Q.requantize(acc, a.mult, a.out_zp)


register(OpDef(
    kind="QConv2d", family="quant", attrs=QConv2dAttrs, payload="struct", arity=3, caps=BLAS,
    input_names=("x", "w", "bias"), infer=_infer_qconv,
    check=lambda s, a, o: _infer_qconv(s, a), reference=_ref_qconv,
    doc="Integer 2-D convolution (NCHW, Conv's geometry: cross-correlation, symmetric "
        "padding, dilation, groups): `acc[n, co, ho, wo] = bias[co] + Σ (x[n, ci, ih, iw] - "
        "x_zp)·(w[co, c, i, j] - w_zp)` over the taps inside the input (`ih = ho·sH + i·dH - "
        "pH`, likewise iw; a tap in the padding adds nothing, as if the padding held x_zp), "
        "then " + _REQUANT_DOC,
    constraints=("C1: x is [N, C_in, H, W] and w is [C_out, C_in/groups, kH, kW] (rank 4).",
                 "C2: kernel_size has 2 entries equal to w's spatial dims; stride, padding "
                 "and dilation have at most 2 (missing: 1, 0, 1); stride, dilation >= 1.",
                 "C3: groups >= 1 divides C_out and C_in = groups · w.dims[1].",
                 "C4: x and w are i8; the output is i8.",
                 "C5: the dilated kernel fits the padded input: `H_out = (H + 2pH - "
                 "dH(kH-1) - 1) // sH + 1` >= 1, likewise W.",
                 "C6: bias is i32 [C_out].",
                 "C7: mult is finite."),
    samples=_lazy_samples("qconv_samples"), dtypes=(_I8,), accuracy=exact(),
    notes="RLX lowers QConv2d only for rank-4 operands and two kernel sizes (anything else "
          "becomes a no-op) and takes C_out and the output size from the declared shape; "
          "rlx_ref infers them. The accumulator is exact here, i32 in RLX.",
))
