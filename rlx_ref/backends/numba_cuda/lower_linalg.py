"""MatMul as a CUDA kernel tiled through shared memory.

Each block computes one TS×TS output tile of one batch matrix: per step along K it loads
a TS×TS tile of lhs and of rhs into shared memory (zeros past the edges, so ragged M, N
and K need no special case), synchronizes, and each thread accumulates its element's
dot product from the tiles. Batch prefixes broadcast through per-batch offset tables
computed on the host. f32 and 16-bit floats accumulate in f32 (as the oracle), f64 in
f64, integers in i64 (wrapping when stored).
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.dtype import DType
from .device import DeviceConst, device_dtype, rows_shape, simulator_active
from .geometry import read_expr, store_expr
from .kernels import Launch, array_type, compile_kernel, int_type
from .lower_reduce import _render
from .lowering import SIXTEEN, SIXTEEN_NOTE, Step, lowers

MATMUL_DTYPES = (DType.F32, DType.F64, DType.I32, DType.I64) + SIXTEEN

_MATMUL = '''
def {name}(out, a, b, a_off, b_off, m, n, k_len):
    ta = cuda.shared.array(({TS}, {TS}), {acc})
    tb = cuda.shared.array(({TS}, {TS}), {acc})
    t = cuda.threadIdx.x
    ty = t // {TS}
    tx = t - ty * {TS}
    tiles_m = (m + {TS} - 1) // {TS}
    tiles_n = (n + {TS} - 1) // {TS}
    per_batch = tiles_m * tiles_n
    tile = cuda.blockIdx.x
    while tile < per_batch * a_off.size:
        batch = tile // per_batch
        rest = tile - batch * per_batch
        row = (rest // tiles_n) * {TS} + ty
        col = (rest % tiles_n) * {TS} + tx
        abase = a_off[batch]
        bbase = b_off[batch]
        acc = {acc}(0)
        for k0 in range(0, k_len, {TS}):
            ka = k0 + tx
            kb = k0 + ty
            ta[ty, tx] = {read_a} if row < m and ka < k_len else {acc}(0)
            tb[ty, tx] = {read_b} if kb < k_len and col < n else {acc}(0)
            cuda.syncthreads()
            for j in range({TS}):
                acc += ta[ty, j] * tb[j, tx]
            cuda.syncthreads()
        if row < m and col < n:
            out[batch * m * n + row * n + col] = {store}
        tile += cuda.gridDim.x
'''


def _acc(dt: DType) -> str:
    if dt is DType.F64:
        return "np.float64"
    return "np.float32" if dt.is_float else "np.int64"


def tile_size() -> int:
    """16×16 threads per block on a GPU; 4×4 in the simulator (a thread per thread)."""
    return 4 if simulator_active() else 16


def _batch_offsets(lhs, rhs, out) -> tuple[np.ndarray, np.ndarray]:
    """Per output batch matrix, the element offset of its lhs and rhs matrices."""
    batch = tuple(out.dims[:-2])
    lb, rb = tuple(lhs.dims[:-2]), tuple(rhs.dims[:-2])
    count = math.prod(batch)
    a_idx = np.broadcast_to(np.arange(math.prod(lb)).reshape(lb), batch).reshape(-1) \
        if lb else np.zeros(count, np.int64)
    b_idx = np.broadcast_to(np.arange(math.prod(rb)).reshape(rb), batch).reshape(-1) \
        if rb else np.zeros(count, np.int64)
    a_size = lhs.dims[-2] * lhs.dims[-1]
    b_size = rhs.dims[-2] * rhs.dims[-1]
    return (np.asarray(a_idx, np.int64) * a_size).reshape(-1), \
        (np.asarray(b_idx, np.int64) * b_size).reshape(-1)


@lowers("MatMul", MATMUL_DTYPES, reason=SIXTEEN_NOTE)
def lower_matmul(node, ins, ctx) -> Step:
    dt = node.shape.dtype
    lhs, rhs = ins
    m, k, n = int(lhs.dims[-2]), int(lhs.dims[-1]), int(rhs.dims[-1])
    ts = tile_size()
    acc = _acc(dt)
    read_a = read_expr(lhs.dtype, "a[abase + row * k_len + ka]")
    read_b = read_expr(rhs.dtype, "b[bbase + kb * n + col]")
    name, source = _render(_MATMUL, "matmul", TS=ts, acc=acc,
                           read_a=f"{acc}({read_a})", read_b=f"{acc}({read_b})",
                           store=store_expr(dt, "acc"))
    arr = array_type(device_dtype(dt))
    i64 = int_type()
    launch = Launch(compile_kernel(name, source),
                    (arr, arr, arr, array_type(np.int64), array_type(np.int64), i64, i64, i64))
    a_off, b_off = (DeviceConst(o) for o in _batch_offsets(lhs, rhs, node.shape))
    batches = int(a_off.host.size)
    tiles = batches * -(-m // ts) * -(-n // ts)

    def run(out, a, b):
        if tiles:
            blocks, _ = rows_shape(tiles, ts * ts)
            launch(blocks, ts * ts, out, a, b, a_off.get(), b_off.get(), m, n, k)
    return Step(run, [launch])
