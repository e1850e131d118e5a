"""Elementwise family: Activation, Cast, StopGradient here; Binary, Compare, Where, Fma and
Clamp in ``_elementwise_binary``.

Activation is a table of scalar formulas: one row per RLX sub-kind, with the numpy
expression that defines it. Floats of 16 bits are computed in f32 and rounded once.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from ..conformance.accuracy import exact, per_op, ulp
from ..ir.dtype import DType, int_range
from .codec import DTYPE, Enum, attr
from .opdef import Caps, OpDef, Sample, compute_dtype, register, want

EW = Caps.ELEMENTWISE | Caps.CONST_FOLDABLE
_SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, np.inf, -np.inf, np.nan], np.float32)


def _up(x):
    return compute_dtype(np.asarray(x))


def _sigmoid(x):
    return special.expit(x)


def _softplus(x):
    return np.logaddexp(0, x).astype(x.dtype)


def _gelu(x):
    return 0.5 * x * (1 + special.erf(x / np.sqrt(2).astype(x.dtype)))


def _gelu_tanh(x):
    c = np.asarray(math.sqrt(2 / math.pi), x.dtype)
    return 0.5 * x * (1 + np.tanh(c * (x + np.asarray(0.044715, x.dtype) * x ** 3)))


def _sign(x):
    return np.where(np.isnan(x), np.zeros_like(x), np.sign(x))


def ieee_max(a, b):
    """fmax (a NaN operand yields the other) with IEEE 754-2019 zero order, -0 < +0:
    numpy's fmax returns either zero depending on its SIMD lane."""
    r = np.fmax(a, b)
    return np.where((a == 0) & (b == 0), a + b, r)


def ieee_min(a, b):
    """fmin with -0 < +0 (see ieee_max)."""
    r = np.fmin(a, b)
    return np.where((a == 0) & (b == 0), -((-a) + (-b)), r)


def zero_sign_of_extreme(out, y, axis, keepdims, largest: bool):
    """Fix the sign of zero results of a max (min) reduction: +0 (-0) wins when present."""
    if out.dtype.kind != "f":
        return out
    preferred = ~np.signbit(y) if largest else np.signbit(y)
    has = np.any((y == 0) & preferred, axis=axis, keepdims=keepdims)
    pick = (-0.0 if not largest else 0.0)
    other = (0.0 if not largest else -0.0)
    fixed = np.where(has, out.dtype.type(pick), out.dtype.type(other))
    return np.where(out == 0, fixed, out)


def _relu(x):
    return ieee_max(x, x.dtype.type(0)) if x.dtype.kind == "f" else np.maximum(x, 0)


# name -> (formula, numpy implementation, kinds accepted besides floats)
ACTIVATIONS = {
    "Gelu": ("0.5·x·(1 + erf(x/√2))", _gelu, ""),
    "GeluApprox": ("0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))", _gelu_tanh, ""),
    "Silu": ("x·σ(x)", lambda x: x * _sigmoid(x), ""),
    "Relu": ("max(x, 0); NaN → 0", _relu, "i"),
    "Sigmoid": ("σ(x) = 1/(1 + e^-x)", _sigmoid, ""),
    "Tanh": ("tanh(x)", np.tanh, ""),
    "Exp": ("e^x", np.exp, "c"),
    "Log": ("ln(x); log(0) = -inf, log(x<0) = NaN", np.log, "c"),
    "Sqrt": ("√x; sqrt(-0) = -0, sqrt(x<0) = NaN", np.sqrt, "c"),
    "Rsqrt": ("1/√x", lambda x: 1 / np.sqrt(x), ""),
    "Neg": ("-x", np.negative, "ic"),
    "Abs": ("|x|", np.abs, "i"),
    "Sin": ("sin(x)", np.sin, ""),
    "Cos": ("cos(x)", np.cos, ""),
    "Tan": ("tan(x)", np.tan, ""),
    "Atan": ("atan(x)", np.arctan, ""),
    "Recip": ("1/x", lambda x: 1 / x, ""),
    "Round": ("round half to even", np.rint, ""),
    "Floor": ("⌊x⌋", np.floor, ""),
    "Ceil": ("⌈x⌉", np.ceil, ""),
    "Sign": ("-1, 0 or +1 (sign(±0) = 0, sign(NaN) = 0)", _sign, "i"),
    "Softplus": ("ln(1 + e^x)", _softplus, ""),
    # e^x - 1 as RLX computes it, not expm1: tiny |x| cancels to 0 in f32
    "Elu": ("x if x > 0 else e^x - 1 (α = 1)", lambda x: np.where(x > 0, x, np.exp(x) - 1), ""),
    "Erf": ("erf(x)", special.erf, ""),
    "HardSwish": ("x·clamp(x + 3, 0, 6)/6", lambda x: x * np.clip(x + 3, 0, 6) / 6, ""),
    "HardSigmoid": ("clamp(x/6 + 0.5, 0, 1)", lambda x: np.clip(x / 6 + 0.5, 0, 1), ""),
    "Mish": ("x·tanh(softplus(x))", lambda x: x * np.tanh(_softplus(x)), ""),
    "Softsign": ("x/(1 + |x|)", lambda x: x / (1 + np.abs(x)), ""),
    "LogSigmoid": ("min(x, 0) - ln(1 + e^-|x|)",
                   lambda x: np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x))), ""),
}
ACTIVATION_ENUM = Enum("Activation", units=tuple(ACTIVATIONS))


def _kind_ok(dt: DType, extra: str) -> bool:
    return dt.is_float or (dt.is_int and "i" in extra) or (dt.is_complex and "c" in extra)


def _same(shapes):
    return shapes[0]


@dataclass(frozen=True)
class ActivationAttrs:
    op: str = attr(ACTIVATION_ENUM, doc="which scalar function")


def _check_activation(shapes, a, out):
    if a.op not in ACTIVATIONS:
        from ..ir.pyrlx_names import did_you_mean

        want(False, f"(C1) unknown activation {a.op!r}{did_you_mean(a.op, ACTIVATIONS)}")
    dt = shapes[0].dtype
    extra = ACTIVATIONS[a.op][2]
    want(_kind_ok(dt, extra),
         f"(C2) {a.op} is defined on float{'/int' if 'i' in extra else ''}"
         f"{'/complex' if 'c' in extra else ''} tensors, got {dt}")


def _ref_activation(ctx, x):
    fn = ACTIVATIONS[ctx.attrs.op][1]
    return np.asarray(fn(_up(x))).astype(ctx.out_np, copy=False)


def _unary_samples(rng, attrs, ints=False):
    out = [
        Sample((rng.standard_normal(7).astype(np.float32) * 3,), attrs, tags=("prime-length",)),
        Sample((_SPECIAL.copy(),), attrs, tags=("±0", "inf", "nan", "domain-edge")),
        Sample((np.float32(0.75),), attrs, tags=("0-d",)),
        Sample((np.zeros((0, 3), np.float32),), attrs, tags=("empty",)),
        Sample((rng.standard_normal((2, 3)),), attrs, tags=("f64",)),
        Sample((rng.standard_normal(5).astype(np.float16),), attrs, tags=("f16",)),
    ]
    if ints:
        out.append(Sample((np.array([-3, 0, 2, 127], np.int32),), attrs, tags=("int",)))
    return out


def _activation_samples(rng):
    out = []
    for name, (_, _, extra) in ACTIVATIONS.items():
        out += _unary_samples(rng, ActivationAttrs(name), ints="i" in extra)
    return out


register(OpDef(
    kind="Activation", family="elementwise", attrs=ActivationAttrs, payload="newtype",
    arity=1, caps=EW, infer=lambda s, a: s[0], check=_check_activation,
    reference=_ref_activation,
    doc="Applies one scalar function elementwise; shape and dtype are unchanged. The 29 "
        "functions:\n\n" + "\n".join(f"- `{k}`: {v[0]}" for k, v in ACTIVATIONS.items()),
    constraints=("C1: `op` is one of the 29 RLX activations.",
                 "C2: the input is float (Relu, Abs, Neg, Sign also take integers; Neg, Exp, "
                 "Log, Sqrt also take complex)."),
    samples=_activation_samples, dtypes=(DType.F32, DType.F64, DType.F16, DType.BF16),
    # f32 ULPs: the larger of OpenCL's full-profile limits and numpy's own (log: 4), composed;
    # floor: absolute slack ∝ |x| where the formula cancels (1 + erf, sin near π, x + 3);
    # Elu's e^x - 1 cancels against 1, so its slack is at least 2 eps.
    accuracy=per_op({
        "Gelu": ulp(20, floor=16), "GeluApprox": ulp(10, floor=8), "Silu": ulp(8),
        "Relu": exact(), "Sigmoid": ulp(6), "Tanh": ulp(5), "Exp": ulp(3), "Log": ulp(4),
        "Sqrt": ulp(3), "Rsqrt": ulp(2), "Neg": exact(), "Abs": exact(),
        "Sin": ulp(4, floor=2), "Cos": ulp(4, floor=2), "Tan": ulp(5, floor=2),
        "Atan": ulp(5), "Recip": ulp(3), "Round": exact(), "Floor": exact(),
        "Ceil": exact(), "Sign": exact(), "Softplus": ulp(8, floor=2), "Elu": ulp(4, floor=2, at_least=1),
        "Erf": ulp(16), "HardSwish": ulp(3, floor=2), "HardSigmoid": ulp(3, floor=1),
        "Mish": ulp(16, floor=2), "Softsign": ulp(3), "LogSigmoid": ulp(8, floor=2)}),
    notes="Round is half-to-even as RLX documents it (RLX's f32 CPU path rounds half "
          "away from zero). 16-bit floats are computed in f32 and rounded once. Elu is "
          "`exp(x) - 1` as RLX's kernels compute it (its kernel DSL manifest: "
          "`x > 0 ? x : exp(x) - 1`), not expm1: in f32, x = -1e-8 gives 0.",
))


# ── Cast ──────────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class CastAttrs:
    to: DType = attr(DTYPE, doc="target dtype")


def cast_array(x: np.ndarray, to: DType, np_to: np.dtype | None = None) -> np.ndarray:
    """RLX's Cast: float→int truncates toward zero and saturates (NaN → 0); int→int wraps;
    anything→bool is ``x != 0``; complex→real keeps the real part."""
    target = np_to if np_to is not None else to.np
    x = np.asarray(x)
    if to is DType.BOOL:
        return (x != 0).astype(target)
    if x.dtype.kind == "c" and target.kind != "c":
        x = x.real
    if to.is_int and x.dtype.kind in "fV":
        lo, hi = int_range(to)
        f = np.trunc(x.astype(np.float64))
        f = np.where(np.isnan(f), 0, np.clip(f, lo, hi))
        big = f >= 2.0**63
        out = f.astype(np.int64, copy=True) if to is not DType.U32 else f.astype(np.uint64)
        if to is DType.I64:
            out = np.where(big, np.int64(hi), out)
        return out.astype(target)
    with np.errstate(all="ignore"):
        if to in (DType.F16, DType.BF16) and x.dtype == np.float64:
            x = x.astype(np.float32)    # RLX narrows f64 to 16 bits through f32 (twice)
        # to.np first: a float64-mode target (f64 storage) still takes the declared type's
        # range and precision (overflow to inf, subnormals, underflow to 0)
        return x.astype(to.np).astype(target, copy=False)


def _ref_cast(ctx, x):
    return cast_array(x, ctx.attrs.to, ctx.out_np)


def _cast_samples(rng):
    f = np.array([-2.7, -0.5, 0.0, 0.5, 2.9, 300.0, -300.0, np.nan, np.inf], np.float32)
    return [
        Sample((f,), CastAttrs(DType.I32), tags=("truncate", "nan", "inf")),
        Sample((f,), CastAttrs(DType.U8), tags=("saturate",)),
        Sample((f,), CastAttrs(DType.BOOL), tags=("nan",)),
        Sample((np.array([1, -1, 300, 70000], np.int32),), CastAttrs(DType.I16), tags=("wrap",)),
        Sample((np.array([True, False]),), CastAttrs(DType.F32), tags=("bool",)),
        Sample((rng.standard_normal(5),), CastAttrs(DType.F16), tags=("round",)),
        Sample((np.array([70000.0, -1e6, 1e-8, -2e-8, 6e-8, 65504.0, 1e-5], np.float32),),
               CastAttrs(DType.F16), tags=("overflow", "subnormal", "hand"),
               expect=np.array([np.inf, -np.inf, 0.0, -0.0, 2.0**-24, 65504.0, 1e-5],
                               np.float16)),
        Sample((np.array([1.0 + 2.0**-11 + 2.0**-40, 3e38, 1e-39]),), CastAttrs(DType.F16),
               tags=("double-rounding", "f64", "hand"),
               expect=np.array([1.0, np.inf, 0.0], np.float16)),
        Sample((np.array([1e39, 1e-46, 2.0**-149]),), CastAttrs(DType.F32),
               tags=("overflow", "subnormal", "f64", "hand"),
               expect=np.array([np.inf, 0.0, 2.0**-149], np.float32)),
        Sample((rng.standard_normal(5).astype(np.float32),), CastAttrs(DType.BF16)),
        Sample((np.float32(3.5),), CastAttrs(DType.F64), tags=("0-d",)),
        Sample((np.zeros(0, np.float32),), CastAttrs(DType.I64), tags=("empty",)),
        # complex: real → complex has imaginary part 0, complex → real keeps the real part
        Sample((np.complex64([3 - 4j, complex(np.nan, 1), complex(-0.0, np.inf)]),),
               CastAttrs(DType.F32), tags=("complex", "nan", "hand"),
               expect=np.float32([3, np.nan, -0.0])),
        Sample((f,), CastAttrs(DType.C64), tags=("complex", "nan", "inf")),
        Sample(((rng.standard_normal(4) + 1j * rng.standard_normal(4)).astype(np.complex64),),
               CastAttrs(DType.C128), tags=("complex",)),
    ]


register(OpDef(
    kind="Cast", family="elementwise", attrs=CastAttrs, payload="struct", arity=1, caps=EW,
    infer=lambda s, a: s[0].with_dtype(a.to), reference=_ref_cast,
    doc="Converts each element to dtype `to`. float→float rounds to nearest; float→int "
        "truncates toward zero and saturates at the target's range, NaN becomes 0; int→int "
        "wraps (two's complement); x→bool is `x != 0`; bool→x is 0 or 1; complex→real "
        "keeps the real part.",
    constraints=("C1: the output has the input's dims and dtype `to`.",),
    samples=_cast_samples, accuracy=exact(signed_zeros=True),
    notes="A narrowing float Cast rounds to the target type's range and precision also in "
          "the float64 oracle. f64 → f16/bf16 rounds through f32, as RLX's CPU converts "
          "(two roundings: 1 + 2^-11 + 2^-40 gives 1, not the nearer 1 + 2^-10).",
))

register(OpDef(
    kind="StopGradient", family="elementwise", arity=1, caps=Caps.ELEMENTWISE,
    infer=lambda s, a: s[0], reference=lambda ctx, x: x.copy(),
    doc="Identity in the forward pass; reverse-mode autodiff sends no gradient through it.",
    constraints=("C1: the output equals the input (shape, dtype and values).",),
    samples=lambda rng: _unary_samples(rng, None, ints=True),
    accuracy=exact(signed_zeros=True),
))


from ._elementwise_binary import (  # noqa: E402,F401  (registers Binary ... Clamp)
    BINARIES, COMPARES, BinaryAttrs, ClampAttrs, CompareAttrs, clamp_int_bounds,
)
