"""MatMul and DotGeneral on the register-tiled GEMM of ``_gemm``.

MatMul reads lhs and rhs in place; batch prefixes broadcast through per-batch offset
tables computed on the host. DotGeneral is the same product once each operand is laid
out as ``[batch, M, K]`` and ``[batch, K, N]``: an operand already in that order is read
in place, otherwise one transpose kernel copies it into a scratch buffer first (the
output ``[batch, lhs free, rhs free]`` is already the product's row-major layout). f32
and 16-bit floats accumulate in f32 (as the oracle), f64 in f64, integers in i64
(wrapping when stored).
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.dtype import DType
from ...ir.shape import Shape
from ._gemm import gemm_blocks, render_gemm, tiling
from .device import DeviceConst, device_dtype, rows_shape
from .geometry import read_expr, store_expr
from .kernels import Launch, array_type, compile_kernel, int_type
from .lower_movement import permute_step
from .lowering import SIXTEEN, SIXTEEN_NOTE, Step, lowers

MATMUL_DTYPES = (DType.F32, DType.F64, DType.I32, DType.I64) + SIXTEEN


def acc_type(dt: DType) -> str:
    if dt is DType.F64:
        return "np.float64"
    return "np.float32" if dt.is_float else "np.int64"


def _batch_offsets(lhs_batch, rhs_batch, batch, a_size, b_size):
    """Per output batch matrix, the element offset of its lhs and rhs matrices."""
    count = math.prod(batch)

    def offsets(dims, size):
        if not dims:
            return np.zeros(count, np.int64)
        idx = np.broadcast_to(np.arange(math.prod(dims)).reshape(dims), batch)
        return np.asarray(idx, np.int64).reshape(-1) * size
    return offsets(tuple(lhs_batch), a_size), offsets(tuple(rhs_batch), b_size)


class Product:
    """The launch of ``out[b] = lhs[a_off[b]] · rhs[b_off[b]]`` (M×K times K×N)."""

    def __init__(self, dt: DType, lhs_dt: DType, rhs_dt: DType, m, k, n, a_off, b_off):
        acc = acc_type(dt)
        self.m, self.k, self.n = m, k, n
        self.tiling = tiling(acc, m, n)
        name, source = render_gemm(
            "matmul", acc, self.tiling,
            load_a=f"v = {acc}({read_expr(lhs_dt, 'a[abase + row * k_len + ka]')})",
            load_b=f"v = {acc}({read_expr(rhs_dt, 'b[bbase + kb * n + col]')})",
            store=f"out[batch * m * n + row * n + col] = {store_expr(dt, 'value')}",
            setup="abase = a_off[batch]\nbbase = b_off[batch]", extra=("a_off", "b_off"))
        i64, offs = int_type(), array_type(np.int64)
        self.launch = Launch(compile_kernel(name, source),
                             tuple(array_type(device_dtype(d)) for d in (dt, lhs_dt, rhs_dt))
                             + (i64, i64, i64, i64, offs, offs))
        self.a_off, self.b_off = DeviceConst(a_off), DeviceConst(b_off)
        self.batches = int(a_off.size)

    def __call__(self, out, a, b) -> None:
        blocks = gemm_blocks(self.tiling, self.m, self.n, self.batches)
        if blocks:
            grid, threads = rows_shape(blocks, self.tiling.threads)
            self.launch(grid, threads, out, a, b, self.m, self.n, self.k, self.batches,
                        self.a_off.get(), self.b_off.get())


@lowers("MatMul", MATMUL_DTYPES, reason=SIXTEEN_NOTE)
def lower_matmul(node, ins, ctx) -> Step:
    lhs, rhs = ins
    m, k, n = int(lhs.dims[-2]), int(lhs.dims[-1]), int(rhs.dims[-1])
    batch = tuple(int(d) for d in node.shape.dims[:-2])
    a_off, b_off = _batch_offsets(lhs.dims[:-2], rhs.dims[:-2], batch, m * k, k * n)
    prod = Product(node.shape.dtype, lhs.dtype, rhs.dtype, m, k, n, a_off, b_off)
    return Step(prod, [prod.launch])


def _laid_out(shape: Shape, order: list, note: list):
    """A callable giving ``shape``'s array with its axes in ``order`` (a transpose kernel
    into a scratch buffer, or the array itself when ``order`` is already the layout)."""
    if order == list(range(len(order))):
        return (lambda x: x), []
    note.append(f"transposed {list(shape.dims)} by {order}")
    step = permute_step(shape, tuple(order))
    return step, step.launches


@lowers("DotGeneral", MATMUL_DTYPES, reason=SIXTEEN_NOTE)
def lower_dot_general(node, ins, ctx) -> Step:
    a = node.attrs
    lhs, rhs = ins
    ls, rs = [int(d) for d in lhs.dims], [int(d) for d in rhs.dims]
    lb, lc, rb, rc = map(list, (a.lhs_batch, a.lhs_contracting, a.rhs_batch,
                                a.rhs_contracting))
    lf = [i for i in range(len(ls)) if i not in lb and i not in lc]
    rf = [i for i in range(len(rs)) if i not in rb and i not in rc]
    count = math.prod(ls[i] for i in lb)
    m, n = math.prod(ls[i] for i in lf), math.prod(rs[i] for i in rf)
    k = math.prod(ls[i] for i in lc)
    note: list = []
    lay_a, la = _laid_out(lhs, lb + lf + lc, note)
    lay_b, lb_launches = _laid_out(rhs, rb + rc + rf, note)
    offs = np.arange(count, dtype=np.int64)
    prod = Product(node.shape.dtype, lhs.dtype, rhs.dtype, m, k, n, offs * m * k, offs * k * n)

    def run(out, x, y):
        if out.size:
            prod(out, lay_a(x), lay_b(y))
    return Step(run, [prod.launch] + la + lb_launches, note="; ".join(note))
