"""RLX's low-precision element formats (``ScaledFormat``), scale layouts (``ScaleLayout``)
and their codec, as ``rlx-ir/src/lowp_codec.rs`` defines them.

A format is a sign bit above ``exp_bits`` exponent and ``mant_bits`` mantissa bits, one
code per byte (bits above the sign are ignored). Decoding is closed-form with IEEE-style
subnormals; the specials are per family: OCP E4M3 has one NaN (S.1111.111), OCP E5M2 has
inf and NaN at the top exponent, the AMD FNUZ formats have one NaN at 0x80 (no -0, no
inf), FP6, FP4 and the ``Custom`` minifloats are all finite. Encoding is RLX's exhaustive
search: the finite code nearest in value, ties to the code whose lowest bit is 0, then to
the lowest code, so an exact zero (also -0) encodes as +0; NaN encodes as code 0, and so
does ±inf (every finite code is then infinitely far and code 0 is the first even one),
while a finite value past the range saturates to the largest finite code.

Values: a unit format is its name (``"F8E4M3"``); ``Custom`` is
``("Custom", CustomFormat(exp_bits, mant_bits, bias))``; a layout is ``"PerTensor"``,
``("BlockMxE8M0", MxBlock(32))`` or ``("Nvfp4", Nvfp4Group(16))``.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ._fake_quant_codec import StructOf
from .codec import U32, Enum, _Int, attr

U8 = _Int("u8", 0, 255)
I8 = _Int("i8", -128, 127)

NAMED = ("F8E4M3", "F8E5M2", "F8E4M3Fnuz", "F8E5M2Fnuz", "F6E2M3", "F6E3M2", "F4E2M1")
_FIELDS = {"F8E4M3": (4, 3, 7), "F8E5M2": (5, 2, 15), "F8E4M3Fnuz": (4, 3, 8),
           "F8E5M2Fnuz": (5, 2, 16), "F6E2M3": (2, 3, 1), "F6E3M2": (3, 2, 3),
           "F4E2M1": (2, 1, 1)}


@dataclass(frozen=True)
class CustomFormat:
    """The fields of ``ScaledFormat::Custom`` (an all-finite ``fNeXmY`` minifloat)."""

    exp_bits: int = attr(U8, doc="exponent bits (>= 1)")
    mant_bits: int = attr(U8, doc="mantissa bits (1 + exp_bits + mant_bits <= 8)")
    bias: int = attr(I8, doc="exponent bias (IEEE-style: 2^(exp_bits-1) - 1)")


@dataclass(frozen=True)
class MxBlock:
    """The fields of ``ScaleLayout::BlockMxE8M0``."""

    block: int = attr(U32, doc="elements along K sharing one E8M0 scale (OCP MX: 32)")


@dataclass(frozen=True)
class Nvfp4Group:
    """The fields of ``ScaleLayout::Nvfp4``."""

    group: int = attr(U32, doc="elements along K sharing one E4M3 scale (NVFP4: 16)")


FORMAT = Enum("ScaledFormat", units=NAMED, data={"Custom": StructOf(CustomFormat)})
LAYOUT = Enum("ScaleLayout", units=("PerTensor",),
              data={"BlockMxE8M0": StructOf(MxBlock), "Nvfp4": StructOf(Nvfp4Group)})


def custom(exp_bits: int, mant_bits: int, bias: int | None = None) -> tuple:
    """``ScaledFormat::Custom`` (IEEE bias ``2^(exp_bits-1) - 1`` unless given)."""
    b = (1 << (exp_bits - 1)) - 1 if bias is None else bias
    return ("Custom", CustomFormat(exp_bits, mant_bits, b))


def mx(block: int = 32) -> tuple:
    return ("BlockMxE8M0", MxBlock(block))


def nvfp4(group: int = 16) -> tuple:
    return ("Nvfp4", Nvfp4Group(group))


def fields(fmt) -> tuple:
    """``(exp_bits, mant_bits, bias)``."""
    if isinstance(fmt, str):
        return _FIELDS[fmt]
    c = fmt[1]
    return (c.exp_bits, c.mant_bits, c.bias)


def format_problem(fmt) -> str:
    """Why ``fmt`` cannot be decoded ('' when it can): RLX's ``custom`` rules."""
    e, m, _ = fields(fmt)
    if e < 1 or 1 + e + m > 8:
        return (f"a Custom format needs exp_bits >= 1 and 1 + exp_bits + mant_bits <= 8 "
                f"(one code per byte), got exp_bits {e}, mant_bits {m}")
    return ""


def layout_tag(layout) -> str:
    return layout if isinstance(layout, str) else layout[0]


def block_of(layout) -> int:
    """Elements along the last axis sharing one block scale (1 for PerTensor, whose one
    scale the callers treat apart)."""
    if layout_tag(layout) == "PerTensor":
        return 1
    return layout[1].block if layout_tag(layout) == "BlockMxE8M0" else layout[1].group


@functools.lru_cache(maxsize=None)
def decode_table(fmt) -> np.ndarray:
    """Every code's f32 value (2**bit_width entries), closed-form as RLX decodes it."""
    e_bits, m_bits, bias = fields(fmt)
    codes = np.arange(1 << (1 + e_bits + m_bits), dtype=np.int64)
    sign = np.where((codes >> (e_bits + m_bits)) & 1 == 1, np.float32(-1), np.float32(1))
    exp = (codes >> m_bits) & ((1 << e_bits) - 1)
    mant = (codes & ((1 << m_bits) - 1)).astype(np.float32)
    frac = mant / np.float32(1 << m_bits)
    with np.errstate(over="ignore", under="ignore"):
        pow_sub = np.float32(np.ldexp(1.0, 1 - bias))
        pow_norm = np.ldexp(1.0, exp - bias).astype(np.float32)
        val = np.where(exp == 0, frac * pow_sub, (np.float32(1) + frac) * pow_norm)
        out = (sign * val).astype(np.float32)
    max_exp = (1 << e_bits) - 1
    if fmt in ("F8E4M3Fnuz", "F8E5M2Fnuz"):       # the -0 slot (0x80) is the one NaN
        out[1 << (e_bits + m_bits)] = np.nan
    elif fmt == "F8E5M2":                           # IEEE-like top exponent
        top = exp == max_exp
        out[top & (mant == 0)] = (sign * np.float32(np.inf))[top & (mant == 0)]
        out[top & (mant != 0)] = np.nan
    elif fmt == "F8E4M3":                           # only S.1111.111 is NaN
        out[(exp == max_exp) & (mant == (1 << m_bits) - 1)] = np.nan
    out.setflags(write=False)
    return out


def decode(fmt, codes) -> np.ndarray:
    """f32 values of ``codes`` (bits above the format's width are ignored)."""
    table = decode_table(fmt)
    return table[np.asarray(codes, np.int64) & (len(table) - 1)]


@functools.lru_cache(maxsize=None)
def _grid(fmt):
    """Distinct finite values ascending (f64) and, for each, the code RLX's search picks
    among equal values (lowest bit 0 first, then the lowest code): ±0 → +0."""
    table = decode_table(fmt)
    codes = np.arange(len(table))
    fin = np.isfinite(table)
    order = np.lexsort((codes[fin], codes[fin] & 1, table[fin].astype(np.float64)))
    vals, cs = table[fin][order].astype(np.float64), codes[fin][order]
    first = np.ones(len(vals), bool)
    first[1:] = vals[1:] != vals[:-1]
    return vals[first], cs[first]


def max_finite(fmt) -> float:
    """The largest finite magnitude of ``fmt`` (the scale's amax divisor)."""
    vals, _ = _grid(fmt)
    return float(np.float32(max(abs(vals[0]), abs(vals[-1]))))


def encode(fmt, x) -> np.ndarray:
    """RLX's nearest-code search (see the module doc), vectorised: uint8 codes."""
    x = np.asarray(x, np.float32)
    vals, cs = _grid(fmt)
    xd = x.astype(np.float64).ravel()
    hi = np.clip(np.searchsorted(vals, xd, "left"), 0, len(vals) - 1)
    lo = np.clip(np.searchsorted(vals, xd, "right") - 1, 0, len(vals) - 1)
    with np.errstate(invalid="ignore"):
        e_lo, e_hi = np.abs(vals[lo] - xd), np.abs(vals[hi] - xd)
    c_lo, c_hi = cs[lo], cs[hi]
    # equal distance: the code with the lower lowest bit, then the lower code
    hi_first = ((c_hi & 1) < (c_lo & 1)) | (((c_hi & 1) == (c_lo & 1)) & (c_hi < c_lo))
    tie_pick = np.where(hi_first, c_hi, c_lo)
    out = np.where(e_hi < e_lo, c_hi, np.where(e_lo < e_hi, c_lo, tie_pick))
    out = np.where(np.isfinite(xd), out, 0)          # NaN and ±inf: code 0
    return out.astype(np.uint8).reshape(x.shape)


def f32_to_e8m0(s) -> np.ndarray:
    """E8M0 bytes: ``ceil(log2 s) + 127`` clamped to 0..254 (f32 log2); a non-finite or
    non-positive scale gives 0 (2^-127)."""
    s = np.asarray(s, np.float32)
    good = np.isfinite(s) & (s > 0)
    with np.errstate(all="ignore"):
        e = np.ceil(np.log2(np.where(good, s, np.float32(1)))).astype(np.int64) + 127
    return np.where(good, np.clip(e, 0, 254), 0).astype(np.uint8)


def e8m0_to_f32(b) -> np.ndarray:
    """``2^(b - 127)`` as f32; byte 0xFF is NaN."""
    b = np.asarray(b, np.int64)
    with np.errstate(over="ignore"):     # byte 255 (2^128) overflows; it is NaN below
        v = np.ldexp(1.0, b - 127).astype(np.float32)
    return np.where(b == 0xFF, np.float32(np.nan), v).astype(np.float32)
