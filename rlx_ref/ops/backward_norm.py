"""Backward family, normalizations: the gradients of LayerNorm, RmsNorm, GroupNorm and
BatchNormInference with respect to their input and affine vectors.

Operand orders and payloads are RLX's (``rlx-ir/src/ops/backward.rs``). Statistics are
recomputed from ``x`` (nothing is saved by the forward pass), in f32 (f64 if an operand
is f64; 16-bit floats are rounded once at the end), as the forward kinds. Each kind's
formula is one function of a math namespace ``m`` (see ``_backward_math``) kept in
``RULES``; the reference and the decomposition both evaluate it.
"""
from __future__ import annotations

import math

import numpy as np

from ..conformance.accuracy import reduction, ulp
from ..ir.dtype import DType
from ..ir.shape import Dyn, Shape
from ._backward_math import NUMPY, work_arrays
from ._backward_norm_checks import (
    check_axis_kind,
    check_bn_kind,
    check_group_kind,
    groups_divide,
)
from ._backward_norm_samples import axis_samples, bn_samples, group_samples
from .normalization import AxisNormAttrs, EpsAttrs, GroupNormAttrs
from .opdef import Caps, OpDef, register, want

FLOATS = (DType.F32, DType.F64, DType.F16, DType.BF16)


# ── the formulas (x̂ = (x - mean)/σ, σ = sqrt(var + eps), g = dy·gamma) ────────

def _along(m, vec, axis: int, x):
    """A per-feature vector shaped to broadcast along ``axis`` of ``x``; re-checks its
    width at run time, where the verifier could not (dynamic dims)."""
    dims = m.dims(x)
    size = dims[axis]
    n = math.prod(m.dims(vec))
    want(n == size, f"(C3) a per-feature vector has {n} elements, expected {size} (the "
                    f"normalised axis)")
    shape = [1] * len(dims)
    shape[axis] = size
    return m.reshape(vec, shape)


def _normalized(m, x, axes, eps):
    """(x̂, 1/σ) over ``axes`` with the biased variance: the forward kinds' statistics."""
    mean = m.mean(x, axes)
    d = x - mean
    inv_std = 1.0 / m.act("Sqrt", m.mean(d * d, axes) + eps)
    return d * inv_std, inv_std


def _input_grad(m, xh, inv_std, g, axes):
    """dx of a mean-and-variance normalization: (g - mean(g) - x̂·mean(g·x̂)) / σ."""
    return inv_std * (g - m.mean(g, axes) - xh * m.mean(g * xh, axes))


def _all_but(rank: int, axis: int) -> tuple:
    """The axes of a rank-``rank`` tensor other than ``axis``."""
    return tuple(i for i in range(rank) if i != axis)


def ln_input(m, a, x, gamma, dy):
    """LayerNorm dx over the feature axis ``a.axis``."""
    ax = a.axis % len(m.dims(x))
    xh, inv_std = _normalized(m, x, (ax,), a.eps)
    return _input_grad(m, xh, inv_std, dy * _along(m, gamma, ax, x), (ax,))


def ln_gamma(m, a, x, dy):
    """LayerNorm dgamma: Σ dy·x̂ over every other axis (kept as size 1)."""
    ax = a.axis % len(m.dims(x))
    xh, _ = _normalized(m, x, (ax,), a.eps)
    return m.sum(dy * xh, _all_but(len(m.dims(x)), ax))


def _rms_scale(m, x, axes, eps):
    """1/r with r = sqrt(mean(x²) + eps)."""
    return 1.0 / m.act("Sqrt", m.mean(x * x, axes) + eps)


def rms_input(m, a, x, gamma, beta, dy):
    """(g - x·mean(g·x)/r²) / r."""
    ax = a.axis % len(m.dims(x))
    inv_r = _rms_scale(m, x, (ax,), a.eps)
    g = dy * _along(m, gamma, ax, x)
    return (g - x * m.mean(g * x, (ax,)) * (inv_r * inv_r)) * inv_r


def rms_gamma(m, a, x, gamma, beta, dy):
    """RmsNorm dgamma: Σ dy·x/r over every other axis."""
    ax = a.axis % len(m.dims(x))
    return m.sum(dy * x * _rms_scale(m, x, (ax,), a.eps), _all_but(len(m.dims(x)), ax))


def rms_beta(m, a, x, gamma, beta, dy):
    """RmsNorm dbeta: Σ dy over every other axis."""
    ax = a.axis % len(m.dims(dy))
    return m.sum(dy, _all_but(len(m.dims(dy)), ax))


def _group_rows(m, a, x) -> tuple:
    """[N, groups, C/groups · spatial]: one row per (sample, group)."""
    dims = m.dims(x)
    groups_divide(dims[1], a.num_groups)
    return (dims[0], a.num_groups, math.prod(dims[1:]) // a.num_groups)


def gn_input(m, a, x, gamma, beta, dy):
    """GroupNorm dx: the LayerNorm rule on each (sample, group) row."""
    rows = _group_rows(m, a, x)
    xh, inv_std = _normalized(m, m.reshape(x, rows), (2,), a.eps)
    g = m.reshape(dy * _along(m, gamma, 1, x), rows)
    return m.reshape(_input_grad(m, xh, inv_std, g, (2,)), m.dims(x))


def gn_gamma(m, a, x, dy):
    """GroupNorm dgamma: Σ dy·x̂ over the batch and spatial axes."""
    xh, _ = _normalized(m, m.reshape(x, _group_rows(m, a, x)), (2,), a.eps)
    return m.sum(dy * m.reshape(xh, m.dims(x)), _all_but(len(m.dims(x)), 1))


def gn_beta(m, a, x, dy):
    """GroupNorm dbeta: Σ dy over the batch and spatial axes (x checks the groups)."""
    _group_rows(m, a, x)
    return m.sum(dy, _all_but(len(m.dims(dy)), 1))


def _bn_inv_std(m, var, x, eps):
    """1/sqrt(var + eps), shaped along the last axis of x."""
    return 1.0 / m.act("Sqrt", _along(m, var, len(m.dims(x)) - 1, x) + eps)


def bn_input(m, a, x, gamma, mean, var, dy):
    """dy·gamma/sqrt(var + eps): the statistics are frozen, so x does not enter."""
    return dy * (_along(m, gamma, len(m.dims(x)) - 1, x) * _bn_inv_std(m, var, x, a.eps))


def bn_gamma(m, a, x, mean, var, dy):
    """BatchNormInference dgamma: Σ dy·(x - mean)/sqrt(var + eps) over all but the last."""
    last = len(m.dims(x)) - 1
    xh = (x - _along(m, mean, last, x)) * _bn_inv_std(m, var, x, a.eps)
    return m.sum(dy * xh, _all_but(last + 1, last))


def bn_beta(m, a, dy):
    """BatchNormInference dbeta: Σ dy over every axis but the last."""
    last = len(m.dims(dy)) - 1
    return m.sum(dy, _all_but(last + 1, last))


RULES = {
    "LayerNormBackwardInput": ln_input, "LayerNormBackwardGamma": ln_gamma,
    "RmsNormBackwardInput": rms_input, "RmsNormBackwardGamma": rms_gamma,
    "RmsNormBackwardBeta": rms_beta, "GroupNormBackwardInput": gn_input,
    "GroupNormBackwardGamma": gn_gamma, "GroupNormBackwardBeta": gn_beta,
    "BatchNormInferenceBackwardInput": bn_input, "BatchNormInferenceBackwardGamma": bn_gamma,
    "BatchNormInferenceBackwardBeta": bn_beta,
}


def _reference(kind: str):
    """The oracle of ``kind``: its rule on numpy arrays in the work dtype, rounded once."""
    rule = RULES[kind]

    def ref(ctx, *arrays):
        with np.errstate(all="ignore"):
            out = np.asarray(rule(NUMPY, ctx.attrs, *work_arrays(*arrays)))
        if out.shape != tuple(ctx.out.dims):     # a vector gradient: the declared layout
            out = out.reshape([d if isinstance(d, int) else -1 for d in ctx.out.dims])
        return out.astype(ctx.out_np)
    return ref


# ── registrations ─────────────────────────────────────────────────────────

def _rows(shape: Shape, feat) -> int:
    """Rows a [C] gradient sums over: x's elements per feature (64 when dynamic)."""
    n = shape.numel
    return 64 if n is None or isinstance(feat, Dyn) else n // max(1, feat)


def _axis_feat(a, s):
    """C = x.dims[axis]."""
    return s[0].dims[a.axis % s[0].rank]


def _group_len(a, s):
    """Elements of one (sample, group) row: C/num_groups · spatial."""
    return s[0].numel // max(1, s[0].dims[0] * a.num_groups) if s[0].is_static else 64


# the input gradient subtracts two row means (K = the row) from dy·gamma: its error is
# relative to the row's largest gradient, as the forward norms' to the row's largest value
_AXIS_IN = reduction(4, _axis_feat, "row", axes=lambda a, s: (a.axis,))
# a [C] gradient sums one term per row, each carrying x̂'s own row error
_AXIS_VEC = reduction(2, lambda a, s: _rows(s[0], _axis_feat(a, s)) + _axis_feat(a, s), "all")
_GROUP_IN = reduction(4, _group_len, "row", axes=lambda a, s: tuple(range(1, s[0].rank)))
_GROUP_VEC = reduction(2, lambda a, s: _rows(s[0], s[0].dims[1]) + _group_len(a, s), "all")
_BN_VEC = reduction(2, lambda a, s: _rows(s[0], s[0].dims[-1]) + 4, "all")


def _beta_sum(dy: int, feat):
    """Σ dy over the rows: a plain sum, budgeted on the root-sum-square of its terms."""
    return reduction(1, lambda a, s: _rows(s[dy], feat(a, s)), "rss", operands=(dy,))


def _register(kind, attrs, payload, names, infer, check, doc, constraints, samples, acc,
              notes=""):
    register(OpDef(
        kind=kind, family="backward", attrs=attrs, payload=payload, arity=len(names),
        caps=Caps.NONE, infer=infer, check=check, reference=_reference(kind),
        input_names=names, doc=doc, constraints=constraints, samples=samples, dtypes=FLOATS,
        accuracy=acc, notes=notes))


def _x_shape(s, a):
    """x's shape and dtype"""
    return s[0]


def _gamma_shape(s, a):
    """gamma's shape and dtype (operand 1)"""
    return s[1]


def _beta_shape(s, a):
    """beta's shape and dtype (operand 2)"""
    return s[2]


_declared_shape = None      # the caller declares the vector's shape, as RLX


_C1 = "C1: every operand is a float tensor; "
_AXIS_C2 = "C2: `axis` is in -rank..rank-1 (x has rank >= 1)."
_DY = "the upstream gradient dy has x's shape and dtype."
_LN_NOTE = ("RLX's CPU kernels read the last axis whatever `axis` says (as its forward "
            "LayerNorm); here `axis` is the feature axis, as in the forward reference.")

_register(
    "LayerNormBackwardInput", AxisNormAttrs, "struct", ("x", "gamma", "dy"), _x_shape,
    check_axis_kind("LayerNormBackwardInput", ("x", "gamma", "dy"), (1,), False),
    "The gradient of LayerNorm with respect to its input. With `x̂ = (x - mean)/σ`, "
    "`σ = sqrt(var + eps)` recomputed from x over `axis` and `g = dy·gamma`: "
    "`dx = (g - mean(g) - x̂·mean(g·x̂)) / σ` (means over the feature axis). The exact "
    "derivative for any eps; beta does not enter, so RLX passes `[x, gamma, dy]`.",
    (_C1 + "the output has x's shape and dtype.", _AXIS_C2,
     "C3: gamma holds exactly C = x.dims[axis] elements (`[C]` or a shape collapsing to it).",
     "C4: " + _DY), axis_samples("LayerNormBackwardInput"), _AXIS_IN, _LN_NOTE)

_register(
    "LayerNormBackwardGamma", AxisNormAttrs, "struct", ("x", "dy"), _declared_shape,
    check_axis_kind("LayerNormBackwardGamma", ("x", "dy"), (), True),
    "The gradient of LayerNorm with respect to gamma: `Σ dy·x̂` over every axis but "
    "`axis`, with x̂ recomputed from x as the forward. The output shape is declared (RLX "
    "passes gamma's shape, which the operands do not carry).",
    (_C1 + "the output is a float tensor.", _AXIS_C2,
     "C3: the declared output holds exactly C = x.dims[axis] elements (gamma's shape).",
     "C4: " + _DY), axis_samples("LayerNormBackwardGamma"), _AXIS_VEC, _LN_NOTE)

_RMS_NAMES = ("x", "gamma", "beta", "dy")
_RMS_C = (_AXIS_C2, "C3: gamma and beta hold exactly C = x.dims[axis] elements.", "C4: " + _DY)
_RMS_NOTE = ("RLX passes beta although no RMSNorm gradient reads it. Its CPU kernels read "
             "the last axis whatever `axis` says; here `axis` is the feature axis.")
_RMS_IN_NOTE = (_RMS_NOTE + " RLX 0.2.2's kernels (CPU `rms_norm_backward_row`, CUDA, "
                "WGSL) compute `(g - x·mean(g·x)/r³)/r`, an extra 1/r on the cross term; "
                "later RLX fixed its composition to the derivative used here.")

_register(
    "RmsNormBackwardInput", AxisNormAttrs, "struct", _RMS_NAMES, _x_shape,
    check_axis_kind("RmsNormBackwardInput", _RMS_NAMES, (1, 2), False),
    "The gradient of RmsNorm with respect to its input. With `r = sqrt(mean(x²) + eps)` "
    "over `axis` and `g = dy·gamma`: `dx = (g - x·mean(g·x)/r²) / r`.",
    (_C1 + "the output has x's shape and dtype.",) + _RMS_C,
    axis_samples("RmsNormBackwardInput"), _AXIS_IN, _RMS_IN_NOTE)

_register(
    "RmsNormBackwardGamma", AxisNormAttrs, "struct", _RMS_NAMES, _gamma_shape,
    check_axis_kind("RmsNormBackwardGamma", _RMS_NAMES, (1, 2), False),
    "The gradient of RmsNorm with respect to gamma: `Σ dy·x/r` over every axis but `axis`, "
    "r recomputed from x as the forward. The output has gamma's shape.",
    (_C1 + "the output has gamma's shape and dtype.",) + _RMS_C,
    axis_samples("RmsNormBackwardGamma"), _AXIS_VEC, _RMS_NOTE)

_register(
    "RmsNormBackwardBeta", AxisNormAttrs, "struct", _RMS_NAMES, _beta_shape,
    check_axis_kind("RmsNormBackwardBeta", _RMS_NAMES, (1, 2), False),
    "The gradient of RmsNorm with respect to beta: `Σ dy` over every axis but `axis` "
    "(x, gamma and eps do not enter). The output has beta's shape.",
    (_C1 + "the output has beta's shape and dtype.",) + _RMS_C,
    axis_samples("RmsNormBackwardBeta"), _beta_sum(3, _axis_feat), _RMS_NOTE)

_GN_C = ("C2: x is `[N, C, *spatial]` (rank >= 2).",)
_GN_GROUPS = "C4: num_groups divides C and lies in 1..max(C, 1)."
_GN_NOTE = ("RLX's CPU kernels read x as NCHW (rank 4); the reference accepts any rank >= 2 "
            "with channels on axis 1, as the forward GroupNorm.")

_register(
    "GroupNormBackwardInput", GroupNormAttrs, "struct", _RMS_NAMES, _x_shape,
    check_group_kind("GroupNormBackwardInput", _RMS_NAMES, False),
    "The gradient of GroupNorm with respect to its input: per sample and group of C/groups "
    "channels, `dx = (g - mean(g) - x̂·mean(g·x̂)) / σ` with `g = dy·gamma[c]` and the "
    "means over the group's channels and spatial positions (x̂ and σ as the forward). "
    "beta does not enter.",
    (_C1 + "the output has x's shape and dtype.",) + _GN_C +
    ("C3: gamma and beta hold exactly C elements.", _GN_GROUPS, "C5: " + _DY),
    group_samples("GroupNormBackwardInput"), _GROUP_IN, _GN_NOTE)

for _kind, _what, _acc in (("GroupNormBackwardGamma", "`Σ dy·x̂`", _GROUP_VEC),
                           ("GroupNormBackwardBeta", "`Σ dy` (x only gives the layout)",
                            _beta_sum(1, lambda a, s: s[0].dims[1]))):
    _register(
        _kind, GroupNormAttrs, "struct", ("x", "dy"), _declared_shape,
        check_group_kind(_kind, ("x", "dy"), True),
        f"The gradient of GroupNorm with respect to {_kind[17:].lower()}: {_what} over "
        "the batch and spatial axes, per channel. The output shape is declared (RLX passes "
        "the vector's shape).",
        (_C1 + "the output is a float tensor.",) + _GN_C +
        ("C3: the declared output holds exactly C elements.", _GN_GROUPS, "C5: " + _DY),
        group_samples(_kind), _acc, _GN_NOTE)

_BN_C2 = "C2: x has rank >= 1; its last dim is the channel count C."
_BN_NOTE = ("As the forward BatchNormInference, channels are the LAST axis. mean and var are "
            "frozen statistics: no gradient flows through them.")

_register(
    "BatchNormInferenceBackwardInput", EpsAttrs, "struct",
    ("x", "gamma", "running_mean", "running_var", "dy"), _x_shape,
    check_bn_kind("BatchNormInferenceBackwardInput",
                   ("x", "gamma", "running_mean", "running_var", "dy"), False),
    "The gradient of BatchNormInference with respect to x: `dx = dy·(gamma / sqrt(var + "
    "eps))` per channel (the last axis). x and running_mean do not enter; RLX passes them.",
    (_C1 + "the output has x's shape and dtype.", _BN_C2,
     "C3: gamma, running_mean and running_var hold exactly C elements.", "C4: " + _DY),
    bn_samples("BatchNormInferenceBackwardInput"),
    ulp(6, reason="reciprocal square root and two products per element"), _BN_NOTE)

_register(
    "BatchNormInferenceBackwardGamma", EpsAttrs, "struct",
    ("x", "running_mean", "running_var", "dy"), _declared_shape,
    check_bn_kind("BatchNormInferenceBackwardGamma",
                   ("x", "running_mean", "running_var", "dy"), True),
    "The gradient of BatchNormInference with respect to gamma: `Σ dy·(x - mean)/sqrt(var + "
    "eps)` over every axis but the last. The output shape is declared (gamma's).",
    (_C1 + "the output is a float tensor.", _BN_C2,
     "C3: running_mean and running_var, and the declared output, hold exactly C elements.",
     "C4: " + _DY), bn_samples("BatchNormInferenceBackwardGamma"), _BN_VEC, _BN_NOTE)

_register(
    "BatchNormInferenceBackwardBeta", None, "unit", ("dy",), _declared_shape,
    check_bn_kind("BatchNormInferenceBackwardBeta", ("dy",), True),
    "The gradient of BatchNormInference with respect to beta: `Σ dy` over every axis but "
    "the last. A unit payload (no eps); the output shape is declared (beta's).",
    (_C1 + "the output is a float tensor.", "C2: dy has rank >= 1; its last dim is C.",
     "C3: the declared output holds exactly C elements."),
    bn_samples("BatchNormInferenceBackwardBeta"),
    _beta_sum(0, lambda a, s: s[0].dims[-1]), _BN_NOTE)
