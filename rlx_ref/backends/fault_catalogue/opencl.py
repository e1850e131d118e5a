"""Planted faults in OpenCL's kernels."""
from __future__ import annotations

from ..faults import Fault
from ._patches import mod_for_middle_ones

CL = "opencl"
# CPU-variant faults run on the CPU-style kernels whatever device the machine has
CPU_STYLE = "opencl/cpu-kernels"

FAULTS = (
    Fault("cl-ew-tail", CL, "tail off-by-one", "opencl:ew.read.full",
          "the elementwise kernel's bound check drops the last element",
          attr_op="Sigmoid", ops="Activation", dtypes="f32", kernel="ew_",
          edits=(("    if (i >= n) return;\n", "    if (i >= n - 1) return;\n"),)),
    Fault("cl-chain-step", CL, "chain step reads the wrong earlier step",
          "opencl:ew.read.full",
          "step 2 of a fused chain reads step 0 where it should read step 1",
          ops="ElementwiseRegion", dtypes="f32", tags=("power",), kernel="ew_",
          edits=(("re:(\n    \\w+ s2 = [^\n]*?)\\bs1\\b", "\\1s0"),)),
    Fault("cl-middle-broadcast", CL, "suffix-modulus read for a middle size-1 axis",
          "opencl:ew.read.strided",
          "a broadcast with a size-1 middle axis is read as a suffix modulus",
          ops="Binary", dtypes="f32", tags=("middle-size-1",),
          patches=(("rlx_ref.backends.opencl.lower_elementwise:read_mode",
                    mod_for_middle_ones),)),
    Fault("cl-tile-stride", CL, "tiled-transpose stride", "opencl:move.tiled_cpu",
          "the tiled transpose (CPU kernel) steps through input columns with the output's "
          "row length",
          ops="Transpose", kernel="rlx_movet",
          edits=(("d[r * C + c] = x[src + r + c * sc];", "d[r * C + c] = x[src + r + c * C];"),),
          spec=CPU_STYLE),
    Fault("cl-segmented-last-partial", CL, "dropped last partial in the segmented reduce",
          "opencl:reduce.rows.segmented",
          "the combine kernel of a segmented row reduction skips the last segment",
          ops="Reduce", tags=("power",), kernel="reduce_",
          edits=(("for (long c = 0; c < nchunk; c++) { ACC v = part",
                  "for (long c = 0; c < nchunk - 1; c++) { ACC v = part"),)),
    Fault("cl-scan-carry", CL, "dropped last partial in the segmented reduce",
          "opencl:scan.segmented",
          "the carry into each segment of a long scan row is the previous segment's total "
          "alone, not the running total",
          ops="Cumsum", tags=("power",),
          edits=(("        part[r * nchunk + c] = a;\n", "        part[r * nchunk + c] = v;\n"),)),
    Fault("cl-norm-unshifted", CL, "f32 mean with a large offset", "opencl:norm.rows_cpu",
          "the normalization mean is summed over raw x in float (no shift by the block's "
          "first element, and float statistics as devices without fp64 compute them), so a "
          "large common offset loses its digits",
          ops="LayerNorm", dtypes="f32", tags=("power",),
          patches=(("rlx_ref.backends.opencl._reduce_norm:WIDE", lambda wide: "float"),),
          edits=(("    piv = L ? LDX(lo) : 0;\n", "    piv = 0;\n"),
                 ("    piv = C ? LDX(base) : 0;\n", "    piv = 0;\n"),
                 ("re:\n    if \\(C\\) piv\\d+ = LDXV\\(base \\+ \\d+\\);", "")),
          spec=CPU_STYLE),
    Fault("cl-argmax-tie", CL, "tie order", "opencl:arg.rows_cpu",
          "ArgMax prefers the later of equal values",
          ops="ArgMax", limit=24,
          edits=(("((v) == best && (j) < idx)", "((v) == best && (j) > idx)"),
                 ("(idx < 0 || BETTER(v, best))) { best = v; idx = k; }",
                  "(idx < 0 || BETTER(v, best) || v == best)) { best = v; idx = k; }")),
          spec=CPU_STYLE),
    Fault("cl-norm-eps", CL, "eps placement", "opencl:norm.cols_cpu",
          "eps is added after the square root: 1/(sqrt(var) + eps)",
          ops="LayerNorm", dtypes="f32",
          edits=(("CT rstd = (CT)1 / sqrt(s / (CT)L + eps);",
                  "CT rstd = (CT)1 / (sqrt(s / (CT)L) + eps);"),),
          spec=CPU_STYLE),
    Fault("cl-round-half-up", CL, "rounding mode", "opencl:ew.read.full",
          "Round rounds halves up instead of to even",
          attr_op="Round", ops="Activation", dtypes="f32", kernel="ew_",
          edits=(("rint(", "floor(0.5f + "),)),
    Fault("cl-f16-step-rounding", CL, "f16 intermediate rounding skipped",
          "opencl:ew.read.full",
          "f16 steps inside a fused region keep float precision (no rounding to half)",
          ops="ElementwiseRegion", dtypes="f16", tags=("power",), kernel="prelude",
          edits=(("RLX_INLINE float rlx_rnd_f16(float x) {",
                  "RLX_INLINE float rlx_rnd_f16(float x) { return x;"),)),
    Fault("cl-softplus-nan", CL, "dropped NaN propagation", "opencl:ew.read.full",
          "Softplus returns 0 for NaN instead of NaN",
          attr_op="Softplus", ops="Activation", dtypes="f32", kernel="prelude",
          edits=(("log1p(exp(-fabs(x))) : x;", "log1p(exp(-fabs(x))) : 0;"),)),
)
