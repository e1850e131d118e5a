"""Planted faults in OpenCL's CPU-style kernels (vector blocks, column blocks, runs per
work-item), its elementwise read modes, products, conv, movement and host-driven paths."""
from __future__ import annotations

from ..faults import Fault

CL = "opencl"
CPU_STYLE = "opencl/cpu-kernels"     # CPU-variant faults: CPU-style kernels on any device
_LOWERED = ("lowered-thresholds",)


def host_result_through_f32(original):
    """The host path uploads the reference's result through a float32 staging array."""
    import numpy as np

    class Staged:
        """The host runner whose results pass through float32 on their way back."""

        def __getattr__(self, attr):
            return getattr(original, attr)

        def run_node(self, node, args, ctx):
            out = np.asarray(original.run_node(node, args, ctx))
            return out.astype(np.float32).astype(out.dtype) if out.dtype.kind == "f" else out
    return Staged()


def trajectory_one_step_early(original):
    """A saved Scan trajectory row takes the carry one step early (the row of step t is
    written after step t - 1), so row 0 is never written."""
    def rows(a):
        return {t - 1: r for t, r in original(a).items()}
    return rows


FAULTS = (
    # ── elementwise read modes ─────────────────────────────────────────────
    Fault("cl-ew-mod-extent", CL, "suffix-modulus extent", "opencl:ew.read.mod",
          "a suffix operand is read modulo the output's innermost extent instead of its own "
          "size (right only for one-axis suffixes)",
          ops="Binary", dtypes="f32", tags=("bcast",), kernel="ew_",
          edits=(("re:\\bi % m(\\d+)\\b", "i % dims[ndim - 1]"),)),
    Fault("cl-ew-scalar-narrow", CL, "scalar operand narrowed to f32", "opencl:ew.read.scalar",
          "a one-element operand is read through a float, so an f64 scalar loses its low bits",
          ops="Binary", dtypes="f64", tags=("scalar-f64",), kernel="ew_",
          edits=(("re:(\\w+ v\\d+ = )(x\\d+\\[0\\]);", "\\1(float)\\2;"),)),
    Fault("cl-ew-up2-rows", CL, "up2 coordinates", "opencl:ew.read.up2",
          "the nearest-2x prologue wraps the output row (a tile) instead of halving it",
          ops="ElementwiseRegion", tags=("prologue",), kernel="ew_",
          edits=(("re:\\+ oy(\\d+) / 2\\)", "+ oy\\1 % (h2_\\1 / 2))"),)),
    # ── reductions (CPU vector and column blocks) ─────────────────────────
    Fault("cl-reduce-rows-tail", CL, "vector-block tail off-by-one", "opencl:reduce.rows_cpu",
          "the scalar tail after a row's vector blocks stops one element short",
          ops="Reduce", dtypes="f32", attr_op="Sum", kernel="reduce_rows_cpu",
          edits=(("for (; i < n; i++) { ACC v = LDX(lo + i); a = COMB(a, v); }",
                  "for (; i < n - 1; i++) { ACC v = LDX(lo + i); a = COMB(a, v); }"),),
          spec=CPU_STYLE),
    Fault("cl-reduce-cols-stride", CL, "column-block stride error", "opencl:reduce.cols_cpu",
          "a full column block steps down its rows by the block width, not the row length",
          ops="Reduce", dtypes="f32", attr_op="Sum", tags=("columns",),
          kernel="reduce_cols_cpu",
          edits=(("long p = base + k * inner;", "long p = base + k * CB;"),),
          spec=CPU_STYLE),
    Fault("cl-reduce-strided-order", CL, "strided-reduce axis order", "opencl:reduce.strided",
          "the strided reduction applies the outer reduced runs' strides in reverse order",
          ops="Reduce", dtypes="f32", kernel="reduce_strided",
          edits=(("off += i * rs[nred + d];", "off += i * rs[2 * nred - 1 - d];"),)),
    Fault("cl-softmax-no-max", CL, "softmax max-subtraction missing", "opencl:softmax.rows_cpu",
          "the row softmax exponentiates x itself, not x - max (large logits overflow)",
          ops="Softmax", dtypes="f32", kernel="softmax_rows_cpu",
          edits=(("re:(exp\\(LDXV?\\(lo \\+ i(?: \\+ VW)?\\)) - m\\)", "\\1)"),),
          spec=CPU_STYLE),
    Fault("cl-softmax-cols-tail", CL, "column-block tail off-by-one", "opencl:softmax.cols_cpu",
          "the last, partial column block of a middle-axis softmax skips its last column",
          ops="Softmax", dtypes="f32", kernel="softmax_cols_cpu",
          edits=(("i < o * K * inner + inner; i++)", "i < o * K * inner + inner - 1; i++)"),),
          spec=CPU_STYLE),
    Fault("cl-scan-cols-tail", CL, "column-block tail off-by-one", "opencl:scan.cols_cpu",
          "the last, partial column block of a middle-axis scan skips its last line",
          ops="Cumsum,CumProd,CumMax", dtypes="f32", kernel="scan_cols_cpu",
          edits=(("for (long i = base; i < row + inner; i++) {",
                  "for (long i = base; i < row + inner - 1; i++) {"),),
          spec=CPU_STYLE),
    Fault("cl-scan-lines-inclusive", CL, "scan inclusive/exclusive", "opencl:scan.lines",
          "an exclusive scan line stores the running value after its element (inclusive)",
          ops="Cumsum,CumProd", tags=("exclusive",), kernel="scan_lines",
          edits=(("{ ACC v = LDX(j); STO(j, a); a = COMB(a, v); }",
                  "{ ACC v = LDX(j); a = COMB(a, v); STO(j, a); }"),)),
    # ── index-valued reductions ───────────────────────────────────────────
    Fault("cl-arg-lines-stride", CL, "stride error", "opencl:arg.lines",
          "ArgMax/ArgMin over an inner axis step along the line by 1, not by the inner size",
          ops="ArgMax,ArgMin", dtypes="f32", tags=("strided-axis",), kernel="arg_lines",
          edits=(("CT v = LDX(base + k * inner);", "CT v = LDX(base + k);"),)),
    Fault("cl-topk-tie", CL, "tie order", "opencl:topk.private",
          "TopK's insertion moves a new element ahead of an equal earlier one (ties give "
          "the later index first)",
          ops="TopK", tags=("ties",), limit=6, kernel="topk",
          edits=(("while (p > 0 && ABOVE(v, vals[p - 1])) {",
                  "while (p > 0 && !ABOVE(vals[p - 1], v)) {"),)),
    Fault("cl-topk-last-slot", CL, "TopK k boundary", "opencl:topk.scratch",
          "TopK stores only the first k - 1 of its k candidates",
          ops="TopK", tags=("variants",), kernel="topk",
          edits=(("for (long j = 0; j < TK; j++) STO(",
                  "for (long j = 0; j < TK - 1; j++) STO("),)),
    # ── normalization, attention ──────────────────────────────────────────
    Fault("cl-batchnorm-eps", CL, "eps placement", "opencl:batchnorm",
          "BatchNormInference adds eps after the square root: (x - m) / (sqrt(v) + eps)",
          ops="BatchNormInference", dtypes="f32,f64", kernel="norm_batchnorm",
          edits=(("/ sqrt(LDV(c) + eps)", "/ (sqrt(LDV(c)) + eps)"),)),
    Fault("cl-attention-row-tail", CL, "tail off-by-one", "opencl:attention.cpu",
          "a CPU attention work-item stores all but the last query row of the sequence",
          ops="Attention", dtypes="f32", limit=6, kernel="attn",
          edits=(("re:(r < \\d+ && q0 \\+ r < Sq)", "\\1 - 1"),),
          spec=CPU_STYLE),
    Fault("cl-attention-rescale", CL, "online-softmax rescale dropped", "opencl:attention.cpu",
          "when a later key block raises a row's running max, the running sum is not "
          "rescaled (the accumulated values are)",
          ops="Attention", dtypes="f32", tags=("power",), kernel="attn",
          edits=(("                l[r] *= corr;\n", ""),),
          spec=CPU_STYLE),
    # ── products, conv ────────────────────────────────────────────────────
    Fault("cl-matmul-direct-k", CL, "K loop off-by-one", "opencl:matmul.direct",
          "the direct product kernel skips the last contracted index",
          ops="MatMul,DotGeneral", dtypes="f32", kernel="mm_direct",
          edits=(("for (int k = 0; k < K; k++) acc =", "for (int k = 0; k < K - 1; k++) acc ="),)),
    Fault("cl-gemm-edge-panel", CL, "GEMM edge tile dropped", "opencl:matmul.gemm_cpu",
          "the CPU GEMM counts only whole MR-row panels, so a partial last row panel is "
          "never computed",
          ops="MatMul,DotGeneral", dtypes="f32", tags=_LOWERED, kernel="mm_cpu",
          edits=(("re:mp = \\(M \\+ (\\d+) - 1\\) / \\d+", "mp = M / \\1"),),
          spec=CPU_STYLE),
    Fault("cl-skinny-col-tail", CL, "skinny kernel column bound", "opencl:matmul.skinny",
          "the skinny product returns early for a partial last run of columns",
          ops="MatMul", tags=_LOWERED, kernel="mm_skinny",
          edits=(("re:(\\* (\\d+);\n.*\n    )if \\(n0 >= N\\) return;",
                  "\\1if (n0 + \\2 > N) return;"),),
          spec=CPU_STYLE),
    Fault("cl-conv-pad-edge", CL, "conv padding off-by-one", "opencl:conv.images.whole",
          "the conv unfold treats input column 0 as padding (ix > 0 where ix >= 0)",
          ops="Conv", dtypes="f32", kernel="pack",
          edits=(("ix >= 0 && ix < Wd) v =", "ix > 0 && ix < Wd) v ="),)),
    Fault("cl-conv-chunk-offset", CL, "conv chunk offset", "opencl:conv.images.chunked",
          "every chunk of images unfolds the first images again (the chunk's first image "
          "is not added)",
          ops="Conv,ConvTranspose2d", dtypes="f32", tags=_LOWERED, kernel="pack",
          edits=(("bb = b0 + b;", "bb = b;"),)),
    # ── movement, host-driven paths ───────────────────────────────────────
    Fault("cl-move-map-inner-stride", CL, "index-map stride", "opencl:move.map",
          "the index-map copy reads the innermost axis contiguously, ignoring its stride",
          ops="Slice,Reverse,Transpose", dtypes="f32", kernel="rlx_move",
          edits=(("for (long j = j0; j < j1; ++j) o[j] = s[j * st];",
                  "for (long j = j0; j < j1; ++j) o[j] = s[j];"),)),
    Fault("cl-host-f32-staging", CL, "host fallback result perturbed", "opencl:host.reference",
          "the declared host path uploads the reference's result through a float32 array",
          ops="DenseSolve", dtypes="f64",
          patches=(("rlx_ref.backends.opencl.lower_host:_RUNNER", host_result_through_f32),)),
    Fault("cl-scan-trajectory-early", CL, "trajectory row off-by-one", "opencl:loop.host",
          "a host-driven Scan writes each trajectory row one step early",
          ops="Scan",
          patches=(("rlx_ref.backends.opencl.lower_control:_scan_rows",
                    trajectory_one_step_early),)),
)
