"""Planted faults in numba-cpu's index, scan, softmax and normalization kernels, the
column-tile Reduce, and the elementwise read modes (suffix modulus, scalar, prologue).

The serial and prange twins of a kernel share their text, so an edit that belongs to one
of them is confined to its body (``_within``): the fault sits in the variant it names.
"""
from __future__ import annotations

import re

from ..faults import Fault

NB = "numba-cpu"
_LOWERED = ("lowered-thresholds",)


def _within(kernel: str, old: str, new: str) -> tuple:
    """An edit of ``old`` → ``new`` only inside ``def kernel(`` (a regex naming one kernel
    of the module; the match cannot run past the next ``@njit``)."""
    return (rf"re:(?s)(def {kernel}\((?:(?!\n@njit).)*?){re.escape(old)}",
            r"\g<1>" + new.replace("\\", "\\\\"))


def up2_round_half_up(original):
    """The ResizeNearest2x prologue rounds the source coordinate half up: output row y
    (column x) reads input (y + 1) // 2, clamped to the edge, instead of y // 2."""
    def upsample(x):
        y = original(x)
        y[:, :, :-1] = y[:, :, 1:].copy()
        y[:, :, :, :-1] = y[:, :, :, 1:].copy()
        return y
    return upsample


_SOFTMAX = "softmax_f(?:32|64)"
_SCAN = r"cum\w+"

FAULTS = (
    # ── ArgMax / ArgMin (numba-cpu) ────────────────────────────────────────
    Fault("arg-cols-nan-first", NB, "dropped NaN propagation", "numba-cpu:arg.cols.serial",
          "ArgMax/ArgMin over a middle axis let a later value beat a NaN at index 0 "
          "(the answer must stay 0)",
          ops="ArgMax,ArgMin", tags=("power", "nan-first"), kernel="select",
          edits=(_within("arg_cols", "if idx[i] >= 0 and x0[i] == x0[i] else 0",
                         "if idx[i] >= 0 else 0"),)),
    Fault("arg-cols-par-tail", NB, "column-block tail off-by-one", "numba-cpu:arg.cols.par",
          "the parallel ArgMax/ArgMin column tiles leave the last column of the last tile",
          ops="ArgMax,ArgMin", dtypes="f32", tags=_LOWERED, kernel="select",
          edits=(_within("arg_cols_par", "w = min(ib, inner - i0)",
                         "w = min(ib, inner - i0 - 1)"),)),
    Fault("arg-rows-par-nan-row", NB, "NaN check reads the wrong row", "numba-cpu:arg.rows.par",
          "the parallel ArgMax/ArgMin row kernel tests element 0 of the first row for NaN, "
          "not element 0 of its own row",
          ops="ArgMax,ArgMin", dtypes="f32", tags=("nan",) + _LOWERED, kernel="select",
          edits=(_within("arg_rows_par", "idx >= 0 and xr[0] == xr[0] else 0",
                         "idx >= 0 and x[0] == x[0] else 0"),)),
    # ── scans (numba-cpu) ─────────────────────────────────────────────────
    Fault("scan-rows-exclusive", NB, "exclusive/inclusive confusion",
          "numba-cpu:scan.rows.serial",
          "the exclusive row scan stores the running value after adding the element",
          ops="Cumsum,CumProd,CumMax", tags=("exclusive",), kernel="cum",
          edits=(_within(rf"{_SCAN}_rows", "orow[k] = a\n                    a = _c(a, xr[k])",
                         "a = _c(a, xr[k])\n                    orow[k] = a"),)),
    Fault("scan-rows-par-task", NB, "dropped last partial of the task split",
          "numba-cpu:scan.rows.par",
          "the parallel row scan runs one task fewer than it split the rows into",
          ops="Cumsum,CumProd,CumMax", dtypes="f32", tags=_LOWERED, kernel="cum",
          edits=(_within(rf"{_SCAN}_rows_par", "for t in prange(ntask):",
                         "for t in prange(ntask - 1):"),)),
    Fault("scan-cols-reversed", NB, "scan direction reversed", "numba-cpu:scan.cols.serial",
          "the scan over a middle axis runs from the last k to the first (a suffix scan)",
          ops="Cumsum,CumProd,CumMax", dtypes="f32", tags=("strided-axis",), kernel="cum",
          edits=(_within(rf"{_SCAN}_cols", "for k in range(K):\n            base = (o * K + k)",
                         "for k in range(K - 1, -1, -1):\n            base = (o * K + k)"),)),
    Fault("scan-cols-par-exclusive", NB, "exclusive/inclusive confusion",
          "numba-cpu:scan.cols.par",
          "the parallel exclusive column scan stores each running value after the add",
          ops="Cumsum,CumProd,CumMax", tags=("exclusive",) + _LOWERED, kernel="cum",
          edits=(_within(rf"{_SCAN}_cols_par",
                         "os[i] = acc[i]\n                    acc[i] = _c(acc[i], xs[i])",
                         "acc[i] = _c(acc[i], xs[i])\n                    os[i] = acc[i]"),)),
    # ── Softmax (numba-cpu) ───────────────────────────────────────────────
    Fault("softmax-rows-par-no-max", NB, "max subtraction missing (overflow)",
          "numba-cpu:softmax.rows.par",
          "the parallel row softmax exponentiates x instead of x - max(x)",
          ops="Softmax", tags=_LOWERED, kernel="softmax_",
          edits=(_within(rf"{_SOFTMAX}_rows_par", "_exp_row(orow, xr, CT(m))",
                         "_exp_row(orow, xr, CT(0.0))"),)),
    Fault("softmax-cols-stride", NB, "wrong axis stride", "numba-cpu:softmax.cols.serial",
          "the exp pass of a middle-axis softmax steps along the axis by 1, not by inner",
          ops="Softmax", dtypes="f32", kernel="softmax_",
          edits=(_within(rf"{_SOFTMAX}_cols",
                         "xs = x[(o * K + k) * inner + i0:(o * K + k) * inner + i0 + w]\n"
                         "            os = ",
                         "xs = x[o * K * inner + k + i0:o * K * inner + k + i0 + w]\n"
                         "            os = "),)),
    Fault("softmax-cols-par-nan", NB, "dropped NaN propagation", "numba-cpu:softmax.cols.par",
          "the parallel middle-axis softmax no longer flags NaN in its max pass (a column "
          "holding NaN must be all NaN)",
          ops="Softmax", tags=("nan",) + _LOWERED, kernel="softmax_",
          edits=(_within(rf"{_SOFTMAX}_cols_par", "m[i] = np.fmax(m[i], v if v == v else INF)",
                         "m[i] = np.fmax(m[i], v)"),)),
    # ── normalizations (numba-cpu) ────────────────────────────────────────
    Fault("norm-blocks-par-row", NB, "task range off-by-one", "numba-cpu:norm.blocks.par",
          "each task of the parallel block normalization stops one row short of its range",
          ops="LayerNorm,RmsNorm,GroupNorm", dtypes="f32", tags=_LOWERED, kernel="norm",
          edits=(_within("norm_blocks_par", "(t + 1) * rows // ntask):",
                         "(t + 1) * rows // ntask - 1):"),)),
    Fault("norm-cols-unbiased-var", NB, "unbiased variance", "numba-cpu:norm.cols.serial",
          "the middle-axis normalization divides the squared deviations by C - 1, not C",
          ops="LayerNorm2d", dtypes="f32", limit=6, kernel="norm",
          edits=(_within("norm_cols", "np.sqrt(rstd[i] / C + eps)",
                         "np.sqrt(rstd[i] / (C - 1) + eps)"),)),
    Fault("norm-cols-par-outer", NB, "wrong outer stride", "numba-cpu:norm.cols.par",
          "the parallel middle-axis normalization steps between outer blocks by inner, "
          "not C·inner",
          ops="LayerNorm2d,LayerNorm", dtypes="f32", tags=_LOWERED, kernel="norm",
          edits=(_within("norm_cols_par", "base0 = o * C * inner + i0",
                         "base0 = o * inner + i0"),)),
    Fault("batchnorm-mean-var-swap", NB, "running mean and variance swapped",
          "numba-cpu:batchnorm.serial",
          "BatchNormInference scales by 1/sqrt(running_mean + eps) and shifts by running_var",
          ops="BatchNormInference", dtypes="f32", kernel="norm",
          edits=(_within("batchnorm", "np.float64(v[c]) + eps)\n        sh[c] = m[c]",
                         "np.float64(m[c]) + eps)\n        sh[c] = v[c]"),)),
    Fault("batchnorm-par-eps-outside", NB, "eps placement", "numba-cpu:batchnorm.par",
          "the parallel BatchNormInference adds eps after the square root",
          ops="BatchNormInference", dtypes="f32", tags=_LOWERED, kernel="norm",
          edits=(_within("batchnorm_par", "g[c] / np.sqrt(np.float64(v[c]) + eps)",
                         "g[c] / (np.sqrt(np.float64(v[c])) + eps)"),)),
    # ── Reduce over a middle axis, in parallel (numba-cpu) ────────────────
    Fault("reduce-cols-par-partial", NB, "dropped partial column block",
          "numba-cpu:reduce.cols.par",
          "the parallel column reduction rounds its tile count down: a partial last tile "
          "of columns is never reduced",
          ops="Reduce", dtypes="f32", tags=("power",) + _LOWERED, kernel="reduce_",
          edits=(_within(r"reduce_\w+_cols_par", "nb = (inner + ib - 1) // ib",
                         "nb = inner // ib"),)),
    # ── elementwise read modes (numba-cpu) ────────────────────────────────
    Fault("ew-mod-read-shift", NB, "suffix-modulus read off by one", "numba-cpu:ew.read.mod",
          "a suffix-broadcast operand is read at (i + 1) % m instead of i % m",
          ops="Binary", dtypes="f32", tags=("broadcast",), kernel="ew_",
          edits=(("re:\\[i % (m\\d+)\\]", "[(i + 1) % \\1]"),)),
    Fault("ew-mod-row-start", NB, "suffix-modulus read off by one",
          "numba-cpu:ew.read.mod",
          "the row kernel reads a suffix-broadcast operand's next row (row offset + w)",
          ops="Binary", dtypes="f32", tags=("power", "mod-rows"), kernel="ew_",
          edits=(("re:(b\\d+) = i0 % (m\\d+)", "\\1 = (i0 + w) % \\2"),)),
    Fault("ew-scalar-wrong-operand", NB, "scalar read of the wrong element",
          "numba-cpu:ew.read.scalar",
          "a one-element operand after the first is read as element 0 of operand 0",
          ops="Binary", dtypes="f32", tags=("0-d",), kernel="ew_",
          edits=(("re:(\n        v[1-9]\\d*) = x[1-9]\\d*\\[0\\]\n", "\\1 = x0[0]\n"),)),
    Fault("ew-up2-round-half-up", NB, "prologue coordinate rounding", "numba-cpu:ew.read.up2",
          "the ResizeNearest2x prologue reads source coordinate (y + 1) // 2, not y // 2",
          ops="ElementwiseRegion", tags=("prologue",),
          patches=(("rlx_ref.backends.numba_cpu.lower_elementwise:_upsample2x",
                    up2_round_half_up),)),
)
