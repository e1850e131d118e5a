"""GGUF IQ2 / IQ3 / IQ1 block formats (codebook-coded), decode only.

Each group of 4 or 8 weights is one point of a fixed codebook (``_iq_grids``) times a
sub-block scale, with the signs stored apart (IQ2/IQ3) or a shift ``±1/8`` (IQ1).
llama.cpp writes them with a search over each codebook's neighbour tables, weighted by an
importance matrix (which IQ2_XXS, IQ2_XS and IQ1 require); rlx_ref reproduces neither, so
it decodes these formats but does not write them (``quantize=None``).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ._blockfields import f16_at, nibbles, quiet, u16, u32
from ._iq_grids import BITMAPS
from .scheme import SchemeDef, register

# The value of each level, per codebook: the bytes ggml-common.h's grids are made of (IQ3_XXS's
# top level is 62, not 60: a format constant, not a rule).
_LEVELS = {
    "IQ2XXS": (8, 25, 43), "IQ2XS": (8, 25, 43), "IQ2S": (8, 25, 43),
    "IQ3XXS": (4, 12, 20, 28, 36, 44, 52, 62),
    "IQ3S": (1, 3, 5, 7, 9, 11, 13, 15),
    "IQ1S": (-1, 0, 1),
}
_DIMS = {"IQ2XXS": 8, "IQ2XS": 8, "IQ2S": 8, "IQ3XXS": 4, "IQ3S": 4, "IQ1S": 8}


@lru_cache(maxsize=None)
def grid(name: str) -> np.ndarray:
    """Codebook ``name`` as f32 [points, dims], in the format's index order."""
    levels, dims = _LEVELS[name], _DIMS[name]
    nl = len(levels)
    bits = np.unpackbits(np.frombuffer(BITMAPS[name], np.uint8), bitorder="little")
    codes = np.flatnonzero(bits[: nl ** dims])
    digits = (codes[:, None] // nl ** np.arange(dims)) % nl
    out = np.asarray(levels, np.float32)[digits]
    out.flags.writeable = False
    return out


def _ksigns() -> np.ndarray:
    """ggml's ksigns_iq2xs: 7 stored sign bits plus an 8th that makes their parity even."""
    i = np.arange(128)
    parity = np.array([bin(v).count("1") & 1 for v in i])
    return (i | parity << 7).astype(np.uint8)


KSIGNS = _ksigns()
# Sign byte -> 8 multipliers (+1 where the bit is clear, -1 where set), bit j for weight j
# (ggml's kmask_iq2xs is just 1 << j).
_SIGN8 = (1 - 2 * ((np.arange(256)[:, None] >> np.arange(8)) & 1)).astype(np.float32)
_KSIGN8 = _SIGN8[KSIGNS]


def _dequant_iq2_xxs(blocks):
    n = blocks.shape[0]
    d = f16_at(blocks, 0)
    q = blocks[:, 2:66].reshape(n, 8, 8)            # per 32: 4 grid bytes + u32 aux
    aux = u32(q[:, :, 4:])[..., 0]                  # [n, 8]
    db = d[:, None] * ((aux >> 28).astype(np.float32) + np.float32(0.5)) * np.float32(0.25)
    signs = _KSIGN8[(aux[..., None] >> (7 * np.arange(4, dtype=np.uint32))) & 127]
    vals = grid("IQ2XXS")[q[:, :, :4]] * signs       # [n, 8, 4, 8]
    return (db[:, :, None, None] * vals).reshape(n, 256)


def _dequant_iq2_xs(blocks):
    n = blocks.shape[0]
    d = f16_at(blocks, 0)
    qs = u16(blocks[:, 2:66])                       # [n, 32]: 9-bit index, 7-bit signs
    sc = nibbles(blocks[:, 66:74]).astype(np.float32)  # one per 16 weights
    db = d[:, None] * (sc + np.float32(0.5)) * np.float32(0.25)
    vals = grid("IQ2XS")[qs & 511] * _KSIGN8[qs >> 9]    # [n, 32, 8]
    return (np.repeat(db, 2, axis=1)[:, :, None] * vals).reshape(n, 256)


def _dequant_iq2_s(blocks):
    n = blocks.shape[0]
    d = f16_at(blocks, 0)
    qh = (blocks[:, 66:74, None] >> np.arange(0, 8, 2, dtype=np.uint8)) & 3
    idx = blocks[:, 2:34].astype(np.uint16) | qh.reshape(n, 32).astype(np.uint16) << 8
    sc = nibbles(blocks[:, 74:82]).astype(np.float32)
    db = d[:, None] * (sc + np.float32(0.5)) * np.float32(0.25)
    vals = grid("IQ2S")[idx] * _SIGN8[blocks[:, 34:66]]  # plain sign bytes, 8 bits each
    return (np.repeat(db, 2, axis=1)[:, :, None] * vals).reshape(n, 256)


def _dequant_iq3_xxs(blocks):
    n = blocks.shape[0]
    d = f16_at(blocks, 0)
    aux = u32(blocks[:, 66:98])                     # [n, 8]: 4 x 7-bit signs + scale
    db = d[:, None] * ((aux >> 28).astype(np.float32) + np.float32(0.5)) * np.float32(0.5)
    signs = _KSIGN8[(aux[..., None] >> (7 * np.arange(4, dtype=np.uint32))) & 127]
    vals = grid("IQ3XXS")[blocks[:, 2:66]].reshape(n, 8, 4, 8) * signs
    return (db[:, :, None, None] * vals).reshape(n, 256)


def _dequant_iq3_s(blocks):
    n = blocks.shape[0]
    d = f16_at(blocks, 0)
    qh = (blocks[:, 66:74, None] >> np.arange(8, dtype=np.uint8)) & 1
    idx = blocks[:, 2:66].astype(np.uint16) | qh.reshape(n, 64).astype(np.uint16) << 8
    sc = nibbles(blocks[:, 106:110]).astype(np.float32)     # one per 32 weights
    db = d[:, None] * (np.float32(2) * sc + np.float32(1))
    vals = grid("IQ3S")[idx].reshape(n, 32, 8) * _SIGN8[blocks[:, 74:106]]
    return (db[:, :, None, None] * vals.reshape(n, 8, 4, 8)).reshape(n, 256)


def _iq1_values(idx, sign_bit, dl):
    """IQ1 weights: dl * (grid point + delta), delta -1/8 where sign_bit else +1/8."""
    delta = np.where(sign_bit, np.float32(-0.125), np.float32(0.125))
    return dl * (grid("IQ1S")[idx] + delta[..., None])


def _dequant_iq1_s(blocks):
    n = blocks.shape[0]
    d = f16_at(blocks, 0)
    qh = u16(blocks[:, 34:50])                      # [n, 8]: per 32 weights
    hi = (qh[..., None] >> np.arange(0, 12, 3, dtype=np.uint16)) & 7
    idx = blocks[:, 2:34].astype(np.uint16) | hi.reshape(n, 32) << 8
    dl = d[:, None] * (2 * ((qh >> 12) & 7) + 1).astype(np.float32)
    neg = np.repeat((qh & 0x8000) != 0, 4, axis=1)
    return _iq1_values(idx, neg, np.repeat(dl, 4, axis=1)[..., None]).reshape(n, 256)


def _dequant_iq1_m(blocks):
    n = blocks.shape[0]
    sc = u16(blocks[:, 48:56])                      # [n, 4]; top nibbles hold the f16 d
    dbits = (sc[:, 0] >> 12) | (sc[:, 1] >> 8) & 0xF0 | (sc[:, 2] >> 4) & 0xF00 \
        | sc[:, 3] & 0xF000
    d = dbits.astype(np.uint16).view(np.float16).astype(np.float32)
    s3 = (sc[..., None] >> np.arange(0, 12, 3, dtype=np.uint16)) & 7  # one per 16 weights
    dl = d[:, None] * (2 * s3.reshape(n, 16) + 1).astype(np.float32)
    qh = nibbles(blocks[:, 32:48])                  # [n, 32]: 3 index bits + delta sign
    idx = blocks[:, :32].astype(np.uint16) | (qh & 7).astype(np.uint16) << 8
    return _iq1_values(idx, (qh & 8) != 0, np.repeat(dl, 2, axis=1)[..., None]).reshape(n, 256)


_D = "f16 d (super-block scale)"
_IQ = [
    ("IQ2_XXS", 66, _dequant_iq2_xxs, "GgufIQ2XXS", 16, 12,
     f"{_D}\n8 x (4 grid bytes into iq2xxs_grid, u32: 4 x 7-bit ksigns indices | "
     "4-bit scale << 28)",
     "2.0625 bpw: 8 groups of 32; each 8 weights are an iq2xxs point (256 of them) with "
     "signs from ksigns (7 stored bits, even parity); group scale d*(0.5+s)/4."),
    ("IQ2_XS", 74, _dequant_iq2_xs, "GgufIQ2XS", 17, 13,
     f"{_D}\n32 x u16: 9-bit iq2xs_grid index | 7-bit ksigns index << 9\n"
     "8 bytes: 4-bit scales, one per 16 weights (low nibble first)",
     "2.3125 bpw: 8-weight iq2xs points (512) with ksigns signs; scale d*(0.5+s)/4 per 16."),
    ("IQ2_S", 82, _dequant_iq2_s, "GgufIQ2S", 22, 14,
     f"{_D}\n32 bytes: low 8 bits of iq2s_grid indices\n32 bytes: sign bits, one byte "
     "per 8 weights (bit j = weight j)\n8 bytes: index bits 8-9, index 4g+k at bits 2k of "
     "byte g\n8 bytes: 4-bit scales, one per 16 weights (low nibble first)",
     "2.5625 bpw: 8-weight iq2s points (1024) with explicit sign bits; scale d*(0.5+s)/4."),
    ("IQ3_XXS", 98, _dequant_iq3_xxs, "GgufIQ3XXS", 18, 15,
     f"{_D}\n64 bytes: iq3xxs_grid indices (4 weights each)\n8 x u32: 4 x 7-bit ksigns "
     "indices | 4-bit scale << 28, one per 32 weights",
     "3.0625 bpw: 4-weight iq3xxs points (256) with ksigns signs; scale d*(0.5+s)/2."),
    ("IQ3_S", 110, _dequant_iq3_s, "GgufIQ3S", 21, 16,
     f"{_D}\n64 bytes: low 8 bits of iq3s_grid indices\n8 bytes: index bit 8, index 8g+j "
     "at bit j of byte g\n"
     "32 bytes: sign bits, one byte per 8 weights\n4 bytes: 4-bit scales, one per 32 "
     "(low nibble first)",
     "3.4375 bpw: 4-weight iq3s points (512) with explicit sign bits; scale d*(1+2s)."),
    ("IQ1_S", 50, _dequant_iq1_s, "GgufIQ1S", 19, 17,
     f"{_D}\n32 bytes: low 8 bits of iq1s_grid indices\n8 x u16 (one per 32): 4 x 3 "
     "high index bits | 3-bit scale << 12 | delta sign << 15",
     "1.5625 bpw: 8-weight ternary iq1s points (2048) shifted by +-1/8; dl = d*(2s+1)."),
    ("IQ1_M", 56, _dequant_iq1_m, "GgufIQ1M", 29, 18,
     "32 bytes: low 8 bits of iq1s_grid indices\n16 bytes: a nibble per index, low nibble "
     "first (index bits 8-10 | delta sign << 3)\n4 x u16: 4 x 3-bit scales (one per 16 weights) "
     "each; word k's top nibble is bits 4k..4k+3 of the f16 d",
     "1.75 bpw: iq1s points shifted by +-1/8 per 8 weights, dl = d*(2s+1) per 16 "
     "weights; the f16 super-scale is split across the scale words' top nibbles."),
]

for _name, _bytes, _fn, _rlx, _ggml, _gpu, _layout, _what in _IQ:
    register(SchemeDef(
        name=_name, block_size=256, block_bytes=_bytes, dequantize=quiet(_fn), rlx=_rlx,
        ggml_type=_ggml, gpu_id=_gpu, layout=_layout,
        doc=f"{_what} Decode only: llama.cpp writes it by an importance-weighted "
            "neighbour search over the codebook, which rlx_ref does not reproduce.",
    ))
