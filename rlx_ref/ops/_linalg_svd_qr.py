"""Svd and Qr of the linalg_decomp family: one factor of a thin factorization per node,
signs fixed after LAPACK (U's columns pivot-positive, V following; diag(R) >= 0)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..conformance.accuracy import reduction
from ..ir.shape import Dyn, Shape
from . import _linalg_decomp_samples as smp
from ._linalg_decomp_common import BLAS, DTYPES, F64_NOTE, FAMILY, finite, float_dtype, size_k
from ._linalg_decomp_math import pivot_signs
from .codec import Enum, attr
from .opdef import OpDef, register, want

SVD_PART = Enum("SvdPart", units=("U", "S", "Vt"))
QR_PART = Enum("QrPart", units=("Q", "R"))


@dataclass(frozen=True)
class SvdAttrs:
    part: str = attr(SVD_PART, doc="U [m, k], S [k] (descending) or Vt [k, n]; k = min(m, n)")


@dataclass(frozen=True)
class QrAttrs:
    part: str = attr(QR_PART, doc="Q [m, k] or R [k, n]; k = min(m, n)")


def _matrix(s: Shape, kind: str):
    want(s.rank == 2, f"(C1) {kind} needs A of rank 2 [m, n], got {s}")
    m, n = s.dims
    if isinstance(m, Dyn) or isinstance(n, Dyn):
        return m, n, None
    return m, n, min(m, n)


def _infer_svd(shapes, a):
    m, n, k = _matrix(shapes[0], "Svd")
    if k is None:
        return None
    dims = {"U": (m, k), "S": (k,), "Vt": (k, n)}[a.part]
    return Shape(dims, shapes[0].dtype)


def _infer_qr(shapes, a):
    m, n, k = _matrix(shapes[0], "Qr")
    if k is None:
        return None
    return Shape((m, k) if a.part == "Q" else (k, n), shapes[0].dtype)


def svd_parts(a64: np.ndarray):
    """(U, S, Vt) of the thin SVD with each U column's pivot entry positive (V follows)."""
    m, n = a64.shape
    k = min(m, n)
    if k == 0:
        return np.zeros((m, 0)), np.zeros(0), np.zeros((0, n))
    finite(a64, "Svd", "C3")
    u, s, vt = np.linalg.svd(a64, full_matrices=False)
    sg = pivot_signs(u)
    return u * sg, s, vt * sg[:, None]


def qr_parts(a64: np.ndarray):
    """(Q, R) of the thin QR with diag(R) >= 0 (a zero pivot keeps LAPACK's sign)."""
    m, n = a64.shape
    k = min(m, n)
    if k == 0:
        return np.zeros((m, 0)), np.zeros((0, n))
    finite(a64, "Qr", "C3")
    q, r = np.linalg.qr(a64, mode="reduced")
    sg = np.where(np.diag(r) < 0, -1.0, 1.0)
    return q * sg, r * sg[:, None]


def _ref_svd(ctx, a):
    u, s, vt = svd_parts(np.asarray(a, np.float64))
    return {"U": u, "S": s, "Vt": vt}[ctx.attrs.part].astype(ctx.out_np)


def _ref_qr(ctx, a):
    q, r = qr_parts(np.asarray(a, np.float64))
    return (q if ctx.attrs.part == "Q" else r).astype(ctx.out_np)


register(OpDef(
    kind="Svd", family=FAMILY, attrs=SvdAttrs, payload="struct", caps=BLAS,
    input_names=("A",), infer=_infer_svd,
    check=lambda s, a, o: float_dtype(s[0], "Svd", "C2"), reference=_ref_svd,
    doc="One factor of the thin SVD `A = U·diag(S)·Vt` of `A [m, n]`, k = min(m, n): "
        "`U [m, k]` with orthonormal columns, `S [k]` descending and >= 0, or `Vt [k, n]` "
        "with orthonormal rows. Sign convention (so the factors are unique for distinct "
        "nonzero singular values): in each column of U the pivot entry, the first whose "
        "magnitude is within 0.1% of the column's largest, is positive, and the matching "
        "row of Vt takes the same sign flip. Repeated or zero singular values leave U/Vt "
        "non-unique (S stays unique).",
    constraints=("C1: A is a matrix [m, n].",
                 "C2: A is f32 or f64; the factor has A's dtype.",
                 "C3: A is finite (checked at run time)."),
    samples=smp.svd_samples, dtypes=DTYPES,
    accuracy=reduction(8, size_k, "all", reason="S: c·n·eps·σ_max; U, Vt: ∝ eps·σ_max/gap, "
                                                "samples have gaps >= σ_max/8"),
    notes=F64_NOTE.format(what="gesdd") + " RLX returns gesdd's signs unchanged; rlx_ref "
          "fixes them by the pivot rule. RLX differentiates S only.",
))

register(OpDef(
    kind="Qr", family=FAMILY, attrs=QrAttrs, payload="struct", caps=BLAS,
    input_names=("A",), infer=_infer_qr,
    check=lambda s, a, o: float_dtype(s[0], "Qr", "C2"), reference=_ref_qr,
    doc="One factor of the thin QR `A = Q·R` of `A [m, n]`, k = min(m, n), by Householder "
        "reflections (LAPACK geqrf + orgqr): `Q [m, k]` with orthonormal columns or `R [k, n]` "
        "upper triangular (trapezoidal when m < n). Sign convention: diag(R) >= 0, the "
        "column of Q following each row of R, which makes both unique when A's first k "
        "columns are independent.",
    constraints=("C1: A is a matrix [m, n].",
                 "C2: A is f32 or f64; the factor has A's dtype.",
                 "C3: A is finite (checked at run time)."),
    samples=smp.qr_samples, dtypes=DTYPES,
    accuracy=reduction(8, size_k, "all", reason="Householder QR: |δQ| ≲ c·m·eps·κ(A)"),
    notes=F64_NOTE.format(what="geqrf + orgqr") + " RLX returns LAPACK's signs unchanged "
          "(diag(R) may be negative); rlx_ref makes diag(R) >= 0. RLX's forward accepts any "
          "m, n (k = min); its QR VJP requires m >= n.",
))
