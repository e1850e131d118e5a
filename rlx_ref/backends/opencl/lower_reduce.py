"""OpenCL lowerings of the reduction family: Reduce, Softmax, Cumsum, CumProd, CumMax,
ArgMax, ArgMin and TopK.

Each node reads its input as ``[outer, K, inner]`` (``_reduce_c.reduce_layout``); reduced
axes that are not adjacent are read through strided offsets, never copied. Rows
(``inner == 1``) go to a contiguous-run kernel on CPUs and a work-group tree on GPUs; few
long rows are cut into segments whose partials a second kernel combines in order. Kernel
sources depend on the dtypes, the op and the device style only; sizes are arguments, so
one build serves every shape.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.dtype import DType
from . import _reduce_c as rc
from . import _reduce_fold, _reduce_scan, _reduce_select, _reduce_softmax, memory
from ._reduce_c import (
    FLOATS,
    INTS,
    column_block,
    cpu_local,
    item_local,
    kernel,
    launcher,
    reduce_layout,
    sequence,
    split3,
    wg_size,
)
from .launch import scalar
from .lowering import Step, accumulates, lowers
from .variant_table import th, use, use_dev

NARROW = (DType.F32, DType.F16, DType.BF16)    # floats an f64 accumulator is a promise for

# a row is cut into segments when the rows alone cannot keep the device busy
# its least length: reduce.min_segment_cpu / reduce.min_segment_gpu (variant_table)


def segments(device, rows: int, k: int) -> tuple[int, int]:
    """(chunk, nchunk): how each of ``rows`` rows of length ``k`` is cut for parallelism."""
    # GPUs: a few groups per compute unit; CPUs: enough runs to balance the cores
    gpu = rc.gpu_style(device)
    busy = max(device.compute_units, 1) * (4 if gpu else 32)
    least = th("reduce.min_segment_gpu" if gpu else "reduce.min_segment_cpu")
    if rows >= busy or k < 2 * least:
        return k, 1
    nchunk = min(-(-busy // max(rows, 1)), k // least)
    chunk = -(-k // nchunk)
    chunk = -(-chunk // 32) * 32            # whole vector blocks in every segment but the last
    return chunk, -(-k // chunk)


def _bind_rows(ctx, defs: dict, rows: int, k: int):
    """A binder for a row fold over ``rows`` rows of ``k`` (segments + combine if needed)."""
    dev, q = ctx.device, ctx.queue
    gpu = rc.gpu_style(dev)
    wg = wg_size(dev)
    ref = kernel(ctx, _reduce_fold.source("rows_gpu" if gpu else "rows_cpu", defs, wg))
    use_dev("reduce.rows", gpu)
    chunk, nchunk = segments(dev, rows, k)
    if nchunk > 1:
        use("reduce.rows.segmented")
    comb = kernel(ctx, _reduce_fold.source("combine", defs)) if nchunk > 1 else None
    nseg = rows * nchunk
    acc_np = _reduce_fold.ACC_NP[defs["ACC"]]

    def bind(out, x):
        part = memory.empty(ctx.program.context, (nseg,), acc_np) if comb else out
        args = [out.buf, x.buf, part.buf, scalar(nseg), scalar(k), scalar(chunk),
                scalar(nchunk), scalar(k), scalar(0 if comb else 1, "int")]
        if gpu:
            first = launcher(ref, q, nseg * wg, wg, args)
        else:
            first = launcher(ref, q, nseg, cpu_local(dev, nseg), args)
        if comb is None:
            return first
        second = launcher(comb, q, rows, cpu_local(dev, rows),
                          [out.buf, part.buf, scalar(rows), scalar(nchunk), scalar(k)])
        return sequence([first, second], keep=(part,))
    return bind


def _bind_cols(ctx, defs: dict, outer: int, k: int, inner: int):
    dev, q = ctx.device, ctx.queue
    gpu = rc.gpu_style(dev)
    use_dev("reduce.cols", gpu)
    ref = kernel(ctx, _reduce_fold.source("cols_gpu" if gpu else "cols_cpu", defs))
    cb = 1 if gpu else column_block(defs)
    items = outer * -(-inner // cb)
    local = item_local(dev, items)

    def bind(out, x):
        return launcher(ref, q, items, local, [out.buf, x.buf, scalar(outer), scalar(k),
                                               scalar(inner), scalar(k)])
    return bind


def _bind_strided(ctx, defs: dict, runs: list, nout: int):
    use("reduce.strided")
    ref = kernel(ctx, _reduce_fold.source("strided", defs))
    kept = [r for r in runs if not r[2]]
    red = [r for r in runs if r[2]]
    geo = np.array([r[0] for r in kept] + [r[1] for r in kept] + [r[0] for r in red] +
                   [r[1] for r in red], np.int64)
    count = math.prod(r[0] for r in red)
    geo_dev = memory.upload(ctx.program.context, ctx.queue, geo)

    def bind(out, x):
        run = launcher(ref, ctx.queue, nout, item_local(ctx.device, nout), [
            out.buf, x.buf, scalar(nout), geo_dev.buf, scalar(len(kept), "int"),
            scalar(len(red), "int"), scalar(count)])
        return sequence([run], keep=(geo_dev,))
    return bind


@accumulates("Reduce", NARROW, "f64", ops=("Sum", "Mean"), when="cpu_fp64",
             reason="CPU-style float sums run in double where the device has fp64")
@lowers("Reduce", FLOATS + INTS)
def lower_reduce(node, ins, ctx) -> Step:
    a, x, dev = node.attrs, ins[0], ctx.device
    wide = bool(dev.fp64) and not rc.gpu_style(dev)
    defs = _reduce_fold.fold_defs(a.op, x.dtype, node.shape.dtype, dev, wide)
    nout = math.prod(node.shape.dims)
    if math.prod(x.dims) == 0:              # empty input: every output is the identity
        layout, runs = (nout, 0, 1), []
    else:
        layout, runs = reduce_layout(x.dims, a.axes)
    if layout is None:
        return Step(_bind_strided(ctx, defs, runs, nout), note="strided axes")
    outer, k, inner = layout
    if inner == 1:
        return Step(_bind_rows(ctx, defs, outer, k))
    return Step(_bind_cols(ctx, defs, outer, k, inner))


@lowers("Softmax", FLOATS)
def lower_softmax(node, ins, ctx) -> Step:
    dims, dt = ins[0].dims, ins[0].dtype
    ax = node.attrs.axis % len(dims)
    outer, k, inner = split3(dims, ax, ax + 1)
    dev, q = ctx.device, ctx.queue
    gpu = rc.gpu_style(dev)
    if inner > 1:
        blocks = not gpu
        use_dev("softmax.cols", gpu)
        ref = kernel(ctx, _reduce_softmax.source("cols_cpu" if blocks else "cols", dt, dev))
        vw = rc.vec_width(dev, rc.compute_type(dt))
        cb = vw * _reduce_softmax.COL_VECTORS if blocks else 1
        items = outer * -(-inner // cb)
        local = item_local(dev, items)
        return Step(lambda out, x: launcher(ref, q, items, local, [
            out.buf, x.buf, scalar(outer), scalar(k), scalar(inner)]))
    wg = wg_size(dev)
    use_dev("softmax.rows", gpu)
    ref = kernel(ctx, _reduce_softmax.source("rows_gpu" if gpu else "rows_cpu", dt, dev, wg))
    items, local = (outer * wg, wg) if gpu else (outer, cpu_local(dev, outer))
    return Step(lambda out, x: launcher(ref, q, items, local, [
        out.buf, x.buf, scalar(outer), scalar(k)]))


# ── Cumsum, CumProd, CumMax ───────────────────────────────────────────────

def lower_scan(node, ins, ctx) -> Step:
    dims, dt = ins[0].dims, ins[0].dtype
    ax = node.attrs.axis % len(dims)
    outer, k, inner = split3(dims, ax, ax + 1)
    dev, q = ctx.device, ctx.queue
    gpu = rc.gpu_style(dev)
    defs = _reduce_scan.scan_defs(node.kind, dt, dev.fp64 and not gpu, dev)
    excl = scalar(int(bool(node.attrs.exclusive)), "int")
    if gpu and inner == 1 and node.kind != "CumProd":      # products stay in order
        wg = wg_size(dev)
        use("scan.rows_gpu")
        ref = kernel(ctx, _reduce_scan.source("rows_gpu", defs, wg))
        return Step(lambda out, x: launcher(ref, q, outer * wg, wg, [
            out.buf, x.buf, scalar(outer), scalar(k), excl]))
    chunk, nchunk = segments(dev, outer, k) if inner == 1 else (k, 1)
    if nchunk == 1:
        blocks = not gpu and inner > 1
        use("scan.cols_cpu" if blocks else "scan.lines")
        ref = kernel(ctx, _reduce_scan.source("cols_cpu" if blocks else "lines", defs))
        cb = column_block(defs) if blocks else 1
        lines = outer * -(-inner // cb)
        local = item_local(dev, lines)
        return Step(lambda out, x: launcher(ref, q, lines, local, [
            out.buf, x.buf, scalar(outer), scalar(k), scalar(inner), excl]))
    use("scan.segmented")
    total, carry, rescan = (kernel(ctx, _reduce_scan.source(n, defs))
                            for n in ("seg_total", "carry", "seg_scan"))
    nseg = outer * nchunk
    acc_np = _reduce_fold.ACC_NP[defs["ACC"]]

    def bind(out, x):
        part = memory.empty(ctx.program.context, (nseg,), acc_np)
        seg = [scalar(nseg), scalar(k), scalar(chunk), scalar(nchunk)]
        return sequence([
            launcher(total, q, nseg, 1, [part.buf, x.buf] + seg),
            launcher(carry, q, outer, 1, [part.buf, scalar(outer), scalar(nchunk)]),
            launcher(rescan, q, nseg, 1, [out.buf, x.buf, part.buf] + seg + [excl])],
            keep=(part,))
    return Step(bind, note=f"{nchunk} segments per row")


for _kind in ("Cumsum", "CumProd", "CumMax"):
    lowers(_kind, FLOATS + INTS)(lower_scan)
accumulates("Cumsum", NARROW, "f64", when="cpu_fp64",
            reason="CPU-style scans run in double where the device has fp64")(lower_scan)


# ── ArgMax, ArgMin, TopK ──────────────────────────────────────────────────

def lower_arg(node, ins, ctx) -> Step:
    dims = ins[0].dims
    ax = node.attrs.axis
    outer, k, inner = split3(dims, ax, ax + 1)
    if k == 0 and outer * inner > 0:
        raise ValueError(f"{node.kind} over an empty axis ({ax} of shape {list(dims)}) has "
                         f"no answer (at %{node.id})")
    defs = _reduce_select.select_defs(ins[0].dtype, node.shape.dtype, ctx.device,
                                      node.kind == "ArgMax")
    dev, q = ctx.device, ctx.queue
    gpu = rc.gpu_style(dev)
    if gpu and inner == 1:
        wg = wg_size(dev)
        use("arg.rows_gpu")
        ref = kernel(ctx, _reduce_select.source("rows_gpu", defs, wg))
        return Step(lambda out, x: launcher(ref, q, outer * wg, wg, [
            out.buf, x.buf, scalar(outer), scalar(k)]))
    if inner == 1 and k < 2 ** 31:          # lane indices are int for f32 inputs
        use("arg.rows_cpu")
        ref = kernel(ctx, _reduce_select.source("rows_cpu", defs))
        return Step(lambda out, x: launcher(ref, q, outer, cpu_local(dev, outer), [
            out.buf, x.buf, scalar(outer), scalar(k)]))
    use("arg.lines")
    ref = kernel(ctx, _reduce_select.source("lines", defs))
    lines = outer * inner
    local = item_local(dev, lines)
    return Step(lambda out, x: launcher(ref, q, lines, local, [
        out.buf, x.buf, scalar(outer), scalar(k), scalar(inner)]))


for _kind in ("ArgMax", "ArgMin"):
    lowers(_kind, FLOATS + INTS)(lower_arg)


@lowers("TopK", FLOATS + INTS)
def lower_topk(node, ins, ctx) -> Step:
    dims = ins[0].dims
    n, k = int(dims[-1]), node.attrs.k
    rows = math.prod(dims[:-1])
    if k > n:
        raise ValueError(f"TopK k={k} exceeds the last axis size {n} (at %{node.id})")
    defs = _reduce_select.select_defs(ins[0].dtype, node.shape.dtype, ctx.device)
    ref = kernel(ctx, _reduce_select.source("topk", defs, k=max(k, 1)))
    scratch = k > _reduce_select.PRIVATE_K
    use("topk.scratch" if scratch else "topk.private")
    ct_np = _reduce_fold.ACC_NP[defs["CT"]]
    dev, q = ctx.device, ctx.queue

    def bind(out, x):
        if k == 0 or rows == 0:
            return lambda: None
        c = ctx.program.context
        vals = memory.empty(c, (rows * k if scratch else 1,), ct_np)
        idx = memory.empty(c, (rows * k if scratch else 1,), np.int64)
        run = launcher(ref, q, rows, item_local(dev, rows),
                       [out.buf, x.buf, scalar(rows), scalar(n), vals.buf, idx.buf])
        return sequence([run], keep=(vals, idx))
    return Step(bind)
