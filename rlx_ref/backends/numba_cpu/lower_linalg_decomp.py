"""Lowering of the factorization kinds: Cholesky, TriangularSolve, Det, LogDet, Svd, Qr,
Eigh, EighBatch, EighBackward, EighBatchBackward (kernels in ``_linalg_decomp_kernels``).

Operands are converted to float64 on the host and each result rounded once into the
output, matching the oracle. The host checks what the oracle checks (finite input, the
packed length) before a kernel runs, so both raise the same errors; Numba's ``np.linalg``
raising inside a kernel (a matrix that is not positive definite) becomes that OpError.
Empty matrices are answered on the host (Numba's LAPACK wrappers reject them). LAPACK
calls run with Numba's BLAS held at one thread (``blas_serial``, see lower_linalg).
"""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType
from ...ops._linalg_decomp_math import packed_n
from ...ops.opdef import OpError
from ._linalg_decomp_kernels import SRC
from .kernels import compile_kernel
from .lower_linalg import blas_serial
from .lowering import Step, lowers

DTYPES = (DType.F32, DType.F64)
F64_NOTE = "computed in f64 and rounded once (as RLX's CPU, which promotes to f64)"
_KERNEL: list = []


def kernel():
    """The factorization kernel module (compiled once per process)."""
    if not _KERNEL:
        _KERNEL.append(compile_kernel("eigh_batch", SRC))
    return _KERNEL[0]


def f64(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, np.float64)


def _check_finite(a: np.ndarray, kind: str, cid: str, what: str = "") -> None:
    if not np.isfinite(a).all():
        raise OpError(f"({cid}) {kind}: A{what} holds NaN or inf; a factorization of a "
                      "non-finite matrix is undefined")


@lowers("Cholesky", DTYPES, reason=F64_NOTE)
def lower_cholesky(node, ins, ctx) -> Step:
    k = kernel()
    fn = k.get("cholesky")

    def run(out, a):
        n = a.shape[0]
        if n == 0:
            return
        a64 = f64(a)
        _check_finite(np.tril(a64), "Cholesky", "C3")
        l64 = np.empty((n, n))
        try:
            blas_serial(fn, a64, l64)
        except Exception:  # noqa: BLE001 - Numba's LinAlgError: the pivot was <= 0
            raise OpError(f"(C3) Cholesky: A ({n}x{n}, read from its lower triangle) is "
                          "not positive definite: a pivot under the square root is <= 0") \
                from None
        out[...] = l64
    return Step(run, [k])


@lowers("TriangularSolve", DTYPES, reason=F64_NOTE)
def lower_triangular_solve(node, ins, ctx) -> Step:
    k = kernel()
    fn = k.get("trisolve")
    lower, transpose = node.attrs.lower, node.attrs.transpose

    def run(out, a, b):
        if out.size == 0:
            return
        n = a.shape[0]
        x = f64(b).reshape(n, -1).copy()
        fn(f64(a), x, lower, transpose)
        out[...] = x.reshape(out.shape)
    return Step(run, [k])


def _lower_det(log_abs: bool) -> Step:
    k = kernel()
    fn = k.get("det")

    def run(out, a):
        out[...] = fn(f64(a).copy(), log_abs) if a.size else (0.0 if log_abs else 1.0)
    return Step(run, [k])


@lowers("Det", DTYPES, reason=F64_NOTE + "; LU with partial pivoting as a loop kernel")
def lower_det(node, ins, ctx) -> Step:
    return _lower_det(False)


@lowers("LogDet", DTYPES, reason=F64_NOTE + "; LU with partial pivoting as a loop kernel")
def lower_logdet(node, ins, ctx) -> Step:
    return _lower_det(True)


def _lower_factor(kind: str, fname: str, part: int) -> Step:
    k = kernel()
    fn = k.get(fname)
    if fname == "svd" and part == 1:
        values = k.get("svd_values")
        fn = lambda a64, _part, o64: values(a64, o64)  # noqa: E731 - same call shape

    def run(out, a):
        if out.size == 0:
            return
        a64 = f64(a)
        _check_finite(a64, kind, "C3")
        o64 = np.empty(out.shape if out.ndim == 2 else (1, out.size))
        blas_serial(fn, a64, part, o64)
        out[...] = o64.reshape(out.shape)
    return Step(run, [k])


@lowers("Svd", DTYPES, reason=F64_NOTE)
def lower_svd(node, ins, ctx) -> Step:
    return _lower_factor("Svd", "svd", ("U", "S", "Vt").index(node.attrs.part))


@lowers("Qr", DTYPES, reason=F64_NOTE)
def lower_qr(node, ins, ctx) -> Step:
    return _lower_factor("Qr", "qr", ("Q", "R").index(node.attrs.part))


def _lower_eigh(kind: str, batched: bool) -> Step:
    k = kernel()

    def run(out, a):
        if a.size == 0:
            return
        a3 = f64(a).reshape((-1,) + a.shape[-2:])
        for i in range(a3.shape[0]):
            if not np.isfinite(np.tril(a3[i])).all():
                where = f"[{i}]" if batched else ""
                raise OpError(f"(C2) {kind}: A{where} holds NaN or inf in its lower "
                              "triangle; its eigendecomposition is undefined")
        o2 = np.empty((a3.shape[0], out.shape[-1]))
        blas_serial(k.fn, a3, o2)
        out[...] = o2.reshape(out.shape)
    return Step(run, [k])


@lowers("Eigh", DTYPES, reason=F64_NOTE)
def lower_eigh(node, ins, ctx) -> Step:
    return _lower_eigh("Eigh", False)


@lowers("EighBatch", DTYPES, reason=F64_NOTE)
def lower_eigh_batch(node, ins, ctx) -> Step:
    return _lower_eigh("EighBatch", True)


def _lower_eigh_bwd() -> Step:
    k = kernel()
    fn = k.get("eigh_backward_batch")

    def run(out, fwd, bar):
        n = packed_n(fwd.shape[-1])
        f2, b2 = f64(fwd).reshape(-1, fwd.shape[-1]), f64(bar).reshape(-1, bar.shape[-1])
        if f2.shape[0] == 0 or n == 0:
            return
        o3 = np.empty((f2.shape[0], n, n))
        blas_serial(fn, f2, b2, n, o3)
        out[...] = o3.reshape(out.shape)
    return Step(run, [k])


@lowers("EighBackward", DTYPES, reason=F64_NOTE)
def lower_eigh_backward(node, ins, ctx) -> Step:
    return _lower_eigh_bwd()


@lowers("EighBatchBackward", DTYPES, reason=F64_NOTE)
def lower_eigh_batch_backward(node, ins, ctx) -> Step:
    return _lower_eigh_bwd()
