"""numba-cpu's kernel variants and the size thresholds that select them.

Lowerings read thresholds with ``th(short name)`` and record the variant they pick with
``use(short name)`` (both add the ``numba-cpu:`` prefix). ``rlx-ref variants`` prints
this table; ``CompileOptions(thresholds=...)`` or ``RLX_REF_THRESHOLDS`` lowers them.
"""
from __future__ import annotations

from ..variants import Threshold, Variant, chose, declare, threshold

B = "numba-cpu"
EW = ("ElementwiseRegion", "Activation", "Binary", "Compare", "Cast", "StopGradient", "Where",
      "Fma", "Clamp")
MOVES = ("Transpose", "Reshape", "Narrow", "Slice", "Expand", "Reverse", "Tile",
         "ResizeNearest2x", "Pad")
NORMS = ("LayerNorm", "RmsNorm", "LayerNorm2d", "GroupNorm")
MATMUL = ("MatMul", "DotGeneral")
GGUF_MM = ("DequantMatMul", "DequantGroupedMatMul")

THRESHOLDS = [
    Threshold(f"{B}:par_elements", 1 << 15, 1,
              "elements a kernel covers from which elementwise, Reduce, Softmax, scans, "
              "ArgMax/ArgMin, TopK and norm kernels run in prange"),
    Threshold(f"{B}:reduce.chunk", 1 << 16, 1,
              "elements per task of the split long-row Reduce; rows of >= 4 chunks split"),
    Threshold(f"{B}:move.par_bytes", 1 << 18, 1,
              "output bytes from which movement, gather, scatter, Concat and Trilu run in "
              "prange (and a transpose-like move runs tiled)"),
    Threshold(f"{B}:gather.piece", 1 << 14, 1,
              "least elements per parallel Gather work item cut from a long row"),
    Threshold(f"{B}:linalg.blas_min", 1 << 12, 1,
              "M·N·K per batch from which a float product calls BLAS"),
    Threshold(f"{B}:linalg.par_min", 1 << 18, 1,
              "multiply-adds from which the loop product runs in prange"),
    Threshold(f"{B}:linalg.blas_par_min", 1 << 21, 1,
              "multiply-adds from which the BLAS product runs as row blocks in prange"),
    Threshold(f"{B}:attention.par_min", 1 << 18, 1,
              "scored key·dim products (Attention) or elements (Rope) from which tiles or "
              "rows run in prange"),
    Threshold(f"{B}:attention.f32_min_keys", 64, 0,
              "keys from which f32/f16/bf16 Attention takes f32 products"),
    Threshold(f"{B}:attention.f32_min_terms", 4096, 0,
              "keys·head width from which f32/f16/bf16 Attention takes f32 products"),
    Threshold(f"{B}:conv.par_min", 1 << 15, 1,
              "loop iterations × inner work from which conv, pool and im2col run in prange"),
    Threshold(f"{B}:conv.cols_bytes", 16 << 20, 1,
              "unfold scratch bytes of the im2col Conv and ConvTranspose2d: more images "
              "than fit are unfolded and multiplied a chunk of whole images at a time"),
    Threshold(f"{B}:conv.nhwc_min_cg", 8, 1,
              "channels per group from which a (not 1×1) Conv unfolds channels-last blocks",
              lowered=8),         # at 1 no Conv would take the parallel im2col kernel
]


def _pair(family: str, kinds, th: str, what: str) -> list:
    """The serial and prange variants of one kernel family."""
    return [Variant(f"{B}:{family}.serial", tuple(kinds), f"{what} below {th}", f"{B}:{th}"),
            Variant(f"{B}:{family}.par", tuple(kinds), f"{what} at or above {th}",
                    f"{B}:{th}")]


VARIANTS = [
    *_pair("ew", EW, "par_elements", "output elements"),
    *(Variant(f"{B}:ew.read.{m}", EW, rule) for m, rule in (
        ("full", "an operand of the output's shape read by flat index"),
        ("scalar", "a one-element operand read once"),
        ("mod", "an operand that is a suffix of the output read modulo its size"),
        ("strided", "a broadcast operand read through its strides"),
        ("up2", "a ResizeNearest2x prologue operand read at half coordinates"))),
    *_pair("reduce.rows", ("Reduce",), "par_elements", "input elements, reduced axes last"),
    *_pair("reduce.cols", ("Reduce",), "par_elements", "input elements, kept axes after"),
    Variant(f"{B}:reduce.chunks_par", ("Reduce",),
            "parallel, fewer than 2·threads rows and rows of >= 4 × reduce.chunk elements",
            f"{B}:reduce.chunk"),
    *_pair("softmax.rows", ("Softmax",), "par_elements", "elements, softmax axis last"),
    *_pair("softmax.cols", ("Softmax",), "par_elements", "elements, softmax axis inner"),
    *_pair("scan.rows", ("Cumsum", "CumProd", "CumMax"), "par_elements",
           "elements, scan axis last"),
    *_pair("scan.cols", ("Cumsum", "CumProd", "CumMax"), "par_elements",
           "elements, scan axis inner"),
    *_pair("arg.rows", ("ArgMax", "ArgMin"), "par_elements", "elements, axis last"),
    *_pair("arg.cols", ("ArgMax", "ArgMin"), "par_elements", "elements, axis inner"),
    *_pair("topk", ("TopK",), "par_elements", "input elements"),
    Variant(f"{B}:topk.buffer", ("TopK",), "k <= 32: a sorted candidate buffer per row"),
    Variant(f"{B}:topk.sort", ("TopK",), "k > 32: the row is sorted"),
    *_pair("norm.blocks", NORMS, "par_elements", "elements, normalized axes last"),
    *_pair("norm.cols", ("LayerNorm", "RmsNorm", "LayerNorm2d"), "par_elements",
           "elements, normalized axes inner"),
    *_pair("batchnorm", ("BatchNormInference",), "par_elements", "elements"),
    *_pair("fused.swiglu", ("FusedSwiGLU",), "par_elements", "output elements"),
    *_pair("fused.gated", ("GatedResidual",), "par_elements", "output elements"),
    *_pair("fused.residual_rms", ("FusedResidualRmsNorm",), "par_elements", "elements"),
    *_pair("fused.conv_epilogue", ("FusedConvBiasAct",), "par_elements", "output elements"),
    Variant(f"{B}:move.serial", MOVES, "output bytes below move.par_bytes",
            f"{B}:move.par_bytes"),
    Variant(f"{B}:move.par", MOVES, "output bytes at or above move.par_bytes, not "
            "transpose-like", f"{B}:move.par_bytes"),
    Variant(f"{B}:transpose.tiled", ("Transpose",) + MOVES[1:],
            "output bytes at or above move.par_bytes and the last two axes swap strides",
            f"{B}:move.par_bytes"),
    *_pair("concat", ("Concat",), "move.par_bytes", "output bytes"),
    *_pair("trilu", ("Trilu",), "move.par_bytes", "output bytes"),
    *_pair("gather.rows", ("Gather",), "move.par_bytes", "output bytes"),
    Variant(f"{B}:gather.pieces", ("Gather", "GatherNd"), "parallel Gather/GatherNd with fewer "
            "rows than 4·threads and rows longer than gather.piece: rows are cut in pieces",
            f"{B}:gather.piece"),
    *_pair("gather.elements", ("GatherElements",), "move.par_bytes", "output bytes"),
    *_pair("gather.nd", ("GatherNd",), "move.par_bytes", "output bytes"),
    *_pair("scatter", ("ScatterAdd", "ScatterElements", "ScatterNd"), "move.par_bytes",
           "output bytes"),
    *_pair("matmul.loop", MATMUL, "linalg.par_min", "multiply-adds (integers, or float "
           "below linalg.blas_min per batch)"),
    Variant(f"{B}:matmul.blas", MATMUL, "float, M·N·K per batch >= linalg.blas_min, "
            "multiply-adds below linalg.blas_par_min (or one block)", f"{B}:linalg.blas_min"),
    Variant(f"{B}:matmul.blas.par", MATMUL, "float, multiply-adds >= linalg.blas_par_min "
            "and more than one row block", f"{B}:linalg.blas_par_min"),
    *_pair("attention", ("Attention",), "attention.par_min", "key·dim products"),
    Variant(f"{B}:attention.f64_products", ("Attention",), "f64, or fewer keys than "
            "attention.f32_min_keys or keys·D below attention.f32_min_terms",
            f"{B}:attention.f32_min_keys"),
    Variant(f"{B}:attention.f32_products", ("Attention",), "f32/f16/bf16 with keys >= "
            "attention.f32_min_keys and keys·D >= attention.f32_min_terms",
            f"{B}:attention.f32_min_terms"),
    *_pair("rope", ("Rope",), "attention.par_min", "elements"),
    *_pair("conv.gemm", ("Conv",), "conv.par_min", "unfold work, channels per group below "
           "conv.nhwc_min_cg"),
    *_pair("conv.1x1", ("Conv",), "conv.par_min", "1×1 stride-1 unpadded Conv work"),
    *_pair("conv.depthwise", ("Conv",), "conv.par_min", "one input channel per group: "
           "output × window elements"),
    *_pair("conv.nhwc", ("Conv",), "conv.par_min", "work, channels per group >= "
           "conv.nhwc_min_cg, not 1×1"),
    Variant(f"{B}:conv.cols.whole", ("Conv", "ConvTranspose2d"), "every image's unfold fits "
            "conv.cols_bytes: one pass", f"{B}:conv.cols_bytes"),
    Variant(f"{B}:conv.cols.chunked", ("Conv", "ConvTranspose2d"), "more images than fit "
            "conv.cols_bytes: chunks of whole images", f"{B}:conv.cols_bytes"),
    *_pair("convt.gemm", ("ConvTranspose2d",), "conv.par_min", "work"),
    *_pair("pool", ("Pool",), "conv.par_min", "output × window elements"),
    *_pair("im2col", ("Im2Col",), "conv.par_min", "output elements"),
    Variant(f"{B}:quant.gemv", GGUF_MM, "GGUF weight, one x row: tasks of W rows, each "
            "block decoded into registers (or a row scratch) and dotted with x"),
    Variant(f"{B}:quant.tiles", ("DequantMatMul",), "GGUF weight, more than one x row: W "
            "decoded a tile of rows by a chunk of k at a time, BLAS sgemm into the output"),
    Variant(f"{B}:quant.grouped", ("DequantGroupedMatMul",), "tokens counting-sorted by "
            "expert, one GEMV or tiled product per expert run, rows written back"),
    Variant(f"{B}:quant.moe_weights", ("DequantMoEWeights",), "packed expert slabs decoded "
            "a few rows at a time and written transposed into [E, K, N]"),
    Variant(f"{B}:quant.linear", ("DequantMatMul",), "4-operand schemes: each weight "
            "decoded from w_q, scale and zp inside the K loop, panels of columns per task"),
    Variant(f"{B}:quant.affine", ("Quantize", "Dequantize"), "flat elements, per-channel "
            "scale and zero point by index"),
    Variant(f"{B}:qmatmul", ("QMatMul",), "x rows in prange, exact int64 sums, requantized"),
    Variant(f"{B}:qconv2d", ("QConv2d",), "(image, output channel) planes in prange, taps "
            "in the padding skipped"),
    Variant(f"{B}:grouped_matmul", ("GroupedMatMul",), "expert ids checked on the host, "
            "token rows in prange"),
    Variant(f"{B}:lora", ("LoraMatMul",), "rows in prange: x·A scaled, then x·W + t·B"),
    Variant(f"{B}:loop.compiled", ("Scan", "While"), "every body step has a compiled form: "
            "an njit driver runs the iterations"),
    Variant(f"{B}:loop.host", ("Scan", "While"), "a body step without a compiled form (or "
            "no iterations): the host drives the bodies"),
]

declare(B, VARIANTS, THRESHOLDS)


def th(short: str) -> int:
    """The value in force of threshold ``numba-cpu:<short>``."""
    return threshold(f"{B}:{short}")


def use(short: str) -> None:
    """Record that the plan runs variant ``numba-cpu:<short>``."""
    chose(f"{B}:{short}")


def use_par(family: str, par: bool) -> bool:
    """Record ``family.par`` or ``family.serial``; returns ``par``."""
    chose(f"{B}:{family}.{'par' if par else 'serial'}")
    return par
