"""RLX's linear quant schemes: codes in ``w_q`` with scales in side tensors.

These are the non-GGUF inputs of RLX's ``DequantMatMul`` (4 inputs ``x, w_q, scale, zp``).
The weight is ``[k, n]`` (``out = x @ w``); blocks run along k, so scales are
``[ceil(k/block), n]``. ``pack_linear(name, w, block_size)`` returns those side tensors and
``unpack_linear(name, w_q, scale, zp, block_size=)`` decodes them back to f32 ``[k, n]``.

4-bit codes are packed by flat element index ``e = p*n + j`` of the row-major ``[k, n]``
weight: byte ``e // 2``, low nibble for even ``e`` (RLX's CPU and WGPU kernels agree).
Where RLX's backends disagree, each record's ``doc`` says which one this follows and why.
The packers are rlx_ref's own (RLX fixes only the decode); they round to nearest-even.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from .scheme import QuantError, SchemeDef, register

F = np.float32
_CODES = np.arange(256, dtype=np.uint8)
E4M3 = _CODES.view(ml_dtypes.float8_e4m3fn).astype(F)     # OCP E4M3 (max 448, NaN 0x7f)
E5M2 = _CODES.view(ml_dtypes.float8_e5m2).astype(F)       # IEEE-like E5M2 (inf, NaN)
# RLX's NVFP4 block-scale decoder (rlx_ir fp8_e4m3_scale_to_f32) reads the NaN codes as 0
E4M3_SCALE = np.where(np.isnan(E4M3), np.copysign(F(0), E4M3), E4M3).astype(F)
E2M1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], F)
_E2M1_MID = np.array([.25, .75, 1.25, 1.75, 2.5, 3.5, 5], F)
NVFP4_GROUP = 16


@dataclass(frozen=True)
class LinearScheme:
    """How one linear scheme feeds ``DequantMatMul``: ``w_q``'s codes, what ``scale`` and
    the fourth input (``zp``) hold, and whether RLX's variant carries a block size."""

    name: str
    code: str            # i8 | s4 | e4m3 | e5m2 | e2m1
    scale: str           # what input 2 holds
    fourth: str          # what input 3 (the zp slot) holds
    block: int | None    # fixed block along k (Nvfp4: 16); None: per-variant block_size,
    #                      0: one block spans all of k (fp8: a scale per output column)


LINEAR: dict[str, LinearScheme] = {
    "Int8Block": LinearScheme("Int8Block", "i8", "f32 [k/block, n]", "unused", None),
    "Int8BlockAsym": LinearScheme("Int8BlockAsym", "i8", "f32 [k/block, n]",
                                  "zero point f32 [k/block, n]", None),
    "Int4Block": LinearScheme("Int4Block", "s4", "f32 [k/block, n]", "unused", None),
    "Fp8E4m3": LinearScheme("Fp8E4m3", "e4m3", "f32 [1, n]", "unused", 0),
    "Fp8E5m2": LinearScheme("Fp8E5m2", "e5m2", "f32 [1, n]", "unused", 0),
    "Nvfp4Block": LinearScheme("Nvfp4Block", "e2m1", "u8 e4m3 [k/16, n]",
                               "global scale f32 [1]", NVFP4_GROUP),
}


def _scheme(name) -> LinearScheme:
    if name not in LINEAR:
        raise QuantError(f"unknown linear quant scheme {name!r}; expected one of: "
                         f"{', '.join(LINEAR)}")
    return LINEAR[name]


def _block(ls: LinearScheme, k: int, block_size) -> int:
    if ls.block == 0:
        return max(k, 1)
    if ls.block is not None:
        if block_size not in (None, ls.block):
            raise QuantError(f"{ls.name} has a fixed block of {ls.block} along k, got "
                             f"block_size={block_size}")
        return ls.block
    if block_size is None or int(block_size) != block_size or block_size < 1:
        raise QuantError(f"{ls.name} needs a positive integer block_size, got {block_size!r}")
    return int(block_size)


def _weight(name, w) -> np.ndarray:
    a = np.asarray(w, dtype=F)
    if a.ndim != 2:
        raise QuantError(f"{name}: the weight must be 2-D [k, n], got shape {list(a.shape)}")
    if not np.isfinite(a).all():
        raise QuantError(f"{name}: the weight has a non-finite value")
    return a


def _block_absmax(a: np.ndarray, bs: int) -> np.ndarray:
    """max |a| over each block of ``bs`` rows: ``[ceil(k/bs), n]``."""
    k, n = a.shape
    nb = -(-k // bs)
    pad = np.zeros((nb * bs - k, n), F)
    return np.abs(np.concatenate([a, pad])).reshape(nb, bs, n).max(axis=1)


def _rows(s: np.ndarray, bs: int, k: int) -> np.ndarray:
    """Per-block side tensor ``[ceil(k/bs), n]`` expanded to its ``[k, n]`` rows."""
    return np.repeat(s, bs, axis=0)[:k]


def pack_nibbles(codes: np.ndarray) -> np.ndarray:
    """4-bit codes ``[k, n]`` -> bytes by flat index (even index in the low nibble):
    ``[k, n/2]`` when n is even, else flat ``[ceil(k*n/2)]``."""
    flat = codes.reshape(-1).astype(np.uint8) & 0x0F
    if flat.size % 2:
        flat = np.append(flat, np.uint8(0))
    out = flat[0::2] | (flat[1::2] << 4)
    k, n = codes.shape
    return out.reshape(k, n // 2) if n % 2 == 0 else out


def unpack_nibbles(w_q, k: int, n: int) -> np.ndarray:
    """Inverse of ``pack_nibbles``: uint8 codes ``[k, n]``."""
    b = np.asarray(w_q).reshape(-1)
    if b.dtype != np.uint8:
        raise QuantError(f"packed 4-bit codes must be uint8, got {b.dtype}")
    if b.size != (k * n + 1) // 2:
        raise QuantError(f"[{k}, {n}] 4-bit codes take {(k * n + 1) // 2} bytes, got {b.size}")
    both = np.stack([b & 0x0F, b >> 4], axis=1).reshape(-1)
    return both[: k * n].reshape(k, n)


def _encode_e2m1(v: np.ndarray) -> np.ndarray:
    """Nearest E2M1 code, ties to the even code, saturating at 6; sign in bit 3."""
    a = np.minimum(np.abs(v), F(6))
    lo = np.searchsorted(_E2M1_MID, a, side="left")
    hi = np.searchsorted(_E2M1_MID, a, side="right")
    code = np.where((lo != hi) & (hi % 2 == 0), hi, lo).astype(np.uint8)
    return code | np.where(v < 0, np.uint8(8), np.uint8(0))


def _encode_fp8(v: np.ndarray, code: str) -> np.ndarray:
    kind, top = ((ml_dtypes.float8_e4m3fn, 448.0) if code == "e4m3"
                 else (ml_dtypes.float8_e5m2, 57344.0))
    return np.clip(v, -top, top).astype(F).astype(kind).view(np.uint8)


def pack_linear(name: str, w, block_size: int | None = None) -> dict:
    """Quantize ``w`` f32 ``[k, n]``: ``{"w_q", "scale", "zp"}`` in DequantMatMul's layout
    (``zp`` is the global scale ``[1]`` for Nvfp4Block, zeros where unused)."""
    ls = _scheme(name)
    a = _weight(name, w)
    k, n = a.shape
    bs = _block(ls, k, block_size)
    amax = _block_absmax(a, bs)
    with np.errstate(divide="ignore", invalid="ignore"):
        if ls.code in ("i8", "s4"):
            top = F(127 if ls.code == "i8" else 7)
            asym = name == "Int8BlockAsym"
            if asym:
                blocks = np.concatenate([a, np.zeros((-k % bs, n), F)]).reshape(-1, bs, n)
                lo = np.minimum(blocks.min(axis=1), 0)
                hi = np.maximum(blocks.max(axis=1), 0)
                scale = np.where(hi > lo, (hi - lo) / F(255), F(1)).astype(F)
                zp = np.clip(np.rint(F(-128) - lo / scale), -128, 127).astype(F)
                q = np.rint(a / _rows(scale, bs, k)) + _rows(zp, bs, k)
                q = np.clip(q, -128, 127)
            else:
                scale = np.where(amax > 0, amax / top, F(1)).astype(F)
                zp = np.zeros_like(scale)
                q = np.clip(np.rint(a / _rows(scale, bs, k)), -top, top)
            q = q.astype(np.int8)
            w_q = q if ls.code == "i8" else pack_nibbles(q.view(np.uint8))
            return {"w_q": w_q, "scale": scale, "zp": zp}
        if ls.code in ("e4m3", "e5m2"):
            top = F(448 if ls.code == "e4m3" else 57344)
            scale = np.where(amax > 0, amax / top, F(1)).astype(F)
            return {"w_q": _encode_fp8(a / scale, ls.code), "scale": scale,
                    "zp": np.zeros_like(scale)}
        # Nvfp4Block: the global scale puts the largest block scale at E4M3's top (448)
        gmax = F(np.abs(a).max()) if a.size else F(0)
        glob = F(gmax / F(6 * 448)) if gmax > 0 else F(1)
        sc = _encode_fp8(amax / F(6) / glob, "e4m3")
        step = _rows(E4M3_SCALE[sc] * glob, bs, k)
        codes = _encode_e2m1(np.where(step > 0, a / step, F(0)))
        return {"w_q": pack_nibbles(codes), "scale": sc, "zp": np.array([glob], F)}


def _side(name, what, arr, shape, dtype) -> np.ndarray:
    a = np.asarray(arr)
    if a.dtype != dtype:
        if dtype == F and a.dtype.kind == "f":
            a = a.astype(F)
        else:
            raise QuantError(f"{name}: {what} must be {np.dtype(dtype).name}, got {a.dtype}")
    if a.size != math.prod(shape):
        raise QuantError(f"{name}: {what} must have shape {list(shape)}, got {list(a.shape)}")
    return a.reshape(shape)


def unpack_linear(name: str, w_q, scale, zp=None, block_size: int | None = None,
                  shape: tuple[int, int] | None = None) -> np.ndarray:
    """Decode side tensors to the f32 ``[k, n]`` weight, as RLX's DequantMatMul reads them.

    ``shape`` is needed only for 4-bit codes of odd ``k*n`` (packed flat); otherwise n comes
    from ``scale`` and k from the code count."""
    ls = _scheme(name)
    q = np.asarray(w_q)
    if shape is not None:
        k, n = (int(d) for d in shape)
    elif ls.code in ("s4", "e2m1"):
        n = int(np.asarray(scale).shape[-1]) if np.ndim(scale) else 1
        k = 2 * q.size // max(n, 1)
    elif q.ndim == 2:
        k, n = q.shape
    else:
        raise QuantError(f"{name}: w_q must be [k, n], got shape {list(q.shape)}")
    bs = _block(ls, k, block_size)
    nb = -(-k // bs)
    if ls.code == "i8":
        codes = _side(name, "w_q", q.view(np.int8) if q.dtype == np.uint8 else q, (k, n),
                      np.int8).astype(F)
        s = _rows(_side(name, "scale", scale, (nb, n), F), bs, k)
        if name == "Int8BlockAsym":
            if zp is None:
                raise QuantError(f"{name}: the zero point tensor zp is required")
            return (codes - _rows(_side(name, "zp", zp, (nb, n), F), bs, k)) * s
        return codes * s
    if ls.code == "s4":
        codes = unpack_nibbles(q, k, n).astype(np.int8)
        codes = np.where(codes > 7, codes - np.int8(16), codes).astype(F)
        return codes * _rows(_side(name, "scale", scale, (nb, n), F), bs, k)
    if ls.code in ("e4m3", "e5m2"):
        table = E4M3 if ls.code == "e4m3" else E5M2
        return table[_side(name, "w_q", q, (k, n), np.uint8)] * _side(name, "scale", scale,
                                                                      (1, n), F)
    sc = E4M3_SCALE[_side(name, "scale", scale, (nb, n), np.uint8)]
    if zp is None:
        raise QuantError(f"{name}: the global scale (input 3, shape [1]) is required")
    glob = _side(name, "global scale", zp, (1,), F)[0]
    # e2m1 * e4m3 is exact in f32, so the only rounding is the one by the global scale
    return (E2M1[unpack_nibbles(q, k, n)] * _rows(sc, bs, k)) * glob


def _side_tensors_only(name):
    def dequantize(blocks):
        raise QuantError(f"{name} keeps its scales in side tensors; decode it with "
                         f"rlx_ref.quant.linear.unpack_linear({name!r}, w_q, scale, zp, ...)")
    return dequantize


def _fp8_codec(code: str):
    table = E4M3 if code == "e4m3" else E5M2

    def dequantize(blocks):
        b = np.asarray(blocks)
        if b.dtype != np.uint8 or b.ndim != 2 or b.shape[1] != 1:
            raise QuantError(f"fp8 codes must be uint8 [n, 1], got {b.dtype} "
                             f"{list(b.shape)}")
        return table[b]

    def quantize(x):
        return _encode_fp8(np.asarray(x, dtype=F), code).reshape(-1, 1)
    return dequantize, quantize


_KERNEL_IDS = ("RLX's WGPU dequant_matmul kernel numbers the linear schemes 0 Int8Block, "
               "1 Int8BlockAsym, 2 Int4Block, 3 Fp8E4m3, 4 Fp8E5m2, 5 Nvfp4Block; they have "
               "no dequant_gguf id.")
_INT_DOCS = {
    "Int8Block": "w = q * scale[p // block, j] with q = w_q[p, j] as i8. zp is passed but "
                 "RLX's kernels ignore it for this scheme (its doc: 'zero-tensor if "
                 "symmetric'); pack_linear writes zeros and codes -127..127 with scale = "
                 "max|w| / 127 per block and column (1 for an all-zero block).",
    "Int8BlockAsym": "w = (q - zp[p // block, j]) * scale[p // block, j], q = w_q[p, j] as "
                     "i8; RLX's CPU and WGPU kernels agree. pack_linear spans [min(w, 0), "
                     "max(w, 0)] with scale = range / 255 and an integer zp in -128..127.",
    "Int4Block": "w = q * scale[p // block, j] with q the 4-bit code of element (p, j). "
                 "RLX's kernels disagree on q: the CPU kernel (and CoreML's bake) reads the "
                 "nibble unsigned, 0..15, and ignores zp; the WGPU kernel ('Int4Block "
                 "(symmetric)') reads it signed, -8..7. rlx_ref follows the signed reading, "
                 "the one that matches the scheme's name and single scale and can hold "
                 "weights of both signs in a block; codes 0..7 decode the same in both. "
                 "pack_linear writes codes -7..7 with scale = max|w| / 7.",
}
_FP8_DOC = ("w = decode(w_q[p, j]) * scale[0, j]: RLX's CPU kernel applies a per-output-column "
            "f32 scale (scale[j], 1 where the tensor is shorter), while its WGPU kernel and "
            "QuantScheme's doc use none; with scale = ones they agree, and pack_linear "
            "writes scale = max|w[:, j]| / {top} (1 for a zero column), which the CPU kernel "
            "honours. zp is unused. {codec}")
_E4M3_CODEC = ("Codes are OCP E4M3 (ml_dtypes float8_e4m3fn: bias 7, max 448, 0x7f and 0xff "
               "NaN), as RLX's ScaledFormat::F8E4M3 and its WGPU decoder; RLX's CPU "
               "DequantMatMul decoder treats exponent 15 as inf/NaN instead, so codes "
               "0x78..0x7e (256..448) differ there: rlx_ref follows OCP, the format RLX names "
               "and FP8 checkpoints use. The WGPU decoder reads NaN as 0; here it stays NaN "
               "(pack_linear never writes it).")
_E5M2_CODEC = ("Codes are E5M2 (ml_dtypes float8_e5m2: bias 15, max 57344, inf and NaN at "
               "exponent 31) as RLX's CPU decoder; its WGPU decoder reads inf/NaN as 0.")
_NVFP4_DOC = ("w = (E2M1[q] * E4M3(scale[p // 16, j])) * global with q the 4-bit code of "
              "element (p, j) (E2M1: 0, .5, 1, 1.5, 2, 3, 4, 6, sign in bit 3) and global "
              "the f32 in input 3 (the zp slot). Block scales decode as rlx_ir's "
              "fp8_e4m3_scale_to_f32: OCP E4M3 with the NaN codes read as 0. RLX's kernels "
              "differ only in association (CPU: e2m1 * (scale * global), or scales folded "
              "into partial sums; WGPU: (e2m1 * scale) * global); rlx_ref uses the WGPU "
              "order because e2m1 * scale is exact in f32, leaving one rounding. "
              "pack_linear sets global = max|w| / (6 * 448), block scales max|block| / 6 / "
              "global rounded to E4M3, and codes by nearest E2M1 (ties to even codes).")

for _name, _bits in (("Int8Block", 8), ("Int8BlockAsym", 8), ("Int4Block", 4)):
    register(SchemeDef(
        name=_name, block_size=8 // _bits, block_bytes=1,
        dequantize=_side_tensors_only(_name), rlx=_name, kind="linear",
        layout=f"w_q[k, n{'' if _bits == 8 else '/2'}] "
               + ("i8  one code per element" if _bits == 8 else
                  "u8  two 4-bit codes per byte by flat index p*n+j, even index low")
               + f"\nscale[k/block, n] f32\nzp[k/block, n] f32  {LINEAR[_name].fourth}",
        doc=_INT_DOCS[_name] + " " + _KERNEL_IDS))
for _name, _code, _top, _codec in (("Fp8E4m3", "e4m3", 448, _E4M3_CODEC),
                                   ("Fp8E5m2", "e5m2", 57344, _E5M2_CODEC)):
    _deq, _qnt = _fp8_codec(_code)
    register(SchemeDef(
        name=_name, block_size=1, block_bytes=1, dequantize=_deq, quantize=_qnt, rlx=_name,
        kind="linear",
        layout=f"w_q[k, n] u8  one {_code.upper()} code per element\nscale[1, n] f32  "
               "per output column\nzp  unused",
        doc=_FP8_DOC.format(top=_top, codec=_codec) + " " + _KERNEL_IDS))
register(SchemeDef(
    name="Nvfp4Block", block_size=2, block_bytes=1,
    dequantize=_side_tensors_only("Nvfp4Block"), rlx="Nvfp4Block", kind="linear",
    layout="w_q[k, n/2] u8  two E2M1 codes per byte by flat index p*n+j, even index low\n"
           "scale[k/16, n] u8  E4M3 block scales\nglobal[1] f32  in the zp slot",
    doc=_NVFP4_DOC + " " + _KERNEL_IDS))
