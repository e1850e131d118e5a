"""GGUF 4-bit non-linear and microscaling block formats: IQ4_NL, IQ4_XS, MXFP4, NVFP4.

Each stores 4-bit codes that index a fixed 16-entry table (the IQ4 levels, or E2M1
doubled) times a block scale (f16, a 6-bit sub-scale of an f16, E8M0, or UE4M3).
"""
from __future__ import annotations

import numpy as np

from ._blockfields import f16_at, join_halves, quiet, split_halves, u16
from ._iq4_quant import KVALUES, quantize_iq4_nl, quantize_iq4_xs
from .scheme import SchemeDef, register

# kvalues_mxfp4 (ggml-common.h): the E2M1 values doubled, code = sign << 3 | magnitude;
# scale decoders below return half the scale so that code value * scale is exact.
E2M1X2 = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], np.int8)
_E2M1X2 = E2M1X2.astype(np.float32)
_IQ4 = KVALUES.astype(np.float32)


def _dequant_iq4_nl(blocks):
    return f16_at(blocks, 0)[:, None] * _IQ4[split_halves(blocks[:, 2:18])]


def _dequant_iq4_xs(blocks):
    n = blocks.shape[0]
    d = f16_at(blocks, 0)
    high = (u16(blocks[:, 2:4]) >> np.arange(0, 16, 2, dtype=np.uint16)) & 3     # [n, 8]
    low = np.stack([blocks[:, 4:8] & 15, blocks[:, 4:8] >> 4], axis=-1).reshape(n, 8)
    ls = (low | high.astype(np.uint8) << 4).astype(np.int8) - np.int8(32)
    dl = d[:, None] * ls.astype(np.float32)
    vals = _IQ4[split_halves(blocks[:, 8:136].reshape(n, 8, 16))]                # [n, 8, 32]
    return (dl[:, :, None] * vals).reshape(n, 256)


# --- MXFP4: E8M0 exponent byte e; ggml decodes it as the half scale 2**(e - 128) for
# every e, including 255, the OCP MX spec's NaN, as llama.cpp does. ---
_E8M0_HALF = np.ldexp(1.0, np.arange(256) - 128).astype(np.float32)


def _best_e2m1(x: np.ndarray, half_scale: np.ndarray) -> np.ndarray:
    """Per element, the first code minimising |E2M1X2[code] * half_scale - x| (f32)."""
    best = np.zeros(x.shape, np.uint8)
    err = np.abs(half_scale * _E2M1X2[0] - x)
    for i in range(1, 16):
        e = np.abs(half_scale * _E2M1X2[i] - x)
        take = e < err
        best[take] = i
        err = np.where(take, e, err)
    return best


def _dequant_mxfp4(blocks):
    return _E8M0_HALF[blocks[:, 0]][:, None] * _E2M1X2[split_halves(blocks[:, 1:17])]


def _quantize_mxfp4(x):
    x = np.asarray(x, np.float32)
    amax = np.abs(x).max(axis=1)
    with np.errstate(divide="ignore"):
        # floor(log2) of the f32 amax via numpy's f32 log2, as gguf-py computes it; an amax
        # below 2**-125 would give a negative exponent and is clamped to code 0.
        e = np.floor(np.log2(np.where(amax > 0, amax, np.float32(1)))) + np.float32(125)
    e = np.where(amax > 0, np.clip(e, 0, 255), 0).astype(np.uint8)
    codes = _best_e2m1(x, _E8M0_HALF[e][:, None])
    return np.concatenate([e[:, None], join_halves(codes)], axis=1)


# --- NVFP4: unsigned E4M3 scale bytes (bias 7, bit 7 ignored, 0x7F read as 0), decoded
# at half their value like E8M0 above. ---
def _ue4m3_half_table() -> np.ndarray:
    c = np.arange(256)
    exp, man = (c >> 3) & 15, c & 7
    raw = np.where(exp == 0, man * 2.0 ** -9, (1 + man / 8) * 2.0 ** (exp - 7))
    return np.where((c == 0) | (c == 0x7F), 0.0, raw * 0.5).astype(np.float32)


_UE4M3_HALF = _ue4m3_half_table()


def fp32_to_ue4m3(x: np.ndarray) -> np.ndarray:
    """ggml's f32 -> UE4M3 byte: 0 unless x > 0; clamps at 448; rounds half up on the
    first dropped mantissa bit; subnormals round(x * 512); exponent >= 15 -> 0x7E."""
    x = np.asarray(x, np.float32)
    pos = x > 0
    xc = np.where(pos, np.minimum(x, np.float32(448)), np.float32(0)).astype(np.float32)
    bits = xc.view(np.uint32)
    exp0 = ((bits >> 23) & 0xFF).astype(np.int32) - 120
    man = ((bits >> 20) & 7).astype(np.int32) + ((bits >> 19) & 1).astype(np.int32)
    exp = exp0 + (man > 7)
    man = np.where(man > 7, 0, man)
    normal = np.where(exp >= 15, 0x7E, exp << 3 | man)
    sub = np.minimum((xc * np.float32(512) + np.float32(0.5)).astype(np.int32), 7)
    out = np.where(exp0 <= 0, sub, normal)
    return np.where(pos, out, 0).astype(np.uint8)


def _dequant_nvfp4(blocks):
    n = blocks.shape[0]
    d = _UE4M3_HALF[blocks[:, :4]]                                       # [n, 4]
    vals = _E2M1X2[split_halves(blocks[:, 4:36].reshape(n, 4, 8))]       # [n, 4, 16]
    return (d[:, :, None] * vals).reshape(n, 64)


def _quantize_nvfp4(x):
    n = x.shape[0]
    sub = np.asarray(x, np.float32).reshape(n, 4, 16)
    ue = fp32_to_ue4m3(np.abs(sub).max(axis=2) / np.float32(6))        # [n, 4]
    codes = _best_e2m1(sub, _UE4M3_HALF[ue][:, :, None])
    return np.concatenate([ue, join_halves(codes).reshape(n, 32)], axis=1)


_FROM_LLAMA = "Quantizer: llama.cpp's reference, checked by round-trip error bounds."
register(SchemeDef(
    name="IQ4_NL", block_size=32, block_bytes=18, rlx="GgufIQ4NL", ggml_type=20, gpu_id=6,
    dequantize=quiet(_dequant_iq4_nl), quantize=quantize_iq4_nl, quantize_source="llama.cpp",
    layout="f16 d\n16 bytes: 4-bit level indices, byte j = weight j | weight j+16 << 4",
    doc="4.5 bpw: w = d * kvalues_iq4nl[code], 16 non-linear levels from -127 to 113. "
        f"{_FROM_LLAMA} The scale search is llama.cpp's quantize_iq4_nl without an "
        "importance matrix (the search llama-quantize runs; quantize_row_iq4_nl_ref "
        "skips it).",
))
register(SchemeDef(
    name="IQ4_XS", block_size=256, block_bytes=136, rlx="GgufIQ4XS", ggml_type=23, gpu_id=7,
    dequantize=quiet(_dequant_iq4_xs), quantize=quantize_iq4_xs, quantize_source="llama.cpp",
    layout="f16 d\nu16: 2 high bits of each 6-bit scale, sub-block i at bit 2i\n"
           "4 bytes: low 4 bits of the scales (low nibble first)\n"
           "8 x 16 bytes: codes per 32 weights, byte j = weight j | weight j+16 << 4",
    doc="4.25 bpw: eight 32-weight sub-blocks, w = d * (scale - 32) * kvalues_iq4nl[code]. "
        f"{_FROM_LLAMA} Sub-block scales from llama.cpp's IQ4 search, then one 6-bit "
        "multiple of d = -max_scale/32 each.",
))
register(SchemeDef(
    name="MXFP4", block_size=32, block_bytes=17, rlx="GgufMXFP4", ggml_type=39, gpu_id=10,
    dequantize=quiet(_dequant_mxfp4), quantize=_quantize_mxfp4, quantize_source="gguf-py",
    layout="u8 e: E8M0 shared exponent\n16 bytes: E2M1 codes, byte j = weight j | "
           "weight j+16 << 4",
    doc="OCP microscaling FP4: w = E2M1[code] * 2**(e - 127). The quantizer picks "
        "e = floor(log2 amax) - 2 + 127 and each weight's nearest code (first on ties), "
        "bit for bit as gguf-py does.",
))
register(SchemeDef(
    name="NVFP4", block_size=64, block_bytes=36, rlx="GgufNVFP4", ggml_type=40, gpu_id=11,
    dequantize=quiet(_dequant_nvfp4), quantize=_quantize_nvfp4, quantize_source="llama.cpp",
    layout="4 bytes: UE4M3 scale per 16 weights\n4 x 8 bytes: E2M1 codes per 16 weights, "
           "byte j = weight j | weight j+8 << 4",
    doc="NVIDIA FP4: four 16-weight sub-blocks, w = E2M1[code] * ue4m3(scale). The GGUF "
        "record (ggml type 40, as gguf-py and llama.cpp read it) is 64 weights in 36 bytes "
        "with the four scale bytes first; RLX's quant.rs states GgufNVFP4 as 16 weights in "
        "9 bytes, the same bits per weight but not the same byte order, so a 9-byte "
        "block reader does not decode this record. "
        f"{_FROM_LLAMA} Its UE4M3 encoder is gguf-py's fp32_to_ue4m3 bit for bit.",
))
