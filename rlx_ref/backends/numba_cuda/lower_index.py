"""Gather as a bounds-checked CUDA kernel.

Every output element decodes its (outer, index position, inner) coordinates, reads its
index (an integer, or an f32-encoded integer) and checks it before touching the table:
a NaN or non-integral index, or one outside ``0..dims[axis]-1``, sets the plan's error
word (which the host turns into an error naming the node) and writes zero instead of
reading out of bounds. The other indexing kinds run on the host path for now.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.dtype import DType
from .device import device_dtype, launch_shape
from .ew_render import ERR_INDEX, ERR_NOT_INT
from .geometry import read_expr
from .kernels import Launch, array_type, compile_kernel, int_type
from .lower_reduce import _render
from .lowering import Step, lowers

GATHER_DTYPES = tuple(d for d in DType if not d.is_complex)

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
        {decode}
        if bad or k < 0 or k >= size:
            if not bad:
                _fail(err, tag, {bad_index})
            out[i] = {zero}
        else:
            out[i] = table[(o * size + k) * inner + j]
        i += stride
'''
_DECODE_INT = '''k = np.int64(idx[q])
        bad = False'''
_DECODE_FLOAT = '''v = {read}
        bad = not (v == v and abs(v) < 1e18 and v == _floor(v))
        k = np.int64(0) if bad else np.int64(v)
        if bad:
            _fail(err, tag, {not_int})'''


@lowers("Gather", GATHER_DTYPES)
def lower_gather(node, ins, ctx) -> Step:
    table, idx = ins
    ax = node.attrs.axis
    dims = [int(d) for d in table.dims]
    outer, size, inner = math.prod(dims[:ax]), dims[ax], math.prod(dims[ax + 1:])
    decode = _DECODE_INT if not idx.dtype.is_float else _DECODE_FLOAT.replace(
        "{not_int}", str(ERR_NOT_INT)).replace("{read}", read_expr(idx.dtype, "idx[q]"))
    out_np = device_dtype(node.shape.dtype)
    zero = "False" if out_np == np.bool_ else f"np.{out_np.name}(0)"
    name, source = _render(_GATHER, "gather", decode=decode, bad_index=ERR_INDEX, zero=zero)
    arr = array_type(out_np)
    i64 = int_type()
    launch = Launch(compile_kernel(name, source),
                    (arr, arr, array_type(device_dtype(idx.dtype)), i64, i64, i64,
                     array_type(np.int32), i64))
    n = node.shape.numel
    err, tag = ctx.err, ctx.tag

    def run(out, t, i):
        if n:
            blocks, threads = launch_shape(n)
            launch(blocks, threads, out, t, i, outer, size, inner, err.get(), tag)
    return Step(run, [launch], fallible=True)
