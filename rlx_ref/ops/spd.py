"""Riemannian / SPD-manifold family: SPDNet's BiMap, ReEig, LogEig, SPD batch-norm, the
Karcher means, the AIRM log/exp maps and parallel transport, batched matrix functions, and
their backward kinds.

All f64, as RLX's CPU kernels (``rlx-cpu/src/spd.rs``, ``spd_kernels.rs``): matrix
functions are spectral (``V·diag(f(λ))·Vᵀ`` from LAPACK dsyevd, which reads the lower
triangle), adjoints are the Daleckii–Krein / Loewner formula. Formulas: ``_spd_math``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..conformance.accuracy import reduction
from ..ir.dtype import DType
from . import _spd_checks as chk
from ._spd_checks import KINDS  # noqa: F401 - the family's kinds, re-exported
from . import _spd_math as sm
from . import _spd_samples as smp
from .codec import F32, U32, Enum, attr
from .opdef import Caps, OpDef, register, want

F64 = (DType.F64,)
MATFNS = ("Logm", "Expm", "Sqrtm", "Invsqrtm")
SPD_MAT_FN = Enum("SpdMatFn", units=MATFNS)
F64_RULE = "C1: every operand is f64 (RLX's SPD kernels read and write f64 only)."
SYM_RULE = ("Matrices are read as symmetric: each eigendecomposition reads the lower "
            "triangle only (LAPACK dsyevd, uplo 'U' on RLX's row-major buffer).")
# Eigen-solver error grows with n and the conditioning; f64 keeps c·eps·n² far below any
# wrong answer (a wrong sign or branch is O(1)).
SPECTRAL_ACC = reduction(64, lambda a, s: max(x.numel or 1 for x in s), "all",
                         reason="eigendecomposition-based: K = the largest operand")


@dataclass(frozen=True)
class SpdEpsAttrs:
    eps: float = attr(F32, doc="the spectral floor: eigenvalues below it are raised to it")

    def __post_init__(self):
        object.__setattr__(self, "eps", F32.normalize(self.eps))


@dataclass(frozen=True)
class KarcherAttrs:
    iters: int = attr(U32, doc="the most fixed-point steps")
    tol: float = attr(F32, doc="stop after the step whose mean tangent ‖S̄‖_F is below it")

    def __post_init__(self):
        object.__setattr__(self, "tol", F32.normalize(self.tol))


@dataclass(frozen=True)
class MatFnAttrs:
    kind: str = attr(SPD_MAT_FN, doc="the spectral function: Logm, Expm, Sqrtm or Invsqrtm")


def _out(ctx, y):
    return np.asarray(y, np.float64).astype(ctx.out_np)


def spd_op(kind, doc, *, arity, names, infer, ref, samples, attrs=None, extra=(), notes="",
           family="spd"):
    """Register one SPD kind: f64 only, no caps (RLX's table), the spectral contract."""
    payload = "unit" if attrs is None else "struct"
    register(OpDef(
        kind=kind, family=family, doc=doc, attrs=attrs, payload=payload, arity=arity,
        caps=Caps.NONE, input_names=names, infer=infer, reference=ref,
        check=lambda s, a, o: infer(s, a) and None,
        constraints=(F64_RULE,) + tuple(extra), samples=samples, dtypes=F64,
        accuracy=SPECTRAL_ACC, notes=notes))


# ── forward kinds ────────────────────────────────────────────────────────

def _infer_bimap(s, a):
    chk.f64_only(s, "BiMap", ("w", "x"))
    w, x = s
    want(w.rank == 2, f"(C2) BiMap operand `w` must be a matrix [m, n], got {w}")
    n = chk.square(x, "BiMap", "x", "C2")
    want(chk.agree(w.dims[1], n), f"(C2) BiMap: `w` {w.dims_text()} has n={w.dims[1]} "
                                  f"columns but `x` is {x.dims_text()}")
    return chk.f64((w.dims[0], w.dims[0]))


spd_op("BiMap", "SPDNet's bilinear map `Y = W·X·Wᵀ`: `w [m, n]`, `x [n, n]` -> `[m, m]` "
     "(SPD when W has full row rank; W's Stiefel constraint is the optimizer's).",
     arity=2, names=("w", "x"), infer=_infer_bimap,
     ref=lambda ctx, w, x: _out(ctx, w @ x @ w.T), samples=smp.bimap,
     extra=("C2: w is [m, n] and x is [n, n].",))


def _infer_packed(kind):
    def infer(s, a):
        chk.f64_only(s, kind, ("x",))
        n = chk.square(s[0], kind, "x", "C2")
        return chk.f64((n if isinstance(n, chk.Dyn) else 2 * n * n + n,))
    return infer


def _ref_packed(f_of_eps):
    return lambda ctx, x: _out(ctx, sm.spectral_forward_packed(x, f_of_eps(ctx.attrs.eps)))


_PACKED = ("The output is packed `[Y (n²) ∥ λ (n) ∥ U (n²)]` so the backward reuses the "
           "eigendecomposition: Y row-major, λ ascending, U row-major with row k the "
           "eigenvector of λ[k], its pivot entry positive (the first entry within 0.1% of "
           "the row's largest magnitude, Eigh's rule). " + SYM_RULE)
_PACKED_NOTES = ("RLX leaves U's signs to LAPACK; rlx_ref fixes them (pivot entry "
                 "positive) so the packed output is unique. Unlike Eigh's U (column j the "
                 "eigenvector j), this U is RLX's dsyevd buffer as is: row k eigenvector k. "
                 "Where eigenvalues repeat, U is not unique; samples with repeats are "
                 "diagonal, where dsyevd returns the unit vectors.")
spd_op("ReEig", "SPDNet's eigenvalue rectifier `Y = U·max(ε, Σ)·Uᵀ` of `x [n, n]` (`X = U Σ "
     "Uᵀ`). " + _PACKED, arity=1, names=("x",), attrs=SpdEpsAttrs,
     infer=_infer_packed("ReEig"),
     ref=_ref_packed(lambda e: (lambda l: np.maximum(l, e))), samples=smp.reeig,
     extra=("C2: x is [n, n]; the output is [2n² + n].",), notes=_PACKED_NOTES)
spd_op("LogEig", "SPDNet's matrix log `Y = U·log(max(ε, Σ))·Uᵀ` of `x [n, n]`. " + _PACKED,
     arity=1, names=("x",), attrs=SpdEpsAttrs, infer=_infer_packed("LogEig"),
     ref=_ref_packed(lambda e: (lambda l: np.log(np.maximum(l, e)))), samples=smp.logeig,
     extra=("C2: x is [n, n]; the output is [2n² + n].",), notes=_PACKED_NOTES)


def _infer_bn(s, a):
    chk.f64_only(s, "SpdBatchNorm", ("x", "mean", "g"))
    b, n = chk.stack(s[0], "SpdBatchNorm", "x", "C2")
    chk.same_n("SpdBatchNorm", "C2", x=n, mean=chk.square(s[1], "SpdBatchNorm", "mean", "C2"),
               g=chk.square(s[2], "SpdBatchNorm", "g", "C2"))
    return s[0]


def _ref_bn(ctx, x, mean, g):
    ms, gs = sm.bn_roots(mean, g, ctx.attrs.eps)
    return _out(ctx, gs @ (ms @ x @ ms) @ gs)


spd_op("SpdBatchNorm", "Riemannian batch-norm transport (Brooks et al. 2019): `Y_i = G^½·"
     "(M^-½·X_i·M^-½)·G^½` for `x [B, n, n]`, the detached Fréchet mean `mean [n, n]` and "
     "the SPD bias `g [n, n]`; both spectra are floored at `eps`. " + SYM_RULE,
     arity=3, names=("x", "mean", "g"), attrs=SpdEpsAttrs, infer=_infer_bn, ref=_ref_bn,
     samples=smp.batch_norm, extra=("C2: x is [B, n, n]; mean and g are [n, n].",))


def _infer_karcher(weighted):
    kind = "SpdKarcherMeanWeighted" if weighted else "SpdKarcherMean"

    def infer(s, a):
        chk.f64_only(s, kind, ("x", "weights")[:len(s)])
        b, n = chk.stack(s[0], kind, "x", "C2")
        if weighted:
            w = s[1]
            want(w.rank == 1 and chk.agree(w.dims[0], b),
                 f"(C3) {kind} operand `weights` must be [B] with x's B={b}, got {w}")
        return chk.f64((n, n))
    return infer


def _ref_karcher(ctx, x, w=None):
    wbar = None if w is None else sm.karcher_weights(w, len(x))
    return _out(ctx, sm.karcher_mean(x, wbar, ctx.attrs.iters, ctx.attrs.tol))


_KARCHER = ("Fréchet / Karcher mean under the affine-invariant metric of `x [B, n, n]` -> "
            "`[n, n]`, as RLX iterates it: `M₀ = Σ w̄ᵢ·Xᵢ`; then up to `iters` times `S̄ = "
            "Σ w̄ᵢ·logm(M^-½·Xᵢ·M^-½)`, `M ← M^½·expm(S̄)·M^½`, stopping after the step "
            "whose `‖S̄‖_F < tol`. logm and M^-½ floor the spectrum at 1e-12, M^½ at 0. "
            "{w} Non-differentiable (a detached statistic). " + SYM_RULE)
spd_op("SpdKarcherMean", _KARCHER.format(w="Weights are uniform (`w̄ᵢ = 1/B`; B = 0 gives "
                                         "zeros)."),
     arity=1, names=("x",), attrs=KarcherAttrs, infer=_infer_karcher(False),
     ref=_ref_karcher, samples=smp.karcher, extra=("C2: x is [B, n, n].",))
spd_op("SpdKarcherMeanWeighted", _KARCHER.format(
     w="`w̄ = weights/Σweights`; when |Σweights| < 1e-300 they are uniform."),
     arity=2, names=("x", "weights"), attrs=KarcherAttrs, infer=_infer_karcher(True),
     ref=_ref_karcher, samples=smp.karcher_weighted,
     extra=("C2: x is [B, n, n].", "C3: weights is [B]."))

spd_op("SpdLogMap", "The AIRM Riemannian log at a base point: `Log_P(X) = P^½·logm(P^-½·X·"
     "P^-½)·P^½` for `base [n, n]` and `x [n, n]` -> the tangent vector `[n, n]`. "
     "P^½ floors at 0, P^-½ and logm at 1e-12. " + SYM_RULE,
     arity=2, names=("base", "x"), infer=lambda s, a: chk.maps("SpdLogMap", ("base", "x"), s),
     ref=lambda ctx, p, x: _out(ctx, sm.log_map(p, x)), samples=smp.log_map,
     extra=("C2: base and x are [n, n].",))
spd_op("SpdExpMap", "The AIRM Riemannian exp at a base point: `Exp_P(V) = P^½·expm(P^-½·V·"
     "P^-½)·P^½` for `base [n, n]` and the symmetric tangent `v [n, n]` -> `[n, n]`. "
     + SYM_RULE,
     arity=2, names=("base", "v"), infer=lambda s, a: chk.maps("SpdExpMap", ("base", "v"), s),
     ref=lambda ctx, p, v: _out(ctx, sm.exp_map(p, v)), samples=smp.exp_map,
     extra=("C2: base and v are [n, n].",))
spd_op("SpdParallelTransport", "AIRM parallel transport of the tangent `v` from `from` to "
     "`to` (all `[n, n]`): `sym(E·V·Eᵀ)`, `E = P^½·(P^-½·Q·P^-½)^½·P^-½` (= (Q·P⁻¹)^½). "
     + SYM_RULE,
     arity=3, names=("from", "to", "v"),
     infer=lambda s, a: chk.maps("SpdParallelTransport", ("from", "to", "v"), s),
     ref=lambda ctx, p, q, v: _out(ctx, sm.parallel_transport(p, q, v)),
     samples=smp.transport, extra=("C2: from, to and v are [n, n].",))


def _ref_matfn(ctx, x):
    f = sm.MATFN[ctx.attrs.kind][0]
    return _out(ctx, np.stack([sm.matrix_fn(xi, f) for xi in x]) if len(x) else x)


spd_op("SpdMatrixFnBatch", "A spectral matrix function of each matrix of `x [B, n, n]` -> "
     "`[B, n, n]`: Logm `log(max(λ, 1e-12))`, Expm `exp(λ)`, Sqrtm `√max(λ, 0)`, Invsqrtm "
     "`1/√max(λ, 1e-12)`, applied as `V·diag(f(λ))·Vᵀ`. " + SYM_RULE,
     arity=1, names=("x",), attrs=MatFnAttrs,
     infer=lambda s, a: chk.batch_fn("SpdMatrixFnBatch", ("x",), s),
     ref=_ref_matfn, samples=smp.matrix_fn, extra=("C2: x is [B, n, n].",))
