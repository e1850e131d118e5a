"""Backward family, SPD manifold: the adjoints of ReEig, LogEig, SpdBatchNorm, the AIRM
maps, parallel transport and SpdMatrixFnBatch.

Operand orders are those RLX's autodiff emits (``rlx-ir/src/ad.rs``) and its CPU kernels
read; every spectral adjoint is Daleckii–Krein: ``dX = sym(U·(P ⊙ Uᵀ·sym(dY)·U)·Uᵀ)`` with
the Loewner matrix ``P[a,b] = (f(λa) − f(λb))/(λa − λb)``, or ``f'(λa)`` where
``|λa − λb| ≤ 1e-9·max(1, max|λ|)``. Formulas: ``_spd_math``.
"""
from __future__ import annotations

import numpy as np

from . import _spd_checks as chk
from . import _spd_math as sm
from . import _spd_samples_bwd as smp
from .opdef import want
from .spd import SYM_RULE, MatFnAttrs, SpdEpsAttrs, _out, spd_op

_LOEWNER = ("Daleckii–Krein adjoint: `dX = sym(U·(P ⊙ Uᵀ·sym(dY)·U)·Uᵀ)`, `P[a,b] = "
            "(f(λa) − f(λb))/(λa − λb)`, or `f'(λa)` where `|λa − λb| ≤ 1e-9·max(1, "
            "max|λ|)`.")


def _ref_spectral(f, fp):
    def ref(ctx, lam, u, dy):
        n = lam.shape[0]
        eps = ctx.attrs.eps
        v, g = u.reshape(n, n), dy.reshape(n, n)
        return _out(ctx, sm.spectral_backward(lam, v, g, f(eps), fp(eps)))
    return ref


_SPECTRAL_NOTES = ("RLX's op.rs documents the operands as (X, dY); its autodiff and CPU "
                   "kernel use (λ, U, dY) from the packed forward, which rlx_ref follows.")
_SPECTRAL_RULE = ("C2: lam is [n]; u and dy hold n² elements each (read flat, row-major; "
                  "u's row k is the eigenvector of lam[k]).")
spd_op("ReEigBackward", "The gradient of ReEig w.r.t. x from its packed forward's "
       "eigenvalues `lam [n]` and eigenvectors `u [n²]` and the cotangent `dy [n²]` of Y: "
       "`dx [n, n]` with `f(λ) = max(λ, ε)`, `f'(λ) = [λ > ε]`. " + _LOEWNER,
       arity=3, names=("lam", "u", "dy"), attrs=SpdEpsAttrs, family="backward",
       infer=lambda s, a: chk.spectral_bwd("ReEigBackward", s),
       ref=_ref_spectral(lambda e: (lambda l: np.maximum(l, e)),
                         lambda e: (lambda l: (l > e).astype(np.float64))),
       samples=smp.reeig_bwd, extra=(_SPECTRAL_RULE,), notes=_SPECTRAL_NOTES)
spd_op("LogEigBackward", "The gradient of LogEig w.r.t. x from `lam [n]`, `u [n²]` and "
       "`dy [n²]`: `dx [n, n]` with `f(λ) = log(max(λ, ε))`, `f'(λ) = 1/max(λ, ε)`. "
       + _LOEWNER,
       arity=3, names=("lam", "u", "dy"), attrs=SpdEpsAttrs, family="backward",
       infer=lambda s, a: chk.spectral_bwd("LogEigBackward", s),
       ref=_ref_spectral(lambda e: (lambda l: np.log(np.maximum(l, e))),
                         lambda e: (lambda l: 1.0 / np.maximum(l, e))),
       samples=smp.logeig_bwd, extra=(_SPECTRAL_RULE,),
       notes=_SPECTRAL_NOTES + " RLX's f' = 1/max(λ, ε) is not the derivative of log∘max "
       "(0) for eigenvalues below ε; rlx_ref keeps RLX's formula (tests/test_ops_spd.py "
       "measures the difference against finite differences).")


def _infer_bn_x(s, a):
    kind = "SpdBatchNormBackwardX"
    chk.f64_only(s, kind, ("mean", "g", "dy"))
    b, n = chk.stack(s[2], kind, "dy", "C2")
    chk.same_n(kind, "C2", dy=n, mean=chk.square(s[0], kind, "mean", "C2"),
               g=chk.square(s[1], kind, "g", "C2"))
    return s[2]


def _ref_bn_x(ctx, mean, g, dy):
    ms, gs = sm.bn_roots(mean, g, ctx.attrs.eps)
    q = ms @ gs
    return _out(ctx, sm.sym(q @ dy @ q.T))


spd_op("SpdBatchNormBackwardX", "The gradient of SpdBatchNorm w.r.t. x (mean detached) "
       "from `mean [n, n]`, `g [n, n]` and `dy [B, n, n]`: `dx_i = sym(Q·dy_i·Qᵀ)`, `Q = "
       "M^-½·G^½` (both spectra floored at eps). " + SYM_RULE,
       arity=3, names=("mean", "g", "dy"), attrs=SpdEpsAttrs, family="backward",
       infer=_infer_bn_x, ref=_ref_bn_x, samples=smp.bn_x,
       extra=("C2: mean and g are [n, n]; dy is [B, n, n].",))


def _infer_bn_g(s, a):
    kind = "SpdBatchNormBackwardG"
    chk.f64_only(s, kind, ("x", "mean", "g", "dy"))
    b, n = chk.stack(s[0], kind, "x", "C2")
    b2, n2 = chk.stack(s[3], kind, "dy", "C2")
    want(chk.agree(b, b2), f"(C2) {kind}: x has B={b} but dy has B={b2}")
    chk.same_n(kind, "C2", x=n, dy=n2, mean=chk.square(s[1], kind, "mean", "C2"),
               g=chk.square(s[2], kind, "g", "C2"))
    return s[2]


spd_op("SpdBatchNormBackwardG", "The gradient of SpdBatchNorm w.r.t. the bias g (mean "
       "detached) from `x [B, n, n]`, `mean`, `g` and `dy [B, n, n]`: `D = Σᵢ (dyᵢ·G^½·Cᵢ + "
       "Cᵢ·G^½·dyᵢ)`, `Cᵢ = M^-½·xᵢ·M^-½`, pushed through the square root's Daleckii–Krein "
       "adjoint (`f = √max(λ, eps)`, `f' = ½/√max(λ, eps)`). " + SYM_RULE,
       arity=4, names=("x", "mean", "g", "dy"), attrs=SpdEpsAttrs, family="backward",
       infer=_infer_bn_g, samples=smp.bn_g,
       notes="As RLX: f' = ½/√max(λ, eps) also below eps, where √max's derivative is 0.",
       ref=lambda ctx, x, m, g, dy: _out(ctx, sm.bn_backward_g(x, m, g, dy, ctx.attrs.eps)),
       extra=("C2: x and dy are [B, n, n]; mean and g are [n, n].",))


def _ref_map_bwd(f, fp):
    return lambda ctx, p, x, dy: _out(ctx, np.stack(sm.map_backward(p, x, dy, f, fp)))


_MAP_BWD = ("The gradients of {fwd} w.r.t. both operands from `base`, `{arg}` and the "
            "cotangent `dy` (all `[n, n]`), packed `[d_base ∥ d_{arg}]` as `[2, n, n]`. With "
            "`A = P^½`, `W = P^-½`, `M = W·{arg}·W`: `M̄ = DK_{f}(M, A·sym(dy)·A)`, "
            "`d_{arg} = sym(W·M̄·W)`, `d_base = sym(DK_√(P, T + Tᵀ) + DK_-½(P, S + Sᵀ))` with "
            "`T = sym(dy)·A·{f}(M)`, `S = M̄·W·{arg}`. DK is the Daleckii–Krein adjoint "
            "(Loewner tolerance 1e-9·max(1, max|λ|)). " + SYM_RULE)
spd_op("SpdLogMapBackward", _MAP_BWD.format(fwd="SpdLogMap", arg="x", f="log"),
       arity=3, names=("base", "x", "dy"), family="backward",
       infer=lambda s, a: chk.packed_grads("SpdLogMapBackward", ("base", "x", "dy"), s, 2),
       ref=_ref_map_bwd(sm.log_f, sm.log_fp), samples=smp.log_map_bwd,
       extra=("C2: base, x and dy are [n, n]; the output is [2, n, n].",))
spd_op("SpdExpMapBackward", _MAP_BWD.format(fwd="SpdExpMap", arg="v", f="exp"),
       arity=3, names=("base", "v", "dy"), family="backward",
       infer=lambda s, a: chk.packed_grads("SpdExpMapBackward", ("base", "v", "dy"), s, 2),
       ref=_ref_map_bwd(np.exp, np.exp), samples=smp.exp_map_bwd,
       extra=("C2: base, v and dy are [n, n]; the output is [2, n, n].",))
spd_op("SpdParallelTransportBackward", "The gradients of SpdParallelTransport w.r.t. "
       "`from`, `to` and `v` from those and the cotangent `dy` (all `[n, n]`), packed "
       "`[d_from ∥ d_to ∥ d_v]` as `[3, n, n]`. With `A = P^½`, `W = P^-½`, `S = (W·Q·W)^½`, "
       "`E = A·S·W`, `G = sym(dy)`: `d_v = sym(Eᵀ·G·E)`; `Ē = 2·G·E·v`; `M̄ = DK_√(W·Q·W, "
       "A·Ē·W)`; `d_to = sym(W·M̄·W)`; `d_from = sym(DK_√(P, Ē·W·S) + DK_-½(P, S·A·Ē + "
       "M̄·W·Q + (M̄·W·Q)ᵀ))`. " + SYM_RULE,
       arity=4, names=("from", "to", "v", "dy"), family="backward",
       infer=lambda s, a: chk.packed_grads("SpdParallelTransportBackward",
                                           ("from", "to", "v", "dy"), s, 3),
       ref=lambda ctx, p, q, v, dy: _out(ctx, np.stack(sm.transport_backward(p, q, v, dy))),
       samples=smp.transport_bwd,
       extra=("C2: from, to, v and dy are [n, n]; the output is [3, n, n].",))


def _ref_matfn_bwd(ctx, x, dy):
    f, fp = sm.MATFN[ctx.attrs.kind]
    out = [sm.spectral_backward(*sm.eigh(xi), gi, f, fp) for xi, gi in zip(x, dy)]
    return _out(ctx, np.stack(out) if out else np.zeros(x.shape))


spd_op("SpdMatrixFnBatchBackward", "The gradient of SpdMatrixFnBatch w.r.t. x from `x [B, "
       "n, n]` and `dy [B, n, n]`, per matrix: Logm `f' = 1/max(λ, 1e-12)`, Expm `exp(λ)`, "
       "Sqrtm `½/√max(λ, 1e-12)`, Invsqrtm `−½·max(λ, 1e-12)^-1.5` (f as the forward). "
       + _LOEWNER + " " + SYM_RULE,
       arity=2, names=("x", "dy"), attrs=MatFnAttrs, family="backward",
       infer=lambda s, a: chk.batch_fn("SpdMatrixFnBatchBackward", ("x", "dy"), s),
       ref=_ref_matfn_bwd, samples=smp.matrix_fn_bwd,
       extra=("C2: x and dy are [B, n, n].",))
