"""Planted faults in numba-cpu's indexing, Concat/Trilu, TopK, Rope and loop kernels.

Serial variants mostly carry a fault of the shared code they run (a row stride, an axis
order, a diagonal, a rotation sign) selected on the default cases, which run serially;
parallel variants carry one of their own prange code (a work split or loop bound),
selected on the ``lowered-thresholds`` copies that reach them.
"""
from __future__ import annotations

from ..faults import Fault
from ._patches import MOVE_MEMO

NB = "numba-cpu"
LOW = ("lowered-thresholds",)
_INDEX = "rlx_ref.backends.numba_cpu._index_kernels:_KERNEL"
_DECODE = "rlx_ref.backends.numba_cpu._index_decode:_KERNEL"


def positive_predicate(original):
    """A loop predicate counts as true only when positive (negative and NaN end the loop)."""
    def truthy(pred):
        return bool(pred.reshape(-1)[0] > 0)
    return truthy


FAULTS = (
    # ── Concat, Trilu (movement kernels) ───────────────────────────────────
    Fault("concat-row-stride", NB, "stride error", "numba-cpu:concat.serial",
          "Concat puts each input row at r·n (the input's row length) instead of r times "
          "the output's row length",
          ops="Concat", kernel="move", resets=((MOVE_MEMO, None),),
          edits=(("        out[r * dst_stride + dst_off:r * dst_stride + dst_off + n] = ",
                  "        out[r * n + dst_off:r * n + dst_off + n] = "),)),
    Fault("concat-par-chunk-end", NB, "chunk off-by-one", "numba-cpu:concat.par",
          "the parallel Concat ends each row's last chunk one element early",
          ops="Concat", tags=LOW, kernel="move", resets=((MOVE_MEMO, None),),
          edits=(("        j1 = min(j0 + chunk, n)\n        o = r * dst_stride",
                  "        j1 = min(j0 + chunk, n - 1)\n        o = r * dst_stride"),)),
    Fault("trilu-upper-diagonal", NB, "diagonal off-by-one", "numba-cpu:trilu.serial",
          "upper Trilu zeroes its diagonal too (keeps j - i > diagonal, not >=)",
          ops="Trilu", kernel="move", resets=((MOVE_MEMO, None),),
          edits=(("cut = min(max(i + diag + (0 if upper else 1), 0), cols)",
                  "cut = min(max(i + diag + 1, 0), cols)"),)),
    Fault("trilu-par-one-matrix", NB, "batch bound", "numba-cpu:trilu.par",
          "the parallel Trilu loops over the rows of one matrix, not of the whole batch",
          ops="Trilu", tags=LOW, kernel="move", resets=((MOVE_MEMO, None),),
          edits=(("    for r_ in prange(nrows):\n", "    for r_ in prange(rows):\n"),)),
    # ── gathers ────────────────────────────────────────────────────────────
    Fault("gather-outer-stride", NB, "stride error", "numba-cpu:gather.rows.serial",
          "Gather steps through the outer axis by the index count, not the axis length",
          ops="Gather", kernel="take_rows", resets=((_INDEX, None),),
          edits=(("x, (w // k * n_axis + idx[w % k]) * inner, inner)",
                  "x, (w // k * k + idx[w % k]) * inner, inner)"),)),
    Fault("index-past-end-accepted", NB, "out-of-range index not raised",
          "numba-cpu:gather.rows.serial",
          "the index check accepts an index equal to the axis size (> instead of >=)",
          ops="Gather", tags=("error-case",), kernel="decode_float", resets=((_DECODE, None),),
          edits=(("        if f >= n or f < (-n if neg_ok else 0):\n",
                  "        if f > n or f < (-n if neg_ok else 0):\n"),
                 ("        if i >= n or i < (-n if neg_ok else 0):\n",
                  "        if i > n or i < (-n if neg_ok else 0):\n"))),
    Fault("gather-par-last-item", NB, "tail off-by-one", "numba-cpu:gather.rows.par",
          "the parallel Gather skips its last work item",
          ops="Gather", tags=LOW, kernel="take_rows", resets=((_INDEX, None),),
          edits=(("    for t_ in prange(outer * k * npc):\n",
                  "    for t_ in prange(outer * k * npc - 1):\n"),)),
    Fault("gather-piece-offset", NB, "piece offset error", "numba-cpu:gather.pieces",
          "every piece of a Gather row cut in pieces reads from the start of its source row",
          ops="Gather", tags=LOW, kernel="take_rows", resets=((_INDEX, None),),
          edits=(("_copy(out, w * inner + j0, x, src + j0, min(piece, inner - j0))",
                  "_copy(out, w * inner + j0, x, src, min(piece, inner - j0))"),)),
    Fault("gather-nd-batch-offset", NB, "batch offset dropped", "numba-cpu:gather.nd.serial",
          "GatherNd with batch_dims reads every index tuple from batch 0",
          ops="GatherNd", tags=("batch",), kernel="take_rows", resets=((_INDEX, None),),
          edits=(("    off = q // per_batch * batch_stride\n", "    off = 0\n"),)),
    Fault("gather-nd-par-last-item", NB, "tail off-by-one", "numba-cpu:gather.nd.par",
          "the parallel GatherNd skips its last work item",
          ops="GatherNd", tags=LOW, kernel="take_rows", resets=((_INDEX, None),),
          edits=(("    for t_ in prange(idx.size // kk * npc):\n",
                  "    for t_ in prange(idx.size // kk * npc - 1):\n"),)),
    Fault("gather-elements-axis-order", NB, "axis order error",
          "numba-cpu:gather.elements.serial",
          "GatherElements decodes each output position from its first axis, not its last",
          ops="GatherElements", kernel="take_rows", resets=((_INDEX, None),),
          edits=(("    for ax in range(idims.size - 1, -1, -1):\n",
                  "    for ax in range(idims.size):\n"),)),
    Fault("index-negative-no-wrap", NB, "negative-index wrap missing",
          "numba-cpu:gather.elements.serial",
          "a negative index is passed on as is instead of counting from the end of its axis",
          ops="GatherElements", tags=("negative-index",), kernel="decode_float",
          resets=((_DECODE, None),),
          edits=(("            out[p] = i + n if i < 0 else i\n", "            out[p] = i\n"),)),
    Fault("gather-elements-par-tail", NB, "tail off-by-one", "numba-cpu:gather.elements.par",
          "the parallel GatherElements leaves the last output element unwritten",
          ops="GatherElements", tags=LOW, kernel="take_rows", resets=((_INDEX, None),),
          edits=(("    for p_ in prange(out.size):\n", "    for p_ in prange(out.size - 1):\n"),)),
    # ── scatters ───────────────────────────────────────────────────────────
    Fault("scatter-write-not-add", NB, "duplicate-index accumulation lost",
          "numba-cpu:scatter.serial",
          "the serial scatter writes each update instead of combining it, so of duplicate "
          "indices only the last update survives",
          ops="ScatterAdd", kernel="take_rows", resets=((_INDEX, None),),
          edits=(("        for j in range(inner):\n"
                  "            out[off + j] = _combine(out[off + j], upd[u * inner + j], red)\n",
                  "        for j in range(inner):\n"
                  "            out[off + j] = upd[u * inner + j]\n"),)),
    Fault("scatter-par-chunk-end", NB, "chunk off-by-one", "numba-cpu:scatter.par",
          "the parallel scatter ends each chunk of the trailing slice one element early",
          ops="ScatterAdd,ScatterNd", tags=LOW, kernel="take_rows", resets=((_INDEX, None),),
          edits=(("        j1 = min(j0 + chunk, inner)\n",
                  "        j1 = min(j0 + chunk, inner - 1)\n"),)),
    # ── TopK ───────────────────────────────────────────────────────────────
    Fault("topk-buffer-tie", NB, "tie order", "numba-cpu:topk.buffer",
          "the candidate buffer moves a value past equal ones, so ties keep the later index",
          ops="TopK", tags=("ties",), kernel="select",
          edits=(("                while p > 0 and _above(v, vals[p - 1]):\n",
                  "                while p > 0 and not _above(vals[p - 1], v):\n"),)),
    Fault("topk-sort-direction", NB, "sort direction", "numba-cpu:topk.sort",
          "the merge sort of large k takes the smaller value first (ascending order)",
          ops="TopK", tags=("variants",), kernel="select",
          edits=(("                if _above(xr[src[j]], xr[src[i]]):\n",
                  "                if _above(xr[src[i]], xr[src[j]]):\n"),)),
    Fault("topk-sort-unstable", NB, "tie order", "numba-cpu:topk.sort",
          "the merge sort of large k takes the right run's value on ties (not stable)",
          ops="TopK", tags=("power", "sort"), kernel="select",
          edits=(("                if _above(xr[src[j]], xr[src[i]]):\n",
                  "                if not _above(xr[src[i]], xr[src[j]]):\n"),)),
    Fault("topk-row-stride", NB, "stride error", "numba-cpu:topk.serial",
          "the serial TopK steps through rows by k instead of the row length",
          ops="TopK", kernel="select",
          edits=(("    for o in range(outer):\n        xr = x[o * n:o * n + n]\n",
                  "    for o in range(outer):\n        xr = x[o * k:o * k + n]\n"),)),
    Fault("topk-par-last-row", NB, "tail off-by-one", "numba-cpu:topk.par",
          "the parallel TopK skips the last row",
          ops="TopK", tags=LOW, kernel="select",
          edits=(("    for o in prange(outer):\n        xr = x[o * n:o * n + n]\n",
                  "    for o in prange(outer - 1):\n        xr = x[o * n:o * n + n]\n"),)),
    # ── Rope ───────────────────────────────────────────────────────────────
    Fault("rope-rotation-sign", NB, "half-rotation sign", "numba-cpu:rope.serial",
          "the second lane of each rotated pair gets x2·cos - x1·sin (the sign of the "
          "inverse rotation)",
          ops="Rope", kernel="rope",
          edits=(("            orow[i2] = x2 * c + x1 * s\n",
                  "            orow[i2] = x2 * c - x1 * s\n"),)),
    Fault("rope-par-one-batch", NB, "batch bound", "numba-cpu:rope.par",
          "the parallel Rope loops over the positions of one batch row, not of every batch",
          ops="Rope", tags=LOW, kernel="rope",
          edits=(("    for t in prange(x3.shape[0] * x3.shape[1]):\n",
                  "    for t in prange(x3.shape[1]):\n"),)),
    # ── loops ──────────────────────────────────────────────────────────────
    Fault("scan-driver-short", NB, "iteration count off-by-one", "numba-cpu:loop.compiled",
          "the compiled Scan loop runs one iteration fewer than the length",
          ops="Scan", kernel="scan_loop",
          edits=(("re:\n    for t in range\\((\\d+)\\):\n", "\n    for t in range(\\1 - 1):\n"),)),
    Fault("while-driver-cap", NB, "iteration count off-by-one", "numba-cpu:loop.compiled",
          "the compiled While loop runs max_iterations + 1 body steps",
          ops="While", tags=("max-iterations",), kernel="while_loop",
          edits=(("    while cap < 0 or steps < cap:\n",
                  "    while cap < 0 or steps <= cap:\n"),)),
    Fault("while-host-predicate", NB, "predicate truthiness", "numba-cpu:loop.host",
          "the host-driven While stops on a negative (or NaN) predicate, which is true",
          ops="While", tags=("power", "signed-predicate"),
          patches=(("rlx_ref.backends.numba_cpu.lower_control:_truthy", positive_predicate),)),
)
