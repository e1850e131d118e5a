"""Shared checks and constants of the linalg_decomp family (``linalg_decomp``,
``_linalg_svd_qr``, ``_linalg_eigh``)."""
from __future__ import annotations

import numpy as np

from ..ir.dtype import DType
from ..ir.shape import Dyn, Shape
from .opdef import Caps, want

FAMILY = "linalg_decomp"
BLAS = Caps.BLAS | Caps.FUSION_BOUNDARY
DTYPES = (DType.F32, DType.F64)
F64_NOTE = ("RLX's CPU lowers F32 only and computes in f64 (LAPACK {what}), rounding the "
            "result to f32; rlx_ref also accepts F64.")


def float_dtype(s: Shape, kind: str, cid: str, what: str = "A") -> None:
    """``s`` is f32 or f64 (the dtypes RLX's LAPACK paths run)."""
    want(s.dtype in DTYPES, f"({cid}) {kind} needs {what} of dtype f32 or f64, got {s.dtype}; "
                            "insert a Cast")


def square(s: Shape, kind: str, cid: str = "C1"):
    """n of a square matrix ``s`` [n, n] (a Dyn when it cannot be told)."""
    want(s.rank == 2, f"({cid}) {kind} needs A of rank 2 [n, n], got {s}")
    n, n2 = s.dims
    want(n == n2 or isinstance(n, Dyn) or isinstance(n2, Dyn),
         f"({cid}) {kind} needs a square A, got {s.dims_text()}")
    return n2 if isinstance(n, Dyn) else n


def finite(a: np.ndarray, kind: str, cid: str) -> None:
    """A run-time check: every entry of ``a`` is finite."""
    want(bool(np.isfinite(a).all()), f"({cid}) {kind}: A holds NaN or inf; a factorization "
                                     "of a non-finite matrix is undefined")


def size_k(attrs, shapes):
    """Accuracy K (``(attrs, shapes)``): the largest static dim of the first operand."""
    dims = [d for d in shapes[0].dims if not isinstance(d, Dyn)]
    return max(dims + [1])
