"""Planted faults in OpenCL's quant kernels: the fused GGUF products (GEMV, row groups,
tiled, grouped by expert), the expert-stack decode, the 4-operand linear product, the
integer ops and the f32 MoE/LoRA products.

The first is RLX's own pitfall: a kernel that decodes a 32-element scheme with the
256-element block geometry of the K-quants (block index and sub-block taken as if eight
32-element pieces shared a block), which conformance must catch.
"""
from __future__ import annotations

from ..faults import Fault

CL = "opencl"
CPU = "opencl/cpu-kernels"
GPU = "opencl/gpu-kernels"
QROW_DIRECT = "#define QROW(i) ((long)(r0 + (i)))"

FAULTS = (
    Fault("clq-block-256", CL, "block size of another scheme", "opencl:quant.gemv_cpu",
          "RLX's pitfall: the GEMV decodes Q4_0 (32-element blocks) with a 256-element "
          "block size, so every sub-block past the first of a 'block' rereads block 0's "
          "bytes or another row's",
          ops="DequantMatMul", tags=("GgufQ4_0",), kernel="qmv_cpu", spec=CPU,
          edits=(("re:#define QBS 32\n(#define QBB \\d+\n)#define QNSL 0\n",
                  "#define QBS 256\n\\1#define QNSL 3\n"),)),
    Fault("clq-gemv-gpu-tree", CL, "tree reduction halving off-by-one",
          "opencl:quant.gemv_gpu",
          "the GEMV work-group's local-memory tree stops one step early, so the partial "
          "sum of work-item 1 never reaches the output",
          ops="DequantMatMul", tags=("gemv",), kernel="qmv_gpu", spec=GPU,
          edits=(("for (int h = QL / 2; h > 0; h >>= 1)",
                  "for (int h = QL / 2; h > 1; h >>= 1)"),)),
    Fault("clq-groups-row-offset", CL, "row offset dropped", "opencl:quant.gemv_groups",
          "the GEMV run over groups of 4 rows ignores the group's first row, so every "
          "group recomputes rows 0..3 and the later rows are never written",
          ops="DequantMatMul", tags=("rows>4",), kernel="qmv_cpu", spec=CPU,
          edits=((QROW_DIRECT, "#define QROW(i) ((long)(i))"),)),
    Fault("clq-tiled-cpu-tail", CL, "tail off-by-one", "opencl:quant.tiled_cpu",
          "the CPU tiled product skips the last k of every decoded chunk",
          ops="DequantMatMul", tags=("panels",), kernel="qmm_cpu", spec=CPU,
          edits=(("for (int kk = 0; kk < kc; kk++, xg += QV)",
                  "for (int kk = 0; kk < kc - 1; kk++, xg += QV)"),)),
    Fault("clq-tiled-gpu-edge", CL, "tile edge dropped", "opencl:quant.tiled_gpu",
          "the GPU tiled product's store guard drops the last output column",
          ops="DequantMatMul", tags=("rows>4",), kernel="qmm_gpu", spec=GPU,
          edits=(("re:< n\\) out\\[", "< n - 1) out["),)),
    Fault("clq-grouped-perm", CL, "permutation error", "opencl:quant.grouped",
          "the grouped product reads and writes rows in expert-sorted order without the "
          "permutation, so tokens meet other tokens' experts",
          ops="DequantGroupedMatMul",
          edits=(("#define QROW(i) ((long)rows[r0 + (i)])", QROW_DIRECT),)),
    Fault("clq-moe-untransposed", CL, "stride error", "opencl:quant.moe_weights",
          "the expert-stack decode writes each slab in its packed [N, K] order instead of "
          "[K, N]",
          ops="DequantMoEWeights", kernel="qdq",
          edits=(("out[e * slab + (idx - row * k) * n + row] = buf[l];",
                  "out[e * slab + idx] = buf[l];"),)),
    Fault("clq-linear-nibbles", CL, "nibble order", "opencl:quant.linear",
          "4-bit codes are read high nibble first",
          ops="DequantMatMul", tags=("Int4Block",), kernel="qlin_",
          edits=(("return (int)((e & 1) ? b >> 4 : b & 15u);",
                  "return (int)((e & 1) ? b & 15u : b >> 4);"),)),
    Fault("clq-affine-wrap", CL, "saturation", "opencl:quant.affine",
          "Quantize wraps to i8 instead of clamping to [-128, 127]",
          ops="Quantize", tags=("saturation",), kernel="qquantize",
          edits=(("return (char)clamp(q + zp, -128L, 127L);", "return (char)(q + zp);"),)),
    Fault("clq-qmatmul-ties-even", CL, "rounding mode", "opencl:qmatmul",
          "the requantize rounds ties to even (rint) instead of away from zero",
          ops="QMatMul", tags=("ties",), kernel="qqmatmul",
          edits=(("const float r = round(v);", "const float r = rint(v);"),)),
    Fault("clq-qconv-pad-zero", CL, "padding value", "opencl:qconv2d",
          "a tap in the padding reads x = 0 (adding -x_zp·w) instead of adding nothing",
          ops="QConv2d", tags=("padding",), kernel="qqconv2d",
          edits=((": 0L;", ": -xzp;"),)),
    Fault("clq-grouped-tail", CL, "tail off-by-one", "opencl:grouped_matmul",
          "GroupedMatMul's K loop stops one term short",
          ops="GroupedMatMul", kernel="qgrouped_mm",
          edits=(("for (int kk = 0; kk < k; kk++) a = fma(",
                  "for (int kk = 0; kk < k - 1; kk++) a = fma("),)),
    Fault("clq-lora-scale", CL, "scale dropped", "opencl:lora",
          "the LoRA down projection is not scaled by alpha / rank",
          ops="LoraMatMul", kernel="qlora_down",
          edits=(("t[(long)i * r + j] = s * scale;", "t[(long)i * r + j] = s;"),)),
)
