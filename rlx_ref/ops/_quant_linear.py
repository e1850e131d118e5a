"""The 4-operand DequantMatMul forms: operand layouts and weight decoding.

``(x, w_q, scale, zp)``: Int8Block, Int8BlockAsym, Int4Block, Fp8E4m3/Fp8E5m2 and
Nvfp4Block store W as ``[k, n]`` (row-major, codes of column j at ``p*n + j``) with block
scales ``[ceil(k/block), n]``; their decoding is the scheme records' own
(``rlx_ref.quant.linear.unpack_linear``, which says where RLX's kernels disagree and which
reading it follows). The MLX schemes, which have no record, store W as ``[n, k]`` (one
packed row per output feature) with ``[n, k/group_size]`` group scales, decoded here as
RLX's ``rlx-mlx-io`` does. Every decoder returns W as f32 ``[k, n]``.
"""
from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from ..ir.dtype import DType
from ..quant.linear import LINEAR, unpack_linear
from . import _quant_scheme as S
from .opdef import OpError, want

NVFP4_GROUP = 16    # RLX's NVFP4_GROUP_SIZE: elements along K sharing one FP8 scale
# OCP E2M1 (FP4) values of codes 0..15 (the format's definition; MLX/NVFP4 share it)
FP4_E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                     -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], np.float32)
_MLX_PACK = {2: (4, 1), 3: (8, 3), 4: (2, 1), 5: (8, 5), 6: (4, 3), 8: (1, 1)}  # pf, bytes


@dataclass(frozen=True)
class Layout:
    """What each of w_q, scale and zp must be: element count and dtypes (count None: any)."""

    codes: int
    code_dtypes: tuple
    scale: int
    scale_dtype: DType
    zp: int | None
    what: str          # one line for docs and messages


_F32, _U8, _I8 = DType.F32, DType.U8, DType.I8


def layout(scheme, k: int, n: int, cid: str) -> Layout:
    """The operand layout of a 4-operand scheme for W of K x N; OpError when undefined."""
    name = S.name_of(scheme)
    if name in ("Int8Block", "Int8BlockAsym", "Int4Block"):
        bs = S.field(scheme, "block_size")
        want(bs > 0, f"({cid}) {S.text(scheme)}: block_size must be positive")
        nb = -(-k // bs) * n
        if name == "Int4Block":
            return Layout(-(-k * n // 2), (_U8,), nb, _F32, None,
                          "w_q: k*n signed 4-bit codes (-8..7), low nibble first")
        asym = name == "Int8BlockAsym"
        return Layout(k * n, (_I8, _U8), nb, _F32, nb if asym else None,
                      "w_q: k*n int8 codes" + ("; zp per block" if asym else ""))
    if name in ("Fp8E4m3", "Fp8E5m2"):
        return Layout(k * n, (_U8,), n, _F32, None, "w_q: k*n FP8 codes; scale per column")
    if name == "Nvfp4Block":
        return Layout(-(-k * n // 2), (_U8,), -(-k // NVFP4_GROUP) * n, _U8, 1,
                      "w_q: k*n E2M1 nibbles; scale: E4M3 bytes; zp: the f32 global scale")
    if name in ("MlxAffine", "MlxMxfp4", "MlxMxfp8"):
        gs = S.field(scheme, "group_size")
        want(gs > 0 and k % gs == 0,
             f"({cid}) {S.text(scheme)}: K = {k} must be a positive multiple of group_size")
        groups = n * (k // gs)
        if name == "MlxAffine":
            bits = S.field(scheme, "bits")
            want(bits in _MLX_PACK, f"({cid}) {S.text(scheme)}: bits must be one of "
                                    f"{sorted(_MLX_PACK)}")
            pf, bpp = _MLX_PACK[bits]
            want(gs % pf == 0, f"({cid}) {S.text(scheme)}: group_size must be a multiple of "
                               f"{pf} (the codes one {bpp}-byte pack holds)")
            return Layout(groups * (gs // pf) * bpp, (_U8,), groups, _F32, groups,
                          "w_q: [n, k] codes; scale, zp: f32 [n, k/group_size] scales, biases")
        if name == "MlxMxfp4":
            want(gs % 2 == 0, f"({cid}) {S.text(scheme)}: group_size must be even")
            return Layout(n * k // 2, (_U8,), groups, _U8, None, "w_q: [n, k] E2M1 nibbles")
        return Layout(n * k, (_U8,), groups, _U8, None, "w_q: [n, k] E4M3 codes")
    raise OpError(f"({cid}) RLX's CPU has no DequantMatMul kernel for {S.text(scheme)} "
                  "(it panics), so rlx_ref does not define it")


def unpack_codes(raw: np.ndarray, bits: int, count: int) -> np.ndarray:
    """``count`` unsigned codes of ``bits`` bits from a little-endian (LSB-first) bit stream.

    Covers RLX's nibble order (low nibble first) and MLX's 2/3/4/5/6/8-bit packs, whose
    3- and 5-byte packs are the same stream cut into whole bytes.
    """
    stream = np.unpackbits(np.asarray(raw, np.uint8).reshape(-1), bitorder="little")
    b = stream[: count * bits].reshape(count, bits).astype(np.uint32)
    return (b << np.arange(bits, dtype=np.uint32)).sum(axis=1, dtype=np.uint32)


def fp8_values(codes: np.ndarray, e5m2: bool = False) -> np.ndarray:
    """OCP FP8 codes as f32 (E4M3: no infinities, S.1111.111 is NaN; E5M2: IEEE-like)."""
    t = ml_dtypes.float8_e5m2 if e5m2 else ml_dtypes.float8_e4m3fn
    return np.asarray(codes, np.uint8).view(t).astype(np.float32)


def _e8m0(codes: np.ndarray) -> np.ndarray:
    """MLX's E8M0 group scale: 2**(s - 127) as f32 (255 gives inf, 0 gives 2**-127)."""
    with np.errstate(over="ignore"):
        return np.ldexp(1.0, np.asarray(codes, np.int64) - 127).astype(np.float32)


def weight(scheme, w_q, scale, zp, k: int, n: int) -> np.ndarray:
    """W as f32 ``[k, n]``, each element rounded as the scheme defines it."""
    name = S.name_of(scheme)
    f32 = np.float32
    if name in LINEAR:
        bs = S.field(scheme, "block_size") if not isinstance(scheme, str) else None
        return unpack_linear(name, w_q, scale, zp, block_size=bs, shape=(k, n))
    s = np.asarray(scale).reshape(-1)
    gs = S.field(scheme, "group_size")
    per_group = np.repeat(np.arange(n * (k // gs)).reshape(n, -1), gs, axis=1)
    if name == "MlxAffine":
        codes = unpack_codes(w_q, S.field(scheme, "bits"), n * k).astype(f32).reshape(n, k)
        b = np.asarray(zp).reshape(-1).astype(f32)[per_group]
        wt = s.astype(f32)[per_group] * codes + b
    elif name == "MlxMxfp4":
        wt = FP4_E2M1[unpack_codes(w_q, 4, n * k)].reshape(n, k) * _mlx_scale(s, gs)[per_group]
    else:
        wt = fp8_values(np.asarray(w_q).reshape(n, k)) * _mlx_scale(s, gs)[per_group]
    return np.ascontiguousarray(wt.T)


def _mlx_scale(codes: np.ndarray, gs: int) -> np.ndarray:
    """MLX mxfp group scales: E4M3 bytes when group_size is 16, else E8M0."""
    return fp8_values(codes) if gs == 16 else _e8m0(codes)
