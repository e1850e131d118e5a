"""Lowering of the movement kinds: device copies and one index-map copy kernel.

Reshape is one buffer-to-buffer copy (outputs own their buffers); Narrow and Concat are
rectangular copies (rows of a contiguous block, no kernel). Transpose, Slice, Expand,
Reverse, Tile, ResizeNearest2x and Pad build per-axis source maps (affine or a table,
``-1`` = Pad's constant) for the index-map kernel of ``_move_src``; Trilu has its own
kernel. Elements move as raw bits keyed by size, so every dtype runs natively: f16/bf16,
bool and complex included.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.dtype import DType
from ...ops._movement_fill import _mode_name, pad_source
from ...ops.elementwise import cast_array
from . import _move_tile, memory
from ._move_src import (
    AxisMap,
    map_kernel,
    pack,
    rows_inner,
    simplify,
    split,
    strides_of,
    trilu_kernel,
)
from .launch import bind_1d, bind_nd, scalar
from .lowering import Step, lowers
from .variant_table import use

MOVE_DTYPES = tuple(DType)


def _upload(ctx, host: np.ndarray):
    return memory.upload(ctx.program.context, ctx.queue, np.ascontiguousarray(host))


def map_step(node, ctx, maps: list, base: int = 0, fill=None) -> Step:
    """Copy through ``maps`` (one per output axis) from source offset ``base``."""
    size = node.shape.dtype.size_bytes
    maps = simplify(maps)
    if _move_tile.fits(maps, fill):
        return _tile_step(node, ctx, maps, base)
    use("move.map")
    params, tab = pack(maps)
    rows, inner = rows_inner(maps)
    chunk, nchunks = split(rows, inner, ctx.device)
    name, source = map_kernel(size)
    ref = ctx.kernel(source, name)
    ax_buf, tab_buf = _upload(ctx, params), _upload(ctx, tab)
    if fill is None:
        fill = np.zeros(1, node.shape.dtype.np)
    fill_buf = _upload(ctx, np.asarray(fill, node.shape.dtype.np).reshape(1))
    n = rows * nchunks if math.prod(node.shape.dims) else 0

    def bind(out, x):
        return bind_1d(ref, ctx.device, ctx.queue, n, [
            out.buf, x.buf, ax_buf.buf, tab_buf.buf, fill_buf.buf, scalar(len(maps), "int"),
            scalar(base), scalar(rows), scalar(inner), scalar(chunk), scalar(nchunks)])
    return Step(bind)


def _tile_step(node, ctx, maps: list, base: int) -> Step:
    """A transposing map: tiles read along the input, written along the output."""
    name, source, ts, gpu = _move_tile.tile_kernel(node.shape.dtype.size_bytes, ctx.device)
    use("move.tiled_gpu" if gpu else "move.tiled_cpu")
    ref = ctx.kernel(source, name)
    params, tab = pack(maps)
    ax_buf, tab_buf = _upload(ctx, params), _upload(ctx, tab)
    outer = math.prod(m.dim for m in maps[:-2])
    rows, cols = maps[-2].dim, maps[-1].dim
    tr, tc = -(-rows // ts), -(-cols // ts)

    def bind(out, x):
        args = [out.buf, x.buf, ax_buf.buf, tab_buf.buf, scalar(len(maps), "int"),
                scalar(base), scalar(outer), scalar(rows), scalar(cols),
                scalar(maps[-1].stride), scalar(tr), scalar(tc)]
        if gpu:
            return bind_nd(ref, ctx.queue, (tr * ts, tc * ts, outer), (ts, ts, 1), args)
        return bind_1d(ref, ctx.device, ctx.queue, outer * tr * tc, args)
    return Step(bind)


def rect_copy(queue, dst, src, rows: int, width: int, src_pitch: int, dst_pitch: int,
              src_off: int = 0, dst_off: int = 0):
    """A launcher copying ``rows`` runs of ``width`` bytes (a no-op when empty)."""
    import pyopencl as cl

    if rows == 0 or width == 0:
        return None
    if rows == 1 or (width == src_pitch == dst_pitch):
        def plain():
            cl.enqueue_copy(queue, dst, src, byte_count=rows * width, src_offset=src_off,
                            dst_offset=dst_off)
        return plain

    def rect():
        cl.enqueue_copy(queue, dst, src, src_origin=(src_off, 0, 0),
                        dst_origin=(dst_off, 0, 0), region=(width, rows, 1),
                        src_pitches=(src_pitch, 0), dst_pitches=(dst_pitch, 0))
    return rect


def _sequence(launchers: list):
    todo = [f for f in launchers if f is not None]

    def launch():
        for f in todo:
            f()
    return launch


# ── copies without a kernel ────────────────────────────────────────────────

@lowers("Reshape", MOVE_DTYPES)
def _reshape(node, ins, ctx):
    def bind(out, x):
        return _sequence([rect_copy(ctx.queue, out.buf, x.buf, 1, out.nbytes, 0, 0)])
    return Step(bind)


@lowers("Narrow", MOVE_DTYPES)
def _narrow(node, ins, ctx):
    a, dims = node.attrs, tuple(ins[0].dims)
    es = node.shape.dtype.size_bytes
    inner = math.prod(dims[a.axis + 1:]) * es
    rows = math.prod(dims[:a.axis])

    def bind(out, x):
        return _sequence([rect_copy(ctx.queue, out.buf, x.buf, rows, a.len * inner,
                                    dims[a.axis] * inner, a.len * inner,
                                    src_off=a.start * inner)])
    return Step(bind)


@lowers("Concat", MOVE_DTYPES)
def _concat(node, ins, ctx):
    ax, out_dims = node.attrs.axis, tuple(node.shape.dims)
    es = node.shape.dtype.size_bytes
    rows = math.prod(out_dims[:ax])
    inner = math.prod(out_dims[ax + 1:]) * es
    widths = [s.dims[ax] * inner for s in ins]
    offs = np.cumsum([0] + widths)

    def bind(out, *xs):
        return _sequence([rect_copy(ctx.queue, out.buf, x.buf, rows, w, w, out_dims[ax] * inner,
                                    dst_off=int(off))
                          for x, w, off in zip(xs, widths, offs)])
    return Step(bind)


# ── the index-map kernel ───────────────────────────────────────────────────

@lowers("Transpose", MOVE_DTYPES)
def _transpose(node, ins, ctx):
    dims, st = ins[0].dims, strides_of(ins[0].dims)
    return map_step(node, ctx, [AxisMap(dims[p], st[p]) for p in node.attrs.perm])


@lowers("Slice", MOVE_DTYPES)
def _slice(node, ins, ctx):
    a, st = node.attrs, strides_of(ins[0].dims)
    maps = [AxisMap(d, s * (a.step if ax == a.axis else 1))
            for ax, (d, s) in enumerate(zip(node.shape.dims, st))]
    return map_step(node, ctx, maps, base=a.start * st[a.axis] if a.len else 0)


@lowers("Expand", MOVE_DTYPES)
def _expand(node, ins, ctx):
    out, dims = tuple(node.shape.dims), tuple(ins[0].dims)
    lead = len(out) - len(dims)
    st = [0] * lead + [0 if d == 1 else s for d, s in zip(dims, strides_of(dims))]
    return map_step(node, ctx, [AxisMap(d, s) for d, s in zip(out, st)])


@lowers("Reverse", MOVE_DTYPES)
def _reverse(node, ins, ctx):
    flip, dims, st = set(node.attrs.axes), tuple(ins[0].dims), strides_of(ins[0].dims)
    base = sum((d - 1) * s for ax, (d, s) in enumerate(zip(dims, st)) if ax in flip and d)
    return map_step(node, ctx, [AxisMap(d, -s if ax in flip else s)
                                for ax, (d, s) in enumerate(zip(dims, st))], base)


@lowers("Tile", MOVE_DTYPES)
def _tile(node, ins, ctx):
    dims, st = ins[0].dims, strides_of(ins[0].dims)
    return map_step(node, ctx, [AxisMap(d * r, table=np.arange(d * r) % d * s) if r > 1 else
                                AxisMap(d * r, s)
                                for d, r, s in zip(dims, node.attrs.reps, st)])


@lowers("ResizeNearest2x", MOVE_DTYPES)
def _resize(node, ins, ctx):
    n, c, h, w = ins[0].dims
    st = strides_of(ins[0].dims)
    return map_step(node, ctx, [AxisMap(n, st[0]), AxisMap(c, st[1]),
                                AxisMap(2 * h, table=np.arange(2 * h) // 2 * st[2]),
                                AxisMap(2 * w, table=np.arange(2 * w) // 2 * st[3])])


@lowers("Pad", MOVE_DTYPES)
def _pad(node, ins, ctx):
    a, dims, st = node.attrs, tuple(ins[0].dims), strides_of(ins[0].dims)
    mode = _mode_name(a.mode)
    fill = None
    if mode == "Constant":      # the f32 payload cast like Cast (ints truncate)
        dt = node.shape.dtype
        fill = np.asarray(cast_array(np.float32(a.mode[1]), dt), dt.np)
    maps = []
    for n, (before, after), s in zip(dims, a.pads, st):
        if before == after == 0:
            maps.append(AxisMap(n, s))
            continue
        p = np.arange(-before, n + after)
        if mode == "Constant":
            maps.append(AxisMap(p.size, table=np.where((p >= 0) & (p < n), p * s, -1)))
        else:
            maps.append(AxisMap(p.size, table=pad_source(mode, p, n) * s))
    return map_step(node, ctx, maps, fill=fill)


@lowers("Trilu", MOVE_DTYPES)
def _trilu(node, ins, ctx):
    dims = tuple(node.shape.dims)
    rows, cols = dims[-2:]
    nrows = math.prod(dims[:-1])
    chunk, nchunks = split(nrows, cols, ctx.device)
    name, source = trilu_kernel(node.shape.dtype.size_bytes)
    ref = ctx.kernel(source, name)
    n = nrows * nchunks if cols else 0

    def bind(out, x):
        return bind_1d(ref, ctx.device, ctx.queue, n, [
            out.buf, x.buf, scalar(nrows), scalar(rows), scalar(cols),
            scalar(int(node.attrs.upper), "int"), scalar(node.attrs.diagonal), scalar(chunk),
            scalar(nchunks)])
    return Step(bind)
