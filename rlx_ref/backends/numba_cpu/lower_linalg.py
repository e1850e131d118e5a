"""Lowering of the linalg family: MatMul, DotGeneral, DenseSolve, BatchedDenseSolve.

MatMul is a batched product over a broadcast batch: every output matrix ``i`` reads lhs
matrix ``ia[i]`` and rhs matrix ``ib[i]`` (index maps built once on the host). f32/f64
products of useful size call BLAS from inside ``njit`` (``np.dot`` on 2-D contiguous
slices, writing the output slice in place), large ones as blocks in prange (``_blocks``:
whole matrices, row blocks of tall ones, else column blocks passed to BLAS as strided
views by ``gemm_view``, one-row products as GEMV, see _gemm_src); small
products and integers run an ikj loop kernel (integers wrap, as the oracle's). DotGeneral
transposes/reshapes its operands on the host into one such batched product; that transpose
is a copy (skipped when the axes are already in order). Solves are LU with partial
pivoting (LAPACK getf2's pivot choice) one matrix at a time, in the working precision; not
Numba's ``np.linalg.solve``, which refuses non-finite entries (numpy returns NaNs) and
took ~10 s per dtype to compile here. f16/bf16 run through f32 shadows.

Threads: every kernel here, in lower_attention and in lower_conv runs its BLAS calls with
the BLAS library Numba calls (scipy's OpenBLAS, not numpy's) held at one thread for the
duration of the step (``blas_serial``, ~1 µs) and parallelizes with Numba's own threads.
OpenBLAS's idle pool threads spin for a while after each call; beside Numba's OpenMP pool
on 2 cores that cost 10-300× (measured on this machine while it was shared: attention at
B1 H8 S256 D64 took 560 ms with both pools, 1.9 ms with BLAS held to one thread).
"""
from __future__ import annotations

import math
import threading

import numpy as np

from ...ir.dtype import DType
from ...ops.opdef import OpError
from .kernels import compile_kernel
from .variant_table import th, use, use_par
from ._gemm_src import GEMM_HEAD
from .lowering import JitCall, Step, lowers

SIXTEEN = (DType.F16, DType.BF16)
FLOATS = (DType.F32, DType.F64) + SIXTEEN
SHADOW_NOTE = "f16/bf16 run through f32 shadows converted on the host"
# linalg.blas_min (M·N·K below it: the loop kernel beats a BLAS call), linalg.par_min
# (the loop kernel's prange) and linalg.blas_par_min (BLAS row blocks): variant_table


def work(x: np.ndarray) -> np.ndarray:
    """f16/bf16 operands as f32 (the working precision); others unchanged, C-contiguous."""
    if x.dtype.itemsize == 2 and x.dtype.kind in "fV":
        return np.ascontiguousarray(x, np.float32)
    return np.ascontiguousarray(x)


def shadow_out(out: np.ndarray) -> np.ndarray | None:
    """An f32 buffer to compute a 16-bit float output in (None when ``out`` is usable)."""
    if out.dtype.itemsize == 2 and out.dtype.kind in "fV":
        return np.empty(out.shape, np.float32)
    return None


def finish(out: np.ndarray, tmp) -> None:
    """Round an f32 shadow into the 16-bit output (overflow to ±inf is the rounding)."""
    if tmp is not None:
        with np.errstate(over="ignore"):
            out[...] = tmp.astype(out.dtype)


_BLAS = []
# Steps of concurrent runs hold BLAS at one thread together: the first in saves the count,
# the last out restores it (one step restoring it under another would unleash the pool).
_HOLD_LOCK = threading.Lock()
_HOLDERS = [0, 1]               # [steps holding BLAS now, the count to restore]


def numba_threads() -> int:
    """The thread count of Numba's parallel kernels (what work is split for)."""
    import numba

    return numba.config.NUMBA_NUM_THREADS


def _blas_threads():
    """(get, set) of the thread count of the OpenBLAS that Numba's np.dot calls, or None."""
    if not _BLAS:
        with _HOLD_LOCK:
            if not _BLAS:
                _BLAS.append(_find_blas())
    return _BLAS[0]


def _find_blas():
    try:
        import ctypes

        import scipy.linalg.cython_blas  # noqa: F401 - loads the library Numba uses

        with open("/proc/self/maps") as maps:
            paths = {ln.split()[-1] for ln in maps if "libscipy_openblas-" in ln}
        lib = ctypes.CDLL(paths.pop())
        return lib.scipy_openblas_get_num_threads, lib.scipy_openblas_set_num_threads
    except (OSError, KeyError, AttributeError, ImportError):
        return None           # another BLAS (or platform): nothing to hold


def blas_serial(fn, *args):
    """``fn(*args)`` with Numba's BLAS at one thread (see the module docstring)."""
    hold = _blas_threads()
    if not hold:
        return fn(*args)
    with _HOLD_LOCK:
        if not _HOLDERS[0]:
            _HOLDERS[1] = hold[0]()
            if _HOLDERS[1] != 1:
                hold[1](1)
        _HOLDERS[0] += 1
    try:
        return fn(*args)
    finally:
        with _HOLD_LOCK:
            _HOLDERS[0] -= 1
            if not _HOLDERS[0] and _HOLDERS[1] != 1:
                hold[1](_HOLDERS[1])


_MM_SRC = GEMM_HEAD + '''

@njit(cache=True, nogil=True)
def mm_blas(a3, b3, o3, ia, ib, rows, cols):
    for i in range(o3.shape[0]):
        np.dot(a3[ia[i]], b3[ib[i]], o3[i])


@njit(cache=True, nogil=True, parallel=True)
def mm_blas_par(a3, b3, o3, ia, ib, rows, cols):
    # blocks of rows x cols of every output matrix, one single-threaded BLAS call each
    # (column blocks are strided views: gemm_view passes them without copies)
    nblk = (o3.shape[1] + rows - 1) // rows
    ncb = (o3.shape[2] + cols - 1) // cols
    ab = np.zeros(2, o3.dtype)
    ab[0] = 1
    for t in prange(o3.shape[0] * nblk * ncb):
        i = t // (nblk * ncb)
        r0 = (t // ncb % nblk) * rows
        r1 = min(r0 + rows, o3.shape[1])
        c0 = t % ncb * cols
        c1 = min(c0 + cols, o3.shape[2])
        gemm_view(a3[ia[i], r0:r1], b3[ib[i], :, c0:c1], o3[i, r0:r1, c0:c1], ab)


@njit(cache=True, nogil=True, inline="always")
def _mm_row(a3, b3, o3, ia, ib, r):
    m_rows = o3.shape[1]
    bi = r // m_rows
    m = r - bi * m_rows
    a = a3[ia[bi]]
    b = b3[ib[bi]]
    orow = o3[bi, m]
    arow = a[m]
    for n in range(orow.size):
        orow[n] = 0
    for k in range(arow.size):
        aik = arow[k]
        brow = b[k]
        for n in range(orow.size):
            orow[n] += aik * brow[n]


@njit(cache=True, nogil=True)
def mm_loop(a3, b3, o3, ia, ib):
    for r in range(o3.shape[0] * o3.shape[1]):
        _mm_row(a3, b3, o3, ia, ib, r)


@njit(cache=True, nogil=True, parallel=True)
def mm_loop_par(a3, b3, o3, ia, ib):
    for r in prange(o3.shape[0] * o3.shape[1]):
        _mm_row(a3, b3, o3, ia, ib, r)
'''


_MM_KERNEL: list = []


def matmul_kernel():
    """The matmul kernel module, compiled (and its source hashed) once per process."""
    if not _MM_KERNEL:
        _MM_KERNEL.append(compile_kernel("mm_blas", _MM_SRC))
    return _MM_KERNEL[0]


def _blocks(bo: int, m: int, n: int) -> tuple:
    """(rows, columns) per BLAS call of a parallel product: whole matrices when there are
    enough of them for every thread (a single-threaded GEMM is most efficient whole: 8
    blocks of 512³ took 2.0 ms, 2 blocks 1.6 ms, numpy's 2-thread sgemm 1.6 ms), else
    each matrix split in ``ceil(threads / bo)``: by rows when it is tall, by columns when
    its rows are few (each block packs all of the other operand: ``[128, 768]·[768,
    2304]`` in two row blocks packs the 7 MB rhs twice, in two column blocks once)."""
    split = -(-numba_threads() // bo)
    if split <= 1:
        return m, n
    least = min(32, th("linalg.blas_par_min"))   # 1 under lowered thresholds (tests)
    if m >= 256 * split or n < 2 * least * split:
        return min(m, max(least, -(-m // split))), n
    step = 16 if least > 1 else 1                # whole SIMD panels of columns
    return m, min(n, (-(-n // split) + step - 1) // step * step)


def mm_call(kind: str, bo: int, m: int, k: int, n: int):
    """(kernel, trailing arguments, uses BLAS) for ``o3[i] = a3[ia[i]] @ b3[ib[i]]`` with
    ``o3`` of shape [bo, m, n], K = ``k`` > 0 and dtype kind ``kind``."""
    kern = matmul_kernel()
    macs = bo * m * n * k
    if kind == "f" and macs // bo >= th("linalg.blas_min"):
        par = macs >= th("linalg.blas_par_min")
        rows, cols = _blocks(bo, m, n) if par else (m, n)
        blocks = rows < m or cols < n or (par and bo > 1)
        use("matmul.blas.par" if blocks else "matmul.blas")
        return (kern.get("mm_blas_par") if blocks else kern.fn), (rows, cols), True
    par = use_par("matmul.loop", macs >= th("linalg.par_min"))
    return kern.get("mm_loop_par" if par else "mm_loop"), (), False


def batched_matmul(a3, b3, o3, ia, ib, call) -> None:
    """``o3[i] = a3[ia[i]] @ b3[ib[i]]`` with ``call``, the ``mm_call`` chosen at lowering
    (where the plan's thresholds are in force and its variant is recorded)."""
    if o3.size == 0:
        return
    if a3.shape[2] == 0:
        o3[...] = 0
        return
    fn, extra, blas = call
    if blas:
        blas_serial(fn, a3, b3, o3, ia, ib, *extra)
    else:
        fn(a3, b3, o3, ia, ib)


def _batch_maps(a_batch: tuple, b_batch: tuple, out_batch: tuple):
    """Flat lhs/rhs matrix index of every output matrix (broadcast batch prefixes)."""
    def flat(batch):
        idx = np.arange(math.prod(batch), dtype=np.int64).reshape(batch)
        return np.ascontiguousarray(np.broadcast_to(idx, out_batch)).reshape(-1)
    return flat(a_batch), flat(b_batch)


def _lowered_call(node, bo: int, m: int, k: int, n: int):
    """``mm_call`` for the node's product (floats in their working precision), or None when
    the product is empty (nothing runs)."""
    if not bo * m * n * k:
        return None
    return mm_call("f" if node.shape.dtype.is_float else "i", bo, m, k, n)


@lowers("MatMul", FLOATS + (DType.I32, DType.I64), reason=SHADOW_NOTE)
def lower_matmul(node, ins, ctx) -> Step:
    (a_dims, b_dims), out_dims = (tuple(s.dims) for s in ins), tuple(node.shape.dims)
    m, k, n = a_dims[-2], a_dims[-1], b_dims[-1]
    ia, ib = _batch_maps(a_dims[:-2], b_dims[:-2], out_dims[:-2])
    ba, bb, bo = (math.prod(d[:-2]) for d in (a_dims, b_dims, out_dims))
    kernel = matmul_kernel()
    call = _lowered_call(node, bo, m, k, n)

    def run(out, a, b):
        a3, b3 = work(a).reshape(ba, m, k), work(b).reshape(bb, k, n)
        tmp = shadow_out(out)
        o = out if tmp is None else tmp
        batched_matmul(a3, b3, o.reshape(bo, m, n), ia, ib, call)
        finish(out, tmp)
    jit = None
    if node.shape.dtype not in SIXTEEN and all(d not in SIXTEEN for d in
                                               (ins[0].dtype, ins[1].dtype)) and call:
        fn, extra, _ = call
        jit = JitCall(fn, (f"{{0}}.reshape(({ba}, {m}, {k}))", f"{{1}}.reshape(({bb}, {k}, {n}))",
                           f"{{out}}.reshape(({bo}, {m}, {n}))"), (ia, ib, *extra))
    return Step(run, [kernel], jit=jit)


@lowers("DotGeneral", FLOATS + (DType.I32,),
        reason=SHADOW_NOTE + "; operands are transposed to [batch, M, K] / [batch, K, N] on "
                             "the host (a copy unless already in that order)")
def lower_dot_general(node, ins, ctx) -> Step:
    a = node.attrs
    lb, lc, rb, rc = (list(a.lhs_batch), list(a.lhs_contracting), list(a.rhs_batch),
                      list(a.rhs_contracting))
    ld, rd = tuple(ins[0].dims), tuple(ins[1].dims)
    lf = [i for i in range(len(ld)) if i not in lc and i not in lb]
    rf = [i for i in range(len(rd)) if i not in rc and i not in rb]
    bsz = math.prod(ld[i] for i in lb)
    m, n = math.prod(ld[i] for i in lf), math.prod(rd[i] for i in rf)
    k = math.prod(ld[i] for i in lc)
    lperm, rperm = lb + lf + lc, rb + rc + rf
    ia = ib = np.arange(bsz, dtype=np.int64)
    kernel = matmul_kernel()
    call = _lowered_call(node, bsz, m, k, n)

    def arrange(x, perm, shape):
        x = work(x)
        if perm != sorted(perm):
            x = np.ascontiguousarray(x.transpose(perm))
        return x.reshape(shape)

    def run(out, lhs, rhs):
        a3, b3 = arrange(lhs, lperm, (bsz, m, k)), arrange(rhs, rperm, (bsz, k, n))
        tmp = shadow_out(out)
        o = out if tmp is None else tmp
        batched_matmul(a3, b3, o.reshape(bsz, m, n), ia, ib, call)
        finish(out, tmp)
    return Step(run, [kernel])


# ── solves ────────────────────────────────────────────────────────────────

_SOLVE_SRC = '''
@njit(cache=True, nogil=True)
def _lu_solve(a, x):
    # a [N, N] (overwritten) and x [N, K] (b in, x out); False on an exactly zero pivot.
    # LU with partial pivoting (the first largest |a[i, j]|, as LAPACK's getf2), row updates
    # over contiguous rows, then back substitution
    n = a.shape[0]
    for j in range(n):
        p = j
        best = abs(a[j, j])
        for i in range(j + 1, n):
            if abs(a[i, j]) > best:
                p = i
                best = abs(a[i, j])
        if a[p, j] == 0:
            return False
        if p != j:
            for c in range(n):
                a[p, c], a[j, c] = a[j, c], a[p, c]
            for c in range(x.shape[1]):
                x[p, c], x[j, c] = x[j, c], x[p, c]
        pivot_row = a[j, j + 1:]
        x_row = x[j]
        for i in range(j + 1, n):
            f = a[i, j] / a[j, j]
            row = a[i, j + 1:]
            for c in range(row.size):
                row[c] -= f * pivot_row[c]
            xi = x[i]
            for c in range(xi.size):
                xi[c] -= f * x_row[c]
    for i in range(n - 1, -1, -1):
        xi = x[i]
        for t in range(i + 1, n):
            f = a[i, t]
            xt = x[t]
            for c in range(xi.size):
                xi[c] -= f * xt[c]
        d = a[i, i]
        for c in range(xi.size):
            xi[c] = xi[c] / d
    return True


@njit(cache=True, nogil=True)
def solve_batch(a3, b3, x3):
    # x3[i] = solve(a3[i], b3[i]); returns the first singular i, or -1
    for i in range(a3.shape[0]):
        x3[i] = b3[i]
        if np.isnan(a3[i]).any() or not _lu_solve(a3[i].copy(), x3[i]):
            return i                # the spec: an A holding NaN is singular
    return -1
'''


def _lower_solve(node, ins, batched: bool) -> Step:
    kind = node.kind
    a_dims, b_dims = tuple(ins[0].dims), tuple(ins[1].dims)
    nn = a_dims[-1]
    bsz = a_dims[0] if batched else 1
    rhs = b_dims[-1] if len(b_dims) == (3 if batched else 2) else 1
    kernel = compile_kernel("solve_batch", _SOLVE_SRC)

    def run(out, a, b):
        if out.size == 0:
            return
        a3, b3 = work(a).reshape(bsz, nn, nn), work(b).reshape(bsz, nn, rhs)
        tmp = shadow_out(out)
        o = out if tmp is None else tmp
        bad = kernel.fn(a3, b3, o.reshape(bsz, nn, rhs))
        if bad >= 0:
            where = f"[{bad}]" if batched else ""
            if np.isnan(a3[bad]).any():
                raise OpError(f"{kind}: A{where} ({nn}x{nn}) is singular: it holds NaN, so "
                              "LU with partial pivoting has no usable pivot")
            raise OpError(f"{kind}: A{where} ({nn}x{nn}) is singular: LU with partial "
                          "pivoting found an exactly zero pivot, so A @ x = b has no unique "
                          "solution")
        finish(out, tmp)
    return Step(run, [kernel])


@lowers("DenseSolve", FLOATS, reason=SHADOW_NOTE)
def lower_dense_solve(node, ins, ctx) -> Step:
    return _lower_solve(node, ins, batched=False)


@lowers("BatchedDenseSolve", FLOATS, reason=SHADOW_NOTE)
def lower_batched_dense_solve(node, ins, ctx) -> Step:
    return _lower_solve(node, ins, batched=True)
