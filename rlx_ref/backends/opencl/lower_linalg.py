"""OpenCL lowering of MatMul and DotGeneral (DenseSolve and BatchedDenseSolve stay on the
declared host path: LU with pivoting is sequential per matrix).

Both are a batched product ``out[b] = A[b] · B[b]`` whose operands are described by offset
tables (matrix, free index, contracted index), so broadcast batches and DotGeneral's axis
permutations cost no copy: packing reads through the tables (``_linalg_plan``). Products
of up to linalg.direct_macs multiply-adds (or with K = 0) take the one-kernel direct path, and a
MatMul of at most SKINNY_ROWS rows on a CPU (a GEMV, a decode step) reads its operands in
place: packing would read and write the whole rhs once more. f16/bf16 are computed in f32
and rounded once; integers wrap.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.dtype import DType
from . import _reduce_c as rc
from ._linalg_cl import FLOATS, c_strides, offsets
from ._linalg_plan import Direct, Gemm, Skinny, table_packer
from .variant_table import th, use
from .lowering import Step, lowers

# linalg.direct_macs (variant_table): M·N·K·batch at or below it: one direct kernel
SKINNY_ROWS = 4              # MatMul on a CPU with at most this many rows: no packing
F16_NOTE = "f16/bf16 are computed in f32 and rounded once"


def _idle():
    return None


def _batch_maps(a_batch: tuple, b_batch: tuple, out_batch: tuple):
    """Flat lhs/rhs matrix index of every output matrix (broadcast batch prefixes)."""
    def flat(batch):
        idx = np.arange(math.prod(batch), dtype=np.int64).reshape(batch)
        return np.ascontiguousarray(np.broadcast_to(idx, out_batch)).reshape(-1)
    return flat(a_batch), flat(b_batch)


def product_step(ctx, dt: DType, M: int, N: int, K: int, ia, ib, a_tabs, b_tabs) -> Step:
    """The Step of ``out[b] = A[ia[b]] · B[ib[b]]``; ``a_tabs`` = (matrix, row, k) offsets of
    the lhs, ``b_tabs`` = (matrix, k, column) offsets of the rhs."""
    nb = len(ia)
    if nb * M * N == 0:
        return Step(lambda out, a, b: _idle)
    if K == 0 or nb * M * N * K <= th("linalg.direct_macs"):
        use("matmul.direct")
        a_mats, a_rows, a_ks = a_tabs
        b_mats, b_ks, b_cols = b_tabs
        plan = Direct(ctx, dt, dt, M, N, K, nb, (a_mats[ia], a_rows, a_ks),
                      (b_mats[ib], b_ks, b_cols))
        return Step(plan.bind)
    use("matmul.gemm_gpu" if rc.gpu_style(ctx.device) else "matmul.gemm_cpu")
    pa = table_packer(ctx, dt, *a_tabs)
    pb = table_packer(ctx, dt, b_tabs[0], b_tabs[2], b_tabs[1])
    plan = Gemm(ctx, dt, M, N, K, pa, pb, ia, ib, [(0, nb)])
    return Step(plan.bind)


@lowers("MatMul", FLOATS + (DType.I32, DType.I64), reason=F16_NOTE)
def lower_matmul(node, ins, ctx) -> Step:
    (a_dims, b_dims), out_dims = (tuple(s.dims) for s in ins), tuple(node.shape.dims)
    M, K, N = a_dims[-2], a_dims[-1], b_dims[-1]
    ia, ib = _batch_maps(a_dims[:-2], b_dims[:-2], out_dims[:-2])
    ba, bb = math.prod(a_dims[:-2]), math.prod(b_dims[:-2])
    a_tabs = (np.arange(ba) * M * K, np.arange(M) * K, np.arange(K))
    b_tabs = (np.arange(bb) * K * N, np.arange(K) * N, np.arange(N))
    dt = node.shape.dtype
    skinny = 0 < M <= SKINNY_ROWS and len(ia) * N * K > th("linalg.direct_macs")
    if skinny and not rc.gpu_style(ctx.device):
        use("matmul.skinny")
        return Step(Skinny(ctx, dt, M, N, K, ia, ib).bind)
    return product_step(ctx, node.shape.dtype, M, N, K, ia, ib, a_tabs, b_tabs)


@lowers("DotGeneral", FLOATS + (DType.I32,), reason=F16_NOTE)
def lower_dot_general(node, ins, ctx) -> Step:
    a = node.attrs
    ld, rd = tuple(ins[0].dims), tuple(ins[1].dims)
    ls, rs = c_strides(ld), c_strides(rd)
    lb, lc, rb, rc = (list(a.lhs_batch), list(a.lhs_contracting), list(a.rhs_batch),
                      list(a.rhs_contracting))
    lf = [i for i in range(len(ld)) if i not in lc and i not in lb]
    rf = [i for i in range(len(rd)) if i not in rc and i not in rb]

    def table(dims, strides, axes):
        return offsets([dims[i] for i in axes], [strides[i] for i in axes])

    nb = math.prod(ld[i] for i in lb)
    M, N = math.prod(ld[i] for i in lf), math.prod(rd[i] for i in rf)
    K = math.prod(ld[i] for i in lc)
    ident = np.arange(nb, dtype=np.int64)
    a_tabs = (table(ld, ls, lb), table(ld, ls, lf), table(ld, ls, lc))
    b_tabs = (table(rd, rs, rb), table(rd, rs, rc), table(rd, rs, rf))
    return product_step(ctx, node.shape.dtype, M, N, K, ident, ident, a_tabs, b_tabs)
