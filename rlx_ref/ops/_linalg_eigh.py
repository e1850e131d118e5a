"""Symmetric eigendecomposition kinds of the linalg_decomp family: Eigh, EighBatch and
their VJPs EighBackward, EighBatchBackward (RLX ``rlx-cpu/src/spd.rs``: ``eigh_packed``,
``eigh_backward_packed``).

The forward packs ``[λ (n) ascending ∥ U (n²) row-major]``, column j of U eigenvector j,
so ``A = U·diag(λ)·Uᵀ``; the backward reads that packed forward and the cotangent of it.
"""
from __future__ import annotations

import numpy as np

from ..conformance.accuracy import reduction
from ..ir.shape import Dyn, Shape
from . import _linalg_decomp_samples as smp
from ._linalg_decomp_math import eigh_backward, eigh_packed, packed_n
from ._linalg_decomp_common import BLAS, DTYPES, FAMILY, float_dtype, size_k
from .opdef import OpDef, OpError, register, want

_NOTES = ("RLX's CPU kernels run F64 only (LAPACK dsyevd); rlx_ref also accepts F32, "
          "computed in f64 and rounded once.")
_SIGNS = ("RLX returns dsyevd's eigenvector signs unchanged; rlx_ref fixes them by the "
          "pivot rule so the output is unique. RLX's dsyevd (uplo 'U' on the column-major "
          "view) reads the row-major lower triangle, as here; it ignores dsyevd's info, so a "
          "non-finite A gives whatever LAPACK leaves, where rlx_ref raises an error.")


def _static(*dims) -> bool:
    return not any(isinstance(d, Dyn) for d in dims)


def _infer_eigh(batched: bool):
    kind = "EighBatch" if batched else "Eigh"
    lead = 1 if batched else 0

    def infer(shapes, a):
        s = shapes[0]
        want(s.rank == 2 + lead, f"(C1) {kind} needs A of rank {2 + lead} "
                                 f"{'[B, n, n]' if batched else '[n, n]'}, got {s}")
        n, n2 = s.dims[lead], s.dims[lead + 1]
        want(n == n2 or not _static(n, n2), f"(C1) {kind} needs square matrices, got "
                                            f"{s.dims_text()}")
        if not _static(*s.dims):
            return None
        return Shape(s.dims[:lead] + (n * n + n,), s.dtype)
    return infer


def _infer_eigh_bwd(batched: bool):
    kind = "EighBatchBackward" if batched else "EighBackward"
    lead = 1 if batched else 0

    def infer(shapes, a):
        fwd, bar = shapes
        want(fwd.rank == 1 + lead, f"(C1) {kind} needs the packed forward of rank "
                                   f"{1 + lead}, got {fwd}")
        want(fwd.dims == bar.dims or not (fwd.is_static and bar.is_static),
             f"(C2) {kind}: the cotangent {bar.dims_text()} must have the packed forward's "
             f"shape {fwd.dims_text()}")
        if not fwd.is_static:
            return None
        n = packed_n(fwd.dims[-1])
        want(n is not None, f"(C1) {kind}: the packed length {fwd.dims[-1]} is not n² + n "
                            "for any n")
        return Shape(fwd.dims[:lead] + (n, n), fwd.dtype)
    return infer


def _check_dtypes(kind: str, names: tuple):
    def check(shapes, a, out):
        for s, name in zip(shapes, names):
            float_dtype(s, kind, "C3", name)
        want(len({s.dtype for s in shapes}) == 1, f"(C3) {kind} operands must share one "
                                                  "dtype")
    return check


def _eigh_one(a64: np.ndarray, kind: str, where: str = "") -> np.ndarray:
    low = np.tril(a64)
    if not np.isfinite(low).all():
        raise OpError(f"(C2) {kind}: A{where} holds NaN or inf in its lower triangle; its "
                      "eigendecomposition is undefined")
    return eigh_packed(a64)


def _ref_eigh(ctx, a):
    return _eigh_one(np.asarray(a, np.float64), "Eigh").astype(ctx.out_np)


def _ref_eigh_batch(ctx, a):
    a64 = np.asarray(a, np.float64)
    n = a64.shape[1]
    out = np.empty((a64.shape[0], n * n + n))
    for i in range(a64.shape[0]):
        out[i] = _eigh_one(a64[i], "EighBatch", f"[{i}]")
    return out.astype(ctx.out_np)


def _ref_eigh_bwd(ctx, fwd, bar):
    f, b = np.asarray(fwd, np.float64), np.asarray(bar, np.float64)
    n = packed_n(f.shape[-1])
    with np.errstate(all="ignore"):
        if f.ndim == 1:
            return eigh_backward(f, b, n).astype(ctx.out_np)
        out = np.stack([eigh_backward(f[i], b[i], n) for i in range(f.shape[0])]) \
            if f.shape[0] else np.zeros((0, n, n))
    return out.astype(ctx.out_np)


_FWD_DOC = (
    "Symmetric eigendecomposition `A = U·diag(λ)·Uᵀ` of {what}, packed per matrix as "
    "`[λ (n) ascending ∥ U (n²) row-major]` (column j of U is the unit eigenvector of "
    "λ_j), so the output is {out}. Only the lower triangle of A (with the diagonal) is "
    "read. Sign convention: each eigenvector's pivot entry, the first whose magnitude is "
    "within 0.1% of its largest, is positive, which makes U unique when the eigenvalues "
    "are distinct; a repeated eigenvalue leaves its eigenvectors any orthonormal basis of "
    "the eigenspace (λ stays unique)."
)
_BWD_DOC = (
    "VJP of {fwd}: from the packed forward `fwd = [λ ∥ U]` and its cotangent "
    "`bar = [λ̄ ∥ Ū]` (same layout{batch}), `Ā = sym(U·(diag(λ̄) + F∘(Uᵀ·Ū))·Uᵀ)` with "
    "`sym(G) = (G + Gᵀ)/2`, `F_ij = 1/(λ_j − λ_i)` for i ≠ j and 0 on the diagonal. A pair "
    "with `|λ_j − λ_i| <= max(1, max|λ|)·1e-9` (a repeated eigenvalue, where the "
    "eigenvector gradient is undefined) contributes 0. The output is {out}."
)
_FWD_CONSTRAINTS = ("C1: A is {shape} (square matrices).",
                    "C2: A's lower triangle is finite (checked at run time).",
                    "C3: A is f32 or f64; the output has its dtype.")
_BWD_CONSTRAINTS = ("C1: fwd is {shape} with L = n² + n for an integer n.",
                    "C2: bar has fwd's shape.",
                    "C3: fwd and bar share one dtype, f32 or f64; it is Ā's.")
_EIGH_ACC = reduction(8, size_k, "all", reason="λ: c·n·eps·‖A‖; U: ∝ eps·‖A‖/gap, sample "
                                                "gaps >= 1 with ‖A‖ <= 4n")
_BWD_ACC = reduction(8, lambda a, s: packed_n(s[0].dims[-1]) or 1, "all",
                     reason="three n×n products with 1/gap weights; sample gaps >= 1")

register(OpDef(
    kind="Eigh", family=FAMILY, caps=BLAS, input_names=("A",), infer=_infer_eigh(False),
    check=_check_dtypes("Eigh", ("A",)), reference=_ref_eigh,
    doc=_FWD_DOC.format(what="a symmetric `A [n, n]`", out="`[n² + n]`"),
    constraints=tuple(c.format(shape="[n, n]") for c in _FWD_CONSTRAINTS),
    samples=smp.eigh_samples, dtypes=DTYPES, accuracy=_EIGH_ACC,
    notes=_NOTES + " " + _SIGNS,
))

register(OpDef(
    kind="EighBatch", family=FAMILY, caps=BLAS, input_names=("A",),
    infer=_infer_eigh(True), check=_check_dtypes("EighBatch", ("A",)),
    reference=_ref_eigh_batch,
    doc=_FWD_DOC.format(what="every matrix of `A [B, n, n]`", out="`[B, n² + n]`"),
    constraints=tuple(c.format(shape="[B, n, n]") for c in _FWD_CONSTRAINTS),
    samples=smp.eigh_batch_samples, dtypes=DTYPES, accuracy=_EIGH_ACC,
    notes=_NOTES + " " + _SIGNS,
))

register(OpDef(
    kind="EighBackward", family=FAMILY, arity=2, caps=BLAS, input_names=("fwd", "bar"),
    infer=_infer_eigh_bwd(False), check=_check_dtypes("EighBackward", ("fwd", "bar")),
    reference=_ref_eigh_bwd,
    doc=_BWD_DOC.format(fwd="Eigh", batch="", out="the symmetric `Ā [n, n]`"),
    constraints=tuple(c.format(shape="[L]") for c in _BWD_CONSTRAINTS),
    samples=smp.eigh_bwd_samples(False), dtypes=DTYPES, accuracy=_BWD_ACC,
    notes=_NOTES + " Emitted by RLX's Eigh VJP with the forward node's own output as fwd.",
))

register(OpDef(
    kind="EighBatchBackward", family=FAMILY, arity=2, caps=BLAS,
    input_names=("fwd", "bar"), infer=_infer_eigh_bwd(True),
    check=_check_dtypes("EighBatchBackward", ("fwd", "bar")), reference=_ref_eigh_bwd,
    doc=_BWD_DOC.format(fwd="EighBatch", batch=", `[B, L]`, one row per matrix",
                        out="`Ā [B, n, n]`, each matrix symmetric"),
    constraints=tuple(c.format(shape="[B, L]") for c in _BWD_CONSTRAINTS),
    samples=smp.eigh_bwd_samples(True), dtypes=DTYPES, accuracy=_BWD_ACC,
    notes=_NOTES,
))
