"""Lowering of the indexing kinds: Gather, GatherElements, GatherNd and the three scatters.

Kernels (``_index_src``) decode and bounds-check every index where they read it; a bad
index sets the node's code in the error word and the run fails naming the node. When an
output is empty but its indices are not, a check kernel still validates them (as the
oracle does). Gathers copy raw bits, so every dtype runs natively. Scatters start from a
device copy of ``data`` (zeros for ScatterAdd), or its f32 shadow for f16/bf16 (rounded
once at the end, as the oracle), then combine the updates in row-major order.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.dtype import DType
from . import memory
from ._index_src import (
    SIXTEEN,
    check_kernel,
    gather_elements_kernel,
    gather_kernel,
    gather_nd_kernel,
    narrow_kernel,
    scatter_elements_kernel,
    scatter_nd_kernel,
    widen_kernel,
)
from ._move_src import split, strides_of
from .launch import bind_1d, scalar
from .lower_movement import MOVE_DTYPES, rect_copy
from .lowering import Step, lowers

SCATTER_DTYPES = tuple(d for d in DType if not d.is_complex)


def _geo(ctx, values) -> object:
    host = np.array([int(v) for v in values] or [0], np.int64)
    return memory.upload(ctx.program.context, ctx.queue, host)


def _index_dtype(ctx, dt: DType) -> DType:
    if dt is DType.F64 and not ctx.device.fp64:
        raise ValueError(f"at %{ctx.node.id} ({ctx.node.kind}): f64 indices need a device "
                         f"with cl_khr_fp64, {ctx.device.name} has none; pass f32 or "
                         "integer indices")
    return dt


def _err(ctx) -> list:
    return [ctx.errors.array.buf, scalar(ctx.err_code, "int")]


def _checker(node, ctx, idx_shape, sizes, negative_ok: bool):
    """``bind(idx)`` -> a launcher validating every index (for empty outputs), or None."""
    n = math.prod(idx_shape.dims)
    if n == 0 or math.prod(node.shape.dims):
        return None
    name, source = check_kernel(_index_dtype(ctx, idx_shape.dtype), negative_ok)
    ref, geo = ctx.kernel(source, name), _geo(ctx, sizes)

    def bind(idx):
        return bind_1d(ref, ctx.device, ctx.queue, n, [idx.buf, geo.buf,
                                                        scalar(len(sizes), "int"),
                                                        scalar(n)] + _err(ctx))
    return bind


def _then(*launchers, keep=()):
    """One launcher running ``launchers`` in order; ``keep`` holds buffers only they use
    (kernel arguments do not keep a buffer alive)."""
    todo = [f for f in launchers if f is not None]

    def launch():
        for f in todo:
            f()
    launch.keep = keep
    return launch


# ── gathers ────────────────────────────────────────────────────────────────

@lowers("Gather", MOVE_DTYPES)
def _gather(node, ins, ctx):
    table, ax = tuple(ins[0].dims), node.attrs.axis
    outer, n_axis, inner = math.prod(table[:ax]), table[ax], math.prod(table[ax + 1:])
    nk = math.prod(ins[1].dims)
    chunk, nchunks = split(outer * nk, inner, ctx.device)
    name, source = gather_kernel(node.shape.dtype.size_bytes, _index_dtype(ctx, ins[1].dtype))
    ref = ctx.kernel(source, name)
    check = _checker(node, ctx, ins[1], [n_axis], False)
    n = outer * nk * nchunks if math.prod(node.shape.dims) else 0

    def bind(out, x, idx):
        return _then(check and check(idx), bind_1d(ref, ctx.device, ctx.queue, n, [
            out.buf, x.buf, idx.buf, scalar(outer), scalar(nk), scalar(n_axis),
            scalar(inner), scalar(chunk), scalar(nchunks)] + _err(ctx)))
    return Step(bind)


@lowers("GatherElements", MOVE_DTYPES)
def _gather_elements(node, ins, ctx):
    data, idims = tuple(ins[0].dims), tuple(ins[1].dims)
    ax = node.attrs.axis % len(data)
    geo = _geo(ctx, list(idims) + strides_of(data))
    name, source = gather_elements_kernel(node.shape.dtype.size_bytes,
                                          _index_dtype(ctx, ins[1].dtype))
    ref = ctx.kernel(source, name)
    n = math.prod(idims)

    def bind(out, x, idx):
        return bind_1d(ref, ctx.device, ctx.queue, n, [
            out.buf, x.buf, idx.buf, geo.buf, scalar(len(data), "int"), scalar(ax, "int"),
            scalar(n), scalar(data[ax])] + _err(ctx))
    return Step(bind)


@lowers("GatherNd", MOVE_DTYPES)
def _gather_nd(node, ins, ctx):
    data, idims = tuple(ins[0].dims), tuple(ins[1].dims)
    b, k = node.attrs.batch_dims, idims[-1]
    nq = math.prod(idims[:-1])
    per_batch = max(1, math.prod(idims[b:-1]))
    batch_stride = math.prod(data[b:]) if b else 0
    sizes = data[b:b + k]
    geo = _geo(ctx, list(sizes) + strides_of(data)[b:b + k])
    inner = math.prod(data[b + k:])
    chunk, nchunks = split(nq, inner, ctx.device)
    name, source = gather_nd_kernel(node.shape.dtype.size_bytes,
                                    _index_dtype(ctx, ins[1].dtype))
    ref = ctx.kernel(source, name)
    check = _checker(node, ctx, ins[1], sizes, True)
    n = nq * nchunks if math.prod(node.shape.dims) else 0

    def bind(out, x, idx):
        return _then(check and check(idx), bind_1d(ref, ctx.device, ctx.queue, n, [
            out.buf, x.buf, idx.buf, geo.buf, scalar(k, "int"), scalar(nq), scalar(per_batch),
            scalar(batch_stride), scalar(inner), scalar(chunk), scalar(nchunks)] + _err(ctx)))
    return Step(bind)


# ── scatters ───────────────────────────────────────────────────────────────

class _Scatter:
    """Start value → accumulator (the output, or an f32 shadow) → combine → output."""

    def __init__(self, node, ctx, zeros: bool):
        self.node, self.ctx, self.zeros = node, ctx, zeros
        self.dt = node.shape.dtype
        self.n = math.prod(node.shape.dims)
        self.shadow = self.dt in SIXTEEN
        if self.shadow:
            name, source = widen_kernel(self.dt)
            self.widen = ctx.kernel(source, name)
            name, source = narrow_kernel(self.dt)
            self.narrow = ctx.kernel(source, name)

    def bind(self, out, data, combine):
        """``combine(acc)`` -> the launcher of the scatter kernel on ``acc``."""
        import pyopencl as cl

        ctx, q, n = self.ctx, self.ctx.queue, self.n
        if n == 0:
            return None
        acc = memory.empty(ctx.program.context, (n,), np.float32) if self.shadow else out
        if self.zeros:
            def start():
                cl.enqueue_fill_buffer(q, acc.buf, np.uint8(0), 0, acc.nbytes)
        elif self.shadow:
            start = bind_1d(self.widen, ctx.device, q, n, [acc.buf, data.buf, scalar(n)])
        else:
            start = rect_copy(q, out.buf, data.buf, 1, out.nbytes, 0, 0)
        end = (bind_1d(self.narrow, ctx.device, q, n, [out.buf, acc.buf, scalar(n)])
               if self.shadow else None)
        return _then(start, combine(acc), end, keep=(acc,))


def _nd_step(node, ctx, dims, idx_shape, upd_count: int, reduction: str, zeros: bool,
             negative_ok: bool) -> Step:
    """ScatterNd (and ScatterAdd: k = 1, zeros, no negative indices) over ``dims``."""
    k = idx_shape.dims[-1] if idx_shape.rank else 1
    nu = upd_count
    inner = math.prod(dims[k:])
    geo = _geo(ctx, list(dims[:k]) + strides_of(dims)[:k])
    chunk, nchunks = split(1, inner, ctx.device)
    name, source = scatter_nd_kernel(node.shape.dtype, _index_dtype(ctx, idx_shape.dtype),
                                     reduction, negative_ok)
    ref = ctx.kernel(source, name)
    check = _checker(node, ctx, idx_shape, dims[:k], negative_ok)
    sc = _Scatter(node, ctx, zeros)

    def bind(out, data, idx, upd):
        def combine(acc):
            return bind_1d(ref, ctx.device, ctx.queue, nchunks if nu else 0, [
                acc.buf, upd.buf, idx.buf, geo.buf, scalar(k, "int"), scalar(nu),
                scalar(inner), scalar(chunk), scalar(nchunks)] + _err(ctx))
        return _then(check and check(idx), sc.bind(out, data, combine))
    return Step(bind)


@lowers("ScatterAdd", SCATTER_DTYPES)
def _scatter_add(node, ins, ctx):
    idx = ins[1]
    step = _nd_step(node, ctx, tuple(node.shape.dims), idx.with_dims(tuple(idx.dims) + (1,)),
                    idx.dims[0], "Add", zeros=True, negative_ok=False)
    return Step(lambda out, u, i: step.bind(out, None, i, u))


@lowers("ScatterNd", SCATTER_DTYPES)
def _scatter_nd(node, ins, ctx):
    return _nd_step(node, ctx, tuple(ins[0].dims), ins[1], math.prod(ins[1].dims[:-1]),
                    node.attrs.reduction, zeros=False, negative_ok=True)


@lowers("ScatterElements", SCATTER_DTYPES)
def _scatter_elements(node, ins, ctx):
    data, idims = tuple(ins[0].dims), tuple(ins[1].dims)
    ax = node.attrs.axis % len(data)
    geo = _geo(ctx, list(idims) + strides_of(idims) + strides_of(data))
    nlines = math.prod(idims) // idims[ax] if idims[ax] else 0
    name, source = scatter_elements_kernel(node.shape.dtype, _index_dtype(ctx, ins[1].dtype),
                                           node.attrs.reduction)
    ref = ctx.kernel(source, name)
    check = _checker(node, ctx, ins[1], [data[ax]], True)
    sc = _Scatter(node, ctx, zeros=False)

    def bind(out, x, idx, upd):
        def combine(acc):
            return bind_1d(ref, ctx.device, ctx.queue, nlines, [
                acc.buf, upd.buf, idx.buf, geo.buf, scalar(len(data), "int"),
                scalar(ax, "int"), scalar(nlines), scalar(data[ax])] + _err(ctx))
        return _then(check and check(idx), sc.bind(out, x, combine))
    return Step(bind)
