"""opencl's kernel variants and the size thresholds that select them.

Most OpenCL choices follow the device type (work-group trees on GPUs, runs per work-item
with vector blocks on CPUs): those variants carry ``device`` and are only expected where
such a device ran. Lowerings read thresholds with ``th`` and record with ``use``.
"""
from __future__ import annotations

from ..variants import Threshold, Variant, chose, declare, threshold

B = "opencl"
EW = ("ElementwiseRegion", "Activation", "Binary", "Compare", "Cast", "StopGradient", "Where",
      "Fma", "Clamp")
REDUCE = ("Reduce",)
SCANS = ("Cumsum", "CumProd", "CumMax")
ARGS = ("ArgMax", "ArgMin")
NORMS = ("LayerNorm", "RmsNorm", "LayerNorm2d", "GroupNorm")
MATMUL = ("MatMul", "DotGeneral")
MOVES = ("Transpose", "Narrow", "Slice", "Expand", "Reverse", "Tile", "Pad", "Trilu")
GGUF_MM = ("DequantMatMul", "DequantGroupedMatMul")
QUANT_HOST = ("DequantMatMul", "DequantGroupedMatMul", "DequantMoEWeights")

THRESHOLDS = [
    Threshold(f"{B}:reduce.min_segment_cpu", 1 << 15, 1,
              "CPU: least elements per segment when long Reduce/scan rows are split; rows of "
              ">= 2 segments split while there are too few rows to fill the device"),
    Threshold(f"{B}:reduce.min_segment_gpu", 1 << 13, 1,
              "GPU: the same least segment length"),
    Threshold(f"{B}:conv.chunk_bytes", 32 << 20, 1,
              "unfolded input bytes per Conv/ConvTranspose2d product launch (whole images, "
              "at least one): more images than fit run as several launches"),
    Threshold(f"{B}:linalg.direct_macs", 1 << 15, 0,
              "M·N·K·batch at or below which a product is one direct kernel (above: packed "
              "GEMM, or the skinny kernel for <= 4 rows on a CPU)"),
]


def _v(name: str, kinds, rule: str, th: str | None = None, device: str | None = None):
    return Variant(f"{B}:{name}", tuple(kinds), rule, th and f"{B}:{th}", device)


VARIANTS = [
    *(_v(f"ew.read.{m}", EW, rule) for m, rule in (
        ("full", "an operand of the output's shape read by flat index"),
        ("scalar", "a one-element operand read once"),
        ("mod", "an operand that is a suffix of the output read modulo its size"),
        ("strided", "a broadcast operand read through its strides"),
        ("up2", "a ResizeNearest2x prologue operand read at half coordinates"))),
    _v("reduce.rows_cpu", REDUCE, "reduced axes last, CPU", device="cpu"),
    _v("reduce.rows_gpu", REDUCE, "reduced axes last, work-group tree per row", device="gpu"),
    _v("reduce.rows.segmented", REDUCE, "few rows of >= 2 minimum segments: segments, "
       "then a combine kernel", "reduce.min_segment_cpu"),
    _v("reduce.cols_cpu", REDUCE, "kept axes after the reduced ones, CPU column blocks",
       device="cpu"),
    _v("reduce.cols_gpu", REDUCE, "kept axes after the reduced ones, GPU", device="gpu"),
    _v("reduce.strided", REDUCE, "reduced axes not adjacent: one strided kernel"),
    _v("softmax.rows_cpu", ("Softmax",), "axis last, CPU (vectorized exp)", device="cpu"),
    _v("softmax.rows_gpu", ("Softmax",), "axis last, work-group tree", device="gpu"),
    _v("softmax.cols_cpu", ("Softmax",), "axis inner, CPU column blocks", device="cpu"),
    _v("softmax.cols_gpu", ("Softmax",), "axis inner, one column per work-item",
       device="gpu"),
    _v("scan.rows_gpu", SCANS, "axis last, not CumProd, work-group scan", device="gpu"),
    _v("scan.lines", SCANS, "one line per work-item (axis last on a CPU; CumProd or axis "
       "inner on a GPU)"),
    _v("scan.cols_cpu", SCANS, "axis inner, CPU column blocks", device="cpu"),
    _v("scan.segmented", SCANS, "axis last, few rows of >= 2 minimum segments: segment "
       "totals, carries, rescan", "reduce.min_segment_cpu"),
    _v("arg.rows_gpu", ARGS, "axis last, work-group tree", device="gpu"),
    _v("arg.rows_cpu", ARGS, "axis last on a CPU: vector lanes", device="cpu"),
    _v("arg.lines", ARGS, "axis inner: one line per work-item"),
    _v("topk.private", ("TopK",), "k <= 64: candidates in private arrays"),
    _v("topk.scratch", ("TopK",), "k > 64: candidates in global scratch"),
    _v("norm.rows_cpu", NORMS, "normalized axes last, CPU", device="cpu"),
    _v("norm.rows_gpu", NORMS, "normalized axes last, work-group tree", device="gpu"),
    _v("norm.cols_cpu", NORMS[:3], "normalized axis inner, CPU column blocks",
       device="cpu"),
    _v("norm.cols_gpu", NORMS[:3], "normalized axis inner, GPU",
       device="gpu"),
    _v("batchnorm", ("BatchNormInference",), "one element per work-item"),
    _v("matmul.direct", MATMUL, "M·N·K·batch <= linalg.direct_macs (or K = 0): one direct "
       "kernel", "linalg.direct_macs"),
    _v("matmul.gemm_cpu", MATMUL, "above linalg.direct_macs on a CPU: packed register tiles",
       "linalg.direct_macs", "cpu"),
    _v("matmul.gemm_gpu", MATMUL, "above linalg.direct_macs on a GPU: local-memory tiles",
       "linalg.direct_macs", "gpu"),
    _v("matmul.skinny", ("MatMul",), "CPU, 1..4 rows, above linalg.direct_macs",
       "linalg.direct_macs", "cpu"),
    _v("conv.images.whole", ("Conv", "ConvTranspose2d"), "every image's unfolded input "
       "fits conv.chunk_bytes: one product launch", "conv.chunk_bytes"),
    _v("conv.images.chunked", ("Conv", "ConvTranspose2d"), "more images than fit "
       "conv.chunk_bytes: a launch per chunk of whole images", "conv.chunk_bytes"),
    _v("move.map", MOVES + ("Concat", "ResizeNearest2x"), "an index-map copy"),
    _v("move.tiled_cpu", ("Transpose",) + MOVES[1:], "a transposing map on a CPU: tiles "
       "per work-item", device="cpu"),
    _v("move.tiled_gpu", ("Transpose",) + MOVES[1:], "a transposing map on a GPU: local "
       "tiles", device="gpu"),
    _v("attention.cpu", ("Attention",), "CPU: rows per work-item, vector exp over key blocks",
       device="cpu"),
    _v("attention.gpu", ("Attention",), "GPU: one row per work-item", device="gpu"),
    _v("loop.host", ("While", "Scan"), "the host drives the compiled bodies"),
    _v("host.reference", ("DenseSolve",) + QUANT_HOST, "a kind (or a quant scheme) without "
       "a kernel: the reference runs on the host between a read-back and an upload"),
    _v("quant.gemv_cpu", GGUF_MM, "GGUF weight, at most 4 x rows (per expert run), CPU: a "
       "work-item per W row", device="cpu"),
    _v("quant.gemv_gpu", GGUF_MM, "GGUF weight, at most 4 x rows (per expert run), GPU: a "
       "work-group per W row", device="gpu"),
    _v("quant.gemv_groups", GGUF_MM, "GGUF weight, more than 4 rows on a CPU where no x "
       "panel fits the scratch share: the GEMV over groups of 4 rows", device="cpu"),
    _v("quant.tiled_cpu", GGUF_MM, "GGUF weight, more than 4 rows on a CPU: W decoded a "
       "chunk at a time for every packed x panel", device="cpu"),
    _v("quant.tiled_gpu", GGUF_MM, "GGUF weight, more than 4 rows on a GPU: local-memory "
       "tiles", device="gpu"),
    _v("quant.grouped", ("DequantGroupedMatMul",), "tokens sorted by expert on the host, "
       "each expert's run read and written through the permutation"),
    _v("quant.moe_weights", ("DequantMoEWeights",), "packed expert slabs decoded and "
       "transposed to [E, K, N]"),
    _v("quant.linear", ("DequantMatMul",), "4-operand schemes: each weight decoded from "
       "w_q, scale and zp inside the K loop, 4 x rows per work-item"),
    _v("quant.affine", ("Quantize", "Dequantize"), "one element per work-item, per-channel "
       "scale and zero-point vectors"),
    _v("qmatmul", ("QMatMul",), "an output per work-item, exact integer sum, requantized"),
    _v("qconv2d", ("QConv2d",), "an output per work-item, taps in the padding skipped"),
    _v("grouped_matmul", ("GroupedMatMul",), "expert ids checked on the host, an output "
       "per work-item"),
    _v("lora", ("LoraMatMul",), "x·A scaled into a rank-R scratch, then x·W + t·B"),
]

declare(B, VARIANTS, THRESHOLDS)


def th(short: str) -> int:
    """The value in force of threshold ``opencl:<short>``."""
    return threshold(f"{B}:{short}")


def use(short: str) -> None:
    """Record that the plan runs variant ``opencl:<short>``."""
    chose(f"{B}:{short}")


def use_dev(family: str, gpu: bool) -> None:
    """Record ``family_gpu`` or ``family_cpu`` by the device style."""
    chose(f"{B}:{family}_{'gpu' if gpu else 'cpu'}")
