"""Gather, GatherElements and GatherNd as bounds-checked CUDA kernels.

Every output element finds the index it depends on, reads it (an integer, or an
f32-encoded integer) and checks it before touching the data: a NaN or non-integral
index, or one outside the axis (``0..d-1``; ``-d..d-1`` where negatives count from the
end, as GatherElements and GatherNd allow), sets the plan's error word (which the host
turns into an error naming the node) and writes zero instead of reading out of bounds.
``check_index`` renders that test; the scatter kinds use it too.
"""
from __future__ import annotations

import math
import textwrap

import numpy as np

from ...ir.dtype import DType
from .device import DeviceConst, device_dtype, launch_shape
from .ew_render import ERR_INDEX, ERR_NOT_INT
from .geometry import read_expr
from .kernels import Launch, array_type, compile_kernel, int_type
from .lower_reduce import _render
from .lowering import Step, lowers

GATHER_DTYPES = tuple(d for d in DType if not d.is_complex)

_CHECK_INT = '''
k = np.int64({at})
bad = False
'''
_CHECK_FLOAT = '''
fk = {read}
bad = not (fk == fk and abs(fk) < 1e18 and fk == _floor(fk))
k = np.int64(0) if bad else np.int64(fk)
if bad:
    _fail(err, tag, {not_int})
'''
_CHECK_RANGE = '''
if not bad and (k < {lo} or k >= {size}):
    _fail(err, tag, {bad_index})
    bad = True
if k < 0:
    k += {size}
'''


def check_index(dt: DType, at: str, size: str, negative_ok, indent: int) -> str:
    """Statements setting ``k`` (the index at ``at``, wrapped when negative) and ``bad``
    (True, with the error word set, when it is not an integer in range of ``size``).
    ``negative_ok``: a bool, or the name of a kernel argument deciding it at run time."""
    if dt.is_float or dt in (DType.F16, DType.BF16):
        code = _CHECK_FLOAT.format(read=read_expr(dt, at), not_int=ERR_NOT_INT)
    else:
        code = _CHECK_INT.format(at=at)
    lo = f"-{size}" if negative_ok is True else "0" if negative_ok is False else \
        f"(-{size} if {negative_ok} else 0)"
    code += _CHECK_RANGE.format(lo=lo, size=size, bad_index=ERR_INDEX)
    return textwrap.indent(code.strip(), " " * indent)


def _zero(dt: DType) -> str:
    np_dt = device_dtype(dt)
    return "False" if np_dt == np.bool_ else f"np.{np_dt.name}(0)"


def _launch(name, source, node, ins, extra) -> Launch:
    arrs = tuple(array_type(device_dtype(s.dtype)) for s in [node.shape] + list(ins))
    return Launch(compile_kernel(name, source), arrs + extra + (array_type(np.int32),
                                                                int_type()))


_GATHER = '''
def {name}(out, table, idx, outer, size, inner, err, tag):
    n_idx = idx.size
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < out.size:
        j = i % inner
        r = i // inner
        q = r % n_idx
        o = r // n_idx
{check}
        if bad:
            out[i] = {zero}
        else:
            out[i] = table[(o * size + k) * inner + j]
        i += stride
'''


def _grid_step(launch, n, ctx, *args) -> Step:
    err, tag = ctx.err, ctx.tag

    def run(out, *xs):
        if n:
            blocks, threads = launch_shape(n)
            launch(blocks, threads, out, *xs, *(a.get() if isinstance(a, DeviceConst) else a
                                                 for a in args), err.get(), tag)
    return Step(run, [launch], fallible=True)


@lowers("Gather", GATHER_DTYPES)
def lower_gather(node, ins, ctx) -> Step:
    table, idx = ins
    ax = node.attrs.axis
    dims = [int(d) for d in table.dims]
    outer, size, inner = math.prod(dims[:ax]), dims[ax], math.prod(dims[ax + 1:])
    name, source = _render(_GATHER, "gather", zero=_zero(node.shape.dtype),
                           check=check_index(idx.dtype, "idx[q]", "size", False, 8))
    i64 = int_type()
    launch = _launch(name, source, node, ins, (i64, i64, i64))
    return _grid_step(launch, node.shape.numel, ctx, outer, size, inner)


_GATHER_ELEMENTS = '''
def {name}(out, data, idx, idims, dstrides, axis, size, err, tag):
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < out.size:
{check}
        if bad:
            out[i] = {zero}
        else:
            off = 0
            rem = i
            for ax in range(idims.size - 1, -1, -1):
                c = rem % idims[ax]
                rem //= idims[ax]
                off += (k if ax == axis else c) * dstrides[ax]
            out[i] = data[off]
        i += stride
'''


@lowers("GatherElements", GATHER_DTYPES)
def lower_gather_elements(node, ins, ctx) -> Step:
    data, idx = ins
    ax = node.attrs.axis % data.rank
    dims = np.array([int(d) for d in data.dims], np.int64)
    strides = np.array([math.prod(dims[a + 1:]) for a in range(len(dims))], np.int64)
    name, source = _render(_GATHER_ELEMENTS, "gatherel", zero=_zero(node.shape.dtype),
                           check=check_index(idx.dtype, "idx[i]", "size", True, 8))
    tab, i64 = array_type(np.int64), int_type()
    launch = _launch(name, source, node, ins, (tab, tab, i64, i64))
    idims = DeviceConst(np.array([int(d) for d in idx.dims] or [1], np.int64))
    return _grid_step(launch, node.shape.numel, ctx, idims, DeviceConst(strides), ax,
                      int(dims[ax]))


_GATHER_ND = '''
def {name}(out, data, idx, sizes, strides, piece, per_batch, block, err, tag):
    depth = sizes.size
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < out.size:
        u = i // piece
        off = (u // per_batch) * block
        ok = True
        for t in range(depth):
            size = sizes[t]
{check}
            ok = ok and not bad
            off += k * strides[t]
        if ok:
            out[i] = data[off * piece + i - u * piece]
        else:
            out[i] = {zero}
        i += stride
'''


def nd_tables(data_dims, idx_dims, b: int):
    """(sizes, strides, piece, per_batch, block) of ONNX ND indexing: tuple position t
    addresses data axis b + t; ``piece`` elements are moved per tuple."""
    data_dims, idx_dims = [int(d) for d in data_dims], [int(d) for d in idx_dims]
    depth = idx_dims[-1]
    sizes = np.array(data_dims[b:b + depth], np.int64)
    strides = np.array([math.prod(sizes[t + 1:]) for t in range(depth)], np.int64)
    return (sizes, strides, math.prod(data_dims[b + depth:]),
            max(1, math.prod(idx_dims[b:-1])), math.prod(sizes))


@lowers("GatherNd", GATHER_DTYPES)
def lower_gather_nd(node, ins, ctx) -> Step:
    data, idx = ins
    sizes, strides, piece, per_batch, block = nd_tables(data.dims, idx.dims,
                                                        node.attrs.batch_dims)
    name, source = _render(_GATHER_ND, "gathernd", zero=_zero(node.shape.dtype),
                           check=check_index(idx.dtype, "idx[u * depth + t]", "size", True, 12))
    tab, i64 = array_type(np.int64), int_type()
    launch = _launch(name, source, node, ins, (tab, tab, i64, i64, i64))
    return _grid_step(launch, node.shape.numel, ctx, DeviceConst(sizes),
                      DeviceConst(strides), max(piece, 1), per_batch, block)
