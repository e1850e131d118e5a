"""Planted faults in numba-cpu's quant kernels: the fused GGUF products (GEMV, tiles, grouped
by expert), the expert-stack decode, the 4-operand linear product, the integer ops and the
f32 MoE/LoRA products.

The first is RLX's own pitfall: a kernel that takes the geometry of a 32-element scheme
(Q4_0) from the 256-element block size of the K-quants, which conformance must catch.
"""
from __future__ import annotations

from ..faults import Fault

NB = "numba-cpu"

FAULTS = (
    Fault("nbq-block-256", NB, "block size of another scheme", "numba-cpu:quant.gemv",
          "RLX's pitfall: the GEMV steps from one row of W to the next by k // 256 blocks "
          "(the K-quants' block size) where Q4_0 has k // 32, so later rows reread the "
          "bytes of the first",
          ops="DequantMatMul", tags=("GgufQ4_0", "gemv"), kernel="qdeq",
          edits=(("    nbk = k // bs\n    rb = nbk * bb\n",
                  "    nbk = k // bs\n    rb = (k // 256) * bb\n"),)),
    Fault("nbq-tiles-tail", NB, "tail off-by-one", "numba-cpu:quant.tiles",
          "the tiled product's sgemm drops the last k of every decoded chunk",
          ops="DequantMatMul", tags=("one-block",), kernel="qdeq",
          edits=(("nr, m, kcur, one.ctypes", "nr, m, kcur - 1, one.ctypes"),)),
    Fault("nbq-grouped-perm", NB, "permutation error", "numba-cpu:quant.grouped",
          "the counting sort leaves the tokens in their original order, so each expert "
          "runs on other tokens' rows",
          ops="DequantGroupedMatMul", tags=("repeated-expert",), kernel="moe_sort",
          edits=(("order[fill[ids[i]]] = i", "order[i] = i"),)),
    Fault("nbq-moe-untransposed", NB, "stride error", "numba-cpu:quant.moe_weights",
          "the expert-stack decode writes each slab in its packed [N, K] order instead of "
          "[K, N]",
          ops="DequantMoEWeights", kernel="qdeq",
          edits=(("dst[r] = tile[lead + r * k + t]", "dst[r] = tile[lead + t * (j1 - j0) + r]"),)),
    Fault("nbq-linear-nibbles", NB, "nibble order", "numba-cpu:quant.linear",
          "4-bit codes are read high nibble first",
          ops="DequantMatMul", tags=("Int4Block",), kernel="qlin",
          edits=(("return (b >> 4) if e & 1 else (b & 15)",
                  "return (b & 15) if e & 1 else (b >> 4)"),)),
    Fault("nbq-affine-wrap", NB, "saturation", "numba-cpu:quant.affine",
          "Quantize wraps to i8 instead of clamping to [-128, 127]",
          ops="Quantize", tags=("saturation",), kernel="qi_quantize",
          edits=(("return max(-128, min(127, np.int64(r) + zp))", "return np.int64(r) + zp"),)),
    Fault("nbq-qmatmul-ties-even", NB, "rounding mode", "numba-cpu:qmatmul",
          "the requantize rounds ties to even (rint) instead of away from zero",
          ops="QMatMul", tags=("ties",), kernel="qi_qmatmul",
          edits=(("a = np.floor(abs(np.float64(v)) + 0.5)", "a = abs(np.rint(np.float64(v)))"),)),
    Fault("nbq-qconv-pad-zero", NB, "padding value", "numba-cpu:qconv2d",
          "a tap in the padding reads x = 0 (adding -x_zp·w) instead of adding nothing",
          ops="QConv2d", tags=("padding",), kernel="qi_qconv2d",
          edits=(("if inside else 0", "if inside else -xzp"),)),
    Fault("nbq-grouped-tail", NB, "tail off-by-one", "numba-cpu:grouped_matmul",
          "GroupedMatMul's K loop stops one term short",
          ops="GroupedMatMul", kernel="qi_grouped_mm",
          edits=(("for kk in range(k):", "for kk in range(k - 1):"),)),
    Fault("nbq-lora-scale", NB, "scale dropped", "numba-cpu:lora",
          "the LoRA down projection is not scaled by alpha / rank",
          ops="LoraMatMul", kernel="qi_lora",
          edits=(("t[j] = t[j] * scale", "t[j] = t[j]"),)),
)
