"""Planted faults in OpenCL's GPU-style kernels (work-group trees, local-memory tiles).

They run on ``opencl/gpu-kernels`` (``spec``), which renders those kernels on any device:
PoCL runs work-group barriers and local memory as a GPU does, so a missing barrier or a
tree that stops early shows on a CPU too.
"""
from __future__ import annotations

from ..faults import Fault

CL = "opencl"
GPU = "opencl/gpu-kernels"
BARRIER = "barrier(CLK_LOCAL_MEM_FENCE);"

FAULTS = (
    Fault("clg-reduce-tree-early", CL, "tree reduction halving off-by-one",
          "opencl:reduce.rows_gpu",
          "the row reduction's local-memory tree stops one step early (w > 1), so the "
          "partial of work-item 1 never reaches the total",
          ops="Reduce", dtypes="f32", tags=("tiling",), kernel="reduce_rows_gpu", spec=GPU,
          edits=(("for (int w = WG / 2; w > 0; w >>= 1)",
                  "for (int w = WG / 2; w > 1; w >>= 1)"),)),
    Fault("clg-reduce-cols-tail", CL, "tail off-by-one", "opencl:reduce.cols_gpu",
          "the column reduction (a column per work-item) stops before the last reduced row",
          ops="Reduce", dtypes="f32", tags=("middle-axis",), kernel="reduce_cols_gpu",
          spec=GPU,
          edits=(("for (long k = 0; k < K; k++) { ACC v = LDX(base + k * inner);",
                  "for (long k = 0; k < K - 1; k++) { ACC v = LDX(base + k * inner);"),)),
    Fault("clg-softmax-max-race", CL, "missing barrier", "opencl:softmax.rows_gpu",
          "no barrier between reading the row max from local memory and reusing that "
          "memory for the sum tree: later work-items read a partial sum as the max",
          ops="Softmax", dtypes="f32", tags=("tiling",), kernel="softmax_rows_gpu", spec=GPU,
          edits=((f"    m = sh[0];\n    {BARRIER}\n", "    m = sh[0];\n"),)),
    Fault("clg-softmax-cols-sum-tail", CL, "tail off-by-one", "opencl:softmax.cols_gpu",
          "the column softmax (a column per work-item) sums exp over all but the last "
          "element, so columns no longer sum to 1",
          ops="Softmax", dtypes="f32", tags=("middle-axis",), kernel="softmax_cols_",
          spec=GPU,
          edits=(("    CT s = 0;\n    for (long k = 0; k < K; k++) {\n",
                  "    CT s = 0;\n    for (long k = 0; k < K - 1; k++) {\n"),)),
    Fault("clg-norm-partial-var", CL, "partial read instead of the tree total",
          "opencl:norm.rows_gpu",
          "each work-item scales by the variance of its own partial sum, not the total the "
          "local-memory tree left in sh[0]",
          ops="LayerNorm", dtypes="f32", tags=("tiling",), kernel="norm_rows_gpu", spec=GPU,
          edits=(("CT rstd = (CT)1 / sqrt(sh[0] / (CT)L + eps);",
                  "CT rstd = (CT)1 / sqrt(s / (CT)L + eps);"),)),
    Fault("clg-norm-cols-stride", CL, "stride error", "opencl:norm.cols_gpu",
          "the line kernel (a line per work-item) drops the outer slice stride: every "
          "slice normalizes the first one's lines",
          ops="LayerNorm", dtypes="f32", tags=("non-last-axis",), kernel="norm_cols_", spec=GPU,
          edits=(("re:_line\\(out, x, g, b, C, inner, o \\* C \\* inner \\+ i, eps\\);",
                  "_line(out, x, g, b, C, inner, o * inner + i, eps);"),)),
    Fault("clg-scan-step-race", CL, "missing barrier", "opencl:scan.rows_gpu",
          "the Hillis-Steele scan step writes sh[l] without waiting until every work-item "
          "has read its left neighbour, which then is already updated",
          ops="Cumsum", dtypes="f32", tags=("tiling",), kernel="scan_rows_gpu", spec=GPU,
          edits=((f"sh[l - w] : IDENT;\n            {BARRIER}\n", "sh[l - w] : IDENT;\n"),)),
    Fault("clg-argmax-tree-tie", CL, "tie order", "opencl:arg.rows_gpu",
          "the work-group tree merging two partial answers prefers the later index on ties",
          ops="ArgMax", dtypes="f32", tags=("ties",), kernel="arg_rows_gpu", spec=GPU,
          edits=(("(b2 == b1 && j2 < j1)", "(b2 == b1 && j2 > j1)"),)),
    Fault("clg-gemm-tile-edge", CL, "tile edge dropped", "opencl:matmul.gemm_gpu",
          "the local-memory product's store guard drops the last output column of every "
          "matrix (n < N - 1)",
          ops="MatMul", dtypes="f32", tags=("lowered-thresholds",), kernel="mm_gpu", spec=GPU,
          edits=(("re:< N\\) \\{", "< N - 1) {"),)),
    Fault("clg-transpose-barrier", CL, "missing barrier", "opencl:move.tiled_gpu",
          "the tiled transpose reads its local tile back without the barrier after the "
          "writes, so it reads cells other work-items have not written yet",
          ops="Transpose", tags=("tile",), kernel="rlx_movet", spec=GPU,
          edits=((f"    {BARRIER}\n", ""),)),
    Fault("clg-attention-stale-max", CL, "stale running max", "opencl:attention.gpu",
          "the one-key-per-step online softmax (GPU rendering) weights a new key against "
          "the running max from before it, not the updated one",
          ops="Attention", dtypes="f32", kernel="attn", spec=GPU,
          edits=(("re:exp\\(sc\\[0\\] - \\((float|double)\\)mn\\)", "exp(sc[0] - (\\1)mo)"),)),
)
