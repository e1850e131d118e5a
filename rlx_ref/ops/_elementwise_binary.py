"""Elementwise binary/ternary ops: Binary, Compare, Where, Fma, Clamp (family `elementwise`).

Binary and Compare are tables of scalar formulas, one row per RLX sub-kind.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..conformance.accuracy import exact, per_op, reduction, ulp
from ..ir.dtype import DType
from ..ir.shape import Shape, broadcast, broadcast_dims
from .codec import F32, Enum, attr
from .elementwise import _SPECIAL, EW, _up, cast_array, ieee_max, ieee_min
from .opdef import Caps, OpDef, OpError, Sample, register, want

# ── Binary ────────────────────────────────────────────────────────────────

def _int_div(a, b):
    if np.any(b == 0):
        raise OpError("integer division by zero")
    # Truncating quotient without |a|: np.abs wraps at the type's minimum. a - fmod(a, b)
    # moves a toward zero onto a multiple of b, so the floor division is exact; MIN / -1
    # wraps to MIN (two's complement, as Add/Sub/Mul).
    with np.errstate(all="ignore"):
        return ((a - np.fmod(a, b)) // b).astype(np.result_type(a, b))


def _int_mod(a, b):
    if np.any(b == 0):
        raise OpError("integer modulo by zero")
    return np.fmod(a, b)


def _int_pow(a, b):
    if np.any(b < 0):
        raise OpError("integer Pow with a negative exponent")
    return np.power(a, b)


def _as_i64(x):
    if x.dtype.kind in "fV":
        return cast_array(x, DType.I64)
    return x.astype(np.int64)


def _bitwise(fn):
    def run(a, b):
        if a.dtype.kind in "iub":
            return fn(a, b)
        return fn(_as_i64(a), _as_i64(b)).astype(a.dtype)
    return run


def _shift(left):
    def run(a, b):
        if a.dtype.kind in "iu":
            bits = a.dtype.itemsize * 8
            n = (b.astype(np.int64) % bits).astype(a.dtype)
            return np.left_shift(a, n) if left else np.right_shift(a, n)
        ai, n = _as_i64(a), _as_i64(b) % 64
        return (np.left_shift(ai, n) if left else np.right_shift(ai, n)).astype(a.dtype)
    return run


# name -> (formula, float impl, int impl or None (float only))
BINARIES = {
    "Add": ("a + b (integers wrap)", np.add, np.add),
    "Sub": ("a - b (integers wrap)", np.subtract, np.subtract),
    "Mul": ("a · b (integers wrap)", np.multiply, np.multiply),
    "Div": ("a / b; integers truncate toward zero, MIN / -1 wraps to MIN and divide-by-zero "
            "is an error",
            np.divide, _int_div),
    "Max": ("max(a, b); a NaN operand yields the other operand; max(-0, +0) = +0",
            lambda a, b: ieee_max(a, b), np.maximum),
    "Min": ("min(a, b); a NaN operand yields the other operand; min(-0, +0) = -0",
            lambda a, b: ieee_min(a, b), np.minimum),
    "Pow": ("a^b (IEEE pow)", np.power, _int_pow),
    "Mod": ("C fmod: a - trunc(a/b)·b, the sign of a", np.fmod, _int_mod),
    "BitAnd": ("a & b on integer values (floats truncate to i64 first)",
               _bitwise(np.bitwise_and), _bitwise(np.bitwise_and)),
    "BitOr": ("a | b", _bitwise(np.bitwise_or), _bitwise(np.bitwise_or)),
    "BitXor": ("a ^ b", _bitwise(np.bitwise_xor), _bitwise(np.bitwise_xor)),
    "Shl": ("a << (b mod bit width)", _shift(True), _shift(True)),
    "Shr": ("a >> (b mod bit width), arithmetic for signed", _shift(False), _shift(False)),
    "Atan2": ("atan2(a, b): the angle of the point (b, a)", np.arctan2, None),
}
BINARY_ENUM = Enum("BinaryOp", units=tuple(BINARIES))
_BITWISE = ("BitAnd", "BitOr", "BitXor", "Shl", "Shr")


@dataclass(frozen=True)
class BinaryAttrs:
    op: str = attr(BINARY_ENUM, doc="which binary function")


def _check_same_dtype(shapes, what):
    a, b = shapes[0].dtype, shapes[1].dtype
    want(a == b, f"(C2) {what} operands must share one dtype, got {a} and {b}; "
                 "insert a Cast (DType.promote gives the common dtype)")


def _check_binary(shapes, a, out):
    want(a.op in BINARIES, f"(C1) unknown binary op {a.op!r}")
    _check_same_dtype(shapes, a.op)
    dt = shapes[0].dtype
    if dt.is_bool:
        want(a.op in ("BitAnd", "BitOr", "BitXor", "Max", "Min"),
             f"(C3) {a.op} is not defined on bool tensors")
    if dt.is_int:
        want(BINARIES[a.op][2] is not None, f"(C3) {a.op} is defined on floats only, got {dt}")
    if dt.is_complex:
        want(a.op in ("Add", "Sub", "Mul", "Div"), f"(C3) {a.op} is undefined for complex")


def _ref_binary(ctx, a, b):
    _, f_float, f_int = BINARIES[ctx.attrs.op]
    if a.dtype.kind in "iub":
        return np.asarray(f_int(a, b)).astype(ctx.out_np, copy=False)
    return np.asarray(f_float(_up(a), _up(b))).astype(ctx.out_np, copy=False)


def _pair_samples(rng, attrs, ints=True, floats=True):
    x = rng.standard_normal((2, 3)).astype(np.float32) * 2
    out = []
    if floats:
        out += [
            Sample((x, rng.standard_normal((2, 3)).astype(np.float32) + 0.5), attrs),
            Sample((x, rng.standard_normal(3).astype(np.float32) + 0.5), attrs,
                   tags=("broadcast",)),
            Sample((rng.standard_normal((3, 1)).astype(np.float32),
                    rng.standard_normal((1, 4)).astype(np.float32)), attrs,
                   tags=("broadcast", "size-1")),
            Sample((x, np.float32(1.5)), attrs, tags=("0-d", "broadcast")),
            Sample((_SPECIAL, _SPECIAL[::-1].copy()), attrs, tags=("inf", "nan", "±0")),
            Sample((np.zeros((0, 3), np.float32), np.ones(3, np.float32)), attrs,
                   tags=("empty",)),
            Sample((rng.standard_normal(5), rng.standard_normal(5) + 2.0), attrs, tags=("f64",)),
        ]
    if ints:
        b = np.array([2, 2, -3, 4, 3], np.int32)
        if getattr(attrs, "op", "") in ("Pow", "Shl", "Shr"):
            b = np.abs(b)
        out.append(Sample((np.array([7, -7, 5, -9, 0], np.int32), b), attrs, tags=("int",)))
    return out


def _int_div_extremes():
    """Div at the type's minimum and maximum: a quotient that |a| would wrap."""
    out = []
    for dt in (np.int8, np.int32, np.int64):
        lo, hi = int(np.iinfo(dt).min), int(np.iinfo(dt).max)
        a = np.array([lo, lo, lo, hi, hi, lo + 1, -7], dt)
        b = np.array([2, -1, 3, -1, lo, -1, 2], dt)
        want = np.array([lo // 2, lo, -(-lo // 3), -hi, 0, hi, -3], dt)
        out.append(Sample((a, b), BinaryAttrs("Div"), tags=("int", "extreme", "hand"),
                          expect=want))
    return out


def _binary_samples(rng):
    out = []
    for name, (_, _, f_int) in BINARIES.items():
        out += _pair_samples(rng, BinaryAttrs(name), ints=f_int is not None)
        if name in ("Add", "Sub", "Mul", "Div"):      # RLX's C64 arithmetic (BinaryC64)
            z = lambda *s: (rng.standard_normal(s) + 1j * rng.standard_normal(s) + 0.5  # noqa
                            ).astype(np.complex64)
            out.append(Sample((z(2, 3), z(3)), BinaryAttrs(name), tags=("complex",
                                                                        "broadcast")))
    return out + _int_div_extremes()


def _broadcast_infer(shapes, a):
    return broadcast(shapes[0], shapes[1])


register(OpDef(
    kind="Binary", family="elementwise", attrs=BinaryAttrs, payload="newtype", arity=2,
    caps=EW, infer=_broadcast_infer, check=_check_binary, reference=_ref_binary,
    input_names=("a", "b"),
    doc="Applies one binary function elementwise with NumPy broadcasting (dims align from "
        "the right; size-1 and missing dims stretch). The output dtype is the operands' "
        "dtype. The 14 functions:\n\n" + "\n".join(f"- `{k}`: {v[0]}" for k, v in
                                                 BINARIES.items()),
    constraints=("C1: `op` is one of the 14 RLX binary ops.",
                 "C2: both operands have the same dtype (RLX infers the left one's).",
                 "C3: Atan2 is float-only; complex takes only Add/Sub/Mul/Div; bool takes only "
                 "BitAnd/BitOr/BitXor/Max/Min.",
                 "C4: the operand shapes broadcast."),
    samples=_binary_samples,
    accuracy=per_op({   # f32 ULPs: IEEE ops 0.5 (+ margin), OpenCL limits for the rest
        "Add": ulp(1), "Sub": ulp(1), "Mul": ulp(1), "Div": ulp(3), "Max": exact(),
        "Min": exact(), "Pow": ulp(16), "Mod": exact(), "BitAnd": exact(),
        "BitOr": exact(), "BitXor": exact(), "Shl": exact(), "Shr": exact(),
        "Atan2": ulp(6)}),
    notes="Integer Div/Mod by zero is an error rather than undefined behaviour (RLX's CPU, "
          "Rust `/`, panics). Integer Div truncates toward zero as Rust's `/`; MIN / -1, "
          "which Rust's `/` also panics on, wraps to MIN as `wrapping_div` (Add/Sub/Mul "
          "wrap too).",
))


# ── Compare ───────────────────────────────────────────────────────────────

COMPARES = {"Eq": np.equal, "Ne": np.not_equal, "Lt": np.less, "Le": np.less_equal,
            "Gt": np.greater, "Ge": np.greater_equal}
COMPARE_ENUM = Enum("CmpOp", units=tuple(COMPARES))


@dataclass(frozen=True)
class CompareAttrs:
    op: str = attr(COMPARE_ENUM, doc="which comparison")


def _check_compare(shapes, a, out):
    want(a.op in COMPARES, f"(C1) unknown comparison {a.op!r}")
    _check_same_dtype(shapes, a.op)


def _compare_samples(rng):
    out = []
    for name in COMPARES:
        out += _pair_samples(rng, CompareAttrs(name))
        out.append(Sample((np.array([1.0, 2.0, 2.0], np.float32),
                           np.array([2.0, 2.0, 1.0], np.float32)), CompareAttrs(name),
                          tags=("ties",)))
    return out


register(OpDef(
    kind="Compare", family="elementwise", attrs=CompareAttrs, payload="newtype", arity=2,
    caps=EW, check=_check_compare,
    infer=lambda s, a: broadcast(s[0], s[1]).with_dtype(DType.BOOL),
    reference=lambda ctx, a, b: COMPARES[ctx.attrs.op](a, b),
    doc="Compares elementwise with broadcasting and returns a bool tensor. IEEE rules: every "
        "comparison with NaN is false except `Ne`, which is true; -0 == +0.",
    constraints=("C1: `op` is Eq, Ne, Lt, Le, Gt or Ge.",
                 "C2: both operands have the same dtype.", "C3: the shapes broadcast."),
    samples=_compare_samples, accuracy=exact(),
))


# ── Where, Fma, Clamp ─────────────────────────────────────────────────────

def _check_where(shapes, a, out):
    c, t, f = shapes
    want(t.dtype == f.dtype, f"(C1) Where branches must share one dtype, got {t.dtype} and "
                             f"{f.dtype}")


def _infer_where(shapes, a):
    c, t, f = shapes
    return Shape(broadcast_dims(c.dims, broadcast_dims(t.dims, f.dims)), t.dtype)


def _where_samples(rng):
    cond = np.array([[True, False, True], [False, False, True]])
    x = rng.standard_normal((2, 3)).astype(np.float32)
    return [
        Sample((cond, x, -x), None),
        Sample((cond, x, np.float32(0.0)), None, tags=("broadcast", "0-d")),
        Sample((np.array([1.0, 0.0, -0.0, np.nan], np.float32), np.ones(4, np.float32),
                np.zeros(4, np.float32)), None, tags=("numeric-cond", "nan", "±0")),
        Sample((np.array([True]), np.arange(3, dtype=np.int32), np.zeros(3, np.int32)), None,
               tags=("int", "size-1")),
        Sample((np.zeros(0, bool), np.zeros(0, np.float32), np.zeros(0, np.float32)), None,
               tags=("empty",)),
    ]


register(OpDef(
    kind="Where", family="elementwise", arity=3, caps=Caps.ELEMENTWISE, check=_check_where,
    infer=_infer_where, input_names=("cond", "on_true", "on_false"),
    reference=lambda ctx, c, t, f: np.where(c != 0, t, f),
    doc="Selects `on_true` where `cond` is non-zero and `on_false` elsewhere, with "
        "broadcasting over all three operands. `cond` may be bool or numeric (NaN counts as "
        "true, -0 as false).",
    constraints=("C1: on_true and on_false share one dtype, which is the output dtype.",
                 "C2: the three shapes broadcast."),
    samples=_where_samples, accuracy=exact(signed_zeros=True),
))


def _fma_exact(a, b, c, dtype):
    """a·b + c rounded once: exact rational arithmetic per element (f64 inputs)."""
    out = np.empty(a.shape, np.float64)
    for idx in np.ndindex(a.shape):
        x, y, z = float(a[idx]), float(b[idx]), float(c[idx])
        if not all(map(math.isfinite, (x, y, z))) or (x * y == 0 and z == 0):
            # IEEE specials, and the sign of an exact zero: the product of a zero is exact
            # in float, so x·y + z gives fma's zero sign (-0 only for -0 + -0)
            out[idx] = x * y + z
        else:
            exact = Fraction(x) * Fraction(y) + Fraction(z)
            try:
                out[idx] = float(exact)
            except OverflowError:          # beyond the f64 range: rounds to ±inf
                out[idx] = math.inf if exact > 0 else -math.inf
    return out.astype(dtype)


def _ref_fma(ctx, a, b, c):
    a, b, c = np.broadcast_arrays(a, b, c)
    if a.dtype.kind in "iu":
        return a * b + c
    if a.dtype == np.float64:
        return _fma_exact(a, b, c, np.float64)
    return _fma_round_to_odd(a, b, c).astype(ctx.out_np)


def _fma_round_to_odd(a, b, c):
    """a·b + c for ≤24-bit significands, rounded once when cast to the target dtype.

    a·b is exact in f64; a + b's rounding error comes from TwoSum. Nudging an inexact
    f64 sum to the odd neighbour (round-to-odd) makes the later rounding to f32/f16/bf16
    correct: f64 carries more than 24 + 2 bits, so no double-rounding tie can arise.
    """
    p = a.astype(np.float64) * b.astype(np.float64)
    c = c.astype(np.float64)
    with np.errstate(all="ignore"):
        s = p + c
        bv = s - p
        err = (p - (s - bv)) + (c - bv)
    even = (s.view(np.int64) & 1) == 0
    nudge = np.isfinite(s) & np.isfinite(err) & (err != 0) & even
    toward = np.where(err > 0, np.inf, -np.inf)
    return np.where(nudge, np.nextafter(s, toward), s)


def _check_fma(shapes, a, out):
    dts = {s.dtype for s in shapes}
    want(len(dts) == 1, f"(C1) Fma operands must share one dtype, got "
                        f"{', '.join(str(s.dtype) for s in shapes)}")
    want(not shapes[0].dtype.is_bool, "(C1) Fma is not defined on bool")


def _fma_samples(rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    return [
        Sample((x, x[::-1].copy(), np.ones((3, 4), np.float32)), None),
        Sample((x, np.float32(2.0), rng.standard_normal(4).astype(np.float32)), None,
               tags=("broadcast", "0-d")),
        Sample((np.array([1 + 2**-23], np.float64), np.array([1 - 2**-23], np.float64),
                np.array([-1.0])), None, tags=("single-rounding", "f64")),
        Sample((np.array([2, -3], np.int32), np.array([4, 5], np.int32),
                np.array([1, 1], np.int32)), None, tags=("int",)),
        Sample((_SPECIAL, _SPECIAL, _SPECIAL[::-1].copy()), None, tags=("inf", "nan")),
        Sample(tuple(np.array(v, np.float64) for v in _ZERO_SIGNS), None,
               tags=("±0", "f64", "hand"), expect=np.array(_ZERO_SIGNS_WANT)),
        Sample(tuple(np.array(v, np.float32) for v in _ZERO_SIGNS), None,
               tags=("±0", "hand"), expect=np.array(_ZERO_SIGNS_WANT, np.float32)),
    ]


# fma(a, b, c) with an exact zero result: -0 only when a·b and c are both -0; an exact
# cancellation of non-zero terms gives +0 (round to nearest)
_ZERO_SIGNS = ([0.0, 0.0, -0.0, 2.0, -1.0],
               [-0.0, -0.0, 5.0, 3.0, 0.0],
               [-0.0, 0.0, -0.0, -6.0, -0.0])
_ZERO_SIGNS_WANT = [-0.0, 0.0, -0.0, 0.0, -0.0]


register(OpDef(
    kind="Fma", family="elementwise", arity=3, caps=Caps.ELEMENTWISE, check=_check_fma,
    infer=lambda s, a: Shape(broadcast_dims(broadcast_dims(s[0].dims, s[1].dims), s[2].dims),
                             s[0].dtype),
    input_names=("a", "b", "c"), reference=_ref_fma,
    doc="Fused multiply-add `a·b + c` with one rounding, elementwise with broadcasting.",
    constraints=("C1: the three operands share one dtype (not bool).",
                 "C2: the shapes broadcast."),
    samples=_fma_samples,
    # 1 ulp + eps·(|a·b| + |c|): the documented Mul + Add lowering rounds a·b first
    accuracy=reduction(1, 1, "abs"),
    notes="RLX's native CPU kernel needs equal shapes; backends without Fma lower it to Mul + "
          "Add, which rounds twice.",
))


@dataclass(frozen=True)
class ClampAttrs:
    min: float = attr(F32, doc="lower bound")
    max: float = attr(F32, doc="upper bound")


def clamp_int_bounds(lo: float, hi: float, dtype) -> tuple[int, int]:
    """(C2) The bounds of an integer Clamp over numpy ``dtype``: rounded inward, saturated.

    The one rule the oracle, the decomposition and every kernel renderer use. A NaN bound
    is no bound, as the NaN-ignoring max/min make it for floats; ±inf saturate to the
    type's range like any bound beyond it.
    """
    info = np.iinfo(dtype)

    def inward(v: float, rnd, absent: int) -> int:
        if math.isnan(v):
            return absent
        if math.isinf(v):
            return info.max if v > 0 else info.min
        return min(max(rnd(v), info.min), info.max)

    return inward(lo, math.ceil, info.min), inward(hi, math.floor, info.max)


def _ref_clamp(ctx, x):
    lo, hi = ctx.attrs.min, ctx.attrs.max
    if x.dtype.kind in "iu":
        lo_i, hi_i = clamp_int_bounds(lo, hi, x.dtype)
        return np.minimum(np.maximum(x, lo_i), hi_i).astype(x.dtype)
    y = _up(x)
    return ieee_min(ieee_max(y, y.dtype.type(lo)), y.dtype.type(hi)).astype(x.dtype)


def _clamp_samples(rng):
    return [
        Sample((rng.standard_normal(11).astype(np.float32) * 2,), ClampAttrs(-1.0, 1.0)),
        Sample((_SPECIAL,), ClampAttrs(-1.0, 2.0), tags=("nan", "inf")),
        Sample((np.array([-5, 0, 5], np.int32),), ClampAttrs(-1.5, 2.5), tags=("int",)),
        Sample((np.float32(4.0),), ClampAttrs(0.0, 1.0), tags=("0-d",)),
        Sample((np.arange(3, dtype=np.float32),), ClampAttrs(2.0, 1.0), tags=("lo>hi",)),
        Sample((_SPECIAL,), ClampAttrs(-np.inf, np.nan), tags=("inf-bound", "nan-bound")),
        Sample((np.array([-7, 0, 7], np.int32),), ClampAttrs(np.nan, np.inf),
               tags=("int", "inf-bound")),
    ]


register(OpDef(
    kind="Clamp", family="elementwise", attrs=ClampAttrs, payload="struct", arity=1,
    infer=lambda s, a: s[0], reference=_ref_clamp,
    check=lambda s, a, o: want(not s[0].dtype.is_bool, "(C1) Clamp is not defined on bool"),
    doc="`min(max(x, min), max)` elementwise with the NaN-ignoring max/min, so NaN becomes "
        "`min` (then `max` if min > max) and a NaN bound is no bound. Integer tensors clamp "
        "to the bounds rounded inward (C2).",
    constraints=("C1: the input is numeric (not bool).",
                 "C2: on an integer tensor the bounds round inward (min up, max down) and "
                 "saturate to the dtype's range; ±inf saturate too and a NaN bound is no "
                 "bound, so every bound is valid."),
    samples=_clamp_samples, accuracy=exact(),
    notes="RLX's text form (serde_json) prints a non-finite bound as `null`, which does not "
          "parse back; rlx_ref's text form writes it as the string \"inf\", \"-inf\" or "
          "\"nan\" (docs/ir.md), so such graphs round-trip and their repros reload. The "
          "samples and the conformance edge cases cover ±inf and NaN bounds.",
))
