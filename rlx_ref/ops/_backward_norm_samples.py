"""Samples of the normalization backward kinds (``backward_norm``).

Each family has one list of forward configurations (x, its per-feature vectors, payload,
tags); every backward kind of the family takes the operands it needs from each, plus an
upstream gradient ``dy`` shaped like x, and adds hand-computed cases. Two configurations
are f32, which the conformance cases re-run in f64, f16 and bf16; the layout and value
edge cases are pinned to f16 (the f32 path between casts) or f64, one case each.
"""
from __future__ import annotations

import numpy as np

from ..ir.shape import Shape
from .normalization import AxisNormAttrs, EpsAttrs, GroupNormAttrs
from .opdef import Sample

_NAN, _INF = np.nan, np.inf


def _f64(*xs):
    return tuple(np.asarray(v, np.float64) for v in xs)


def _as(dtype, *arrays):
    return tuple(np.asarray(a).astype(dtype) for a in arrays)


F16, F64 = np.float16, np.float64


def _offset_rows(rng, shape):
    """4096 + k/8 for small integers k: every sum in f32 is exact, so a one-pass variance
    E[x²] - E[x]² (x² needs 30 bits) shows, while the two-pass one is exact."""
    return np.float32(4096) + rng.integers(-16, 17, size=shape).astype(np.float32) / 8


# ── LayerNorm and RmsNorm: x, gamma, beta, payload, tags ──────────────────

def _axis_configs(rng):
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    A = AxisNormAttrs
    x_nan = [[1, _NAN, 2], [_INF, 0, 1], [1, 2, 4]]
    return [
        ((r(2, 5), r(5), r(5)), A(-1, 1e-5), ("prime-length",)),
        ((_offset_rows(rng, (2, 8)), r(8), r(8)), A(-1, 1e-5), ("large-offset",)),
        (_as(F16, r(2, 3, 4), r(4), r(4)), A(2, 1e-5), ("rank-3", "f16")),
        (_as(F64, r(2, 3, 4), r(3), r(3)), A(1, 1e-5), ("axis", "non-last-axis", "f64")),
        (_as(F16, r(3, 4), r(1, 4), r(4, 1)), A(-1, 1e-6), ("broadcast", "gamma-rank-2")),
        # one feature: LayerNorm's dx is exactly 0; RmsNorm's is g·eps/(x² + eps), which
        # is all cancellation unless x² is on the scale of eps
        (_as(F64, r(3, 1) * 1e-3, r(1), r(1)), A(-1, 1e-5), ("size-1", "f64")),
        (_as(F16, r(6), r(6), r(6)), A(0, 1e-5), ("rank-1", "f16")),
        (_as(F64, np.zeros((0, 4)), r(4), r(4)), A(-1, 1e-5), ("empty", "f64")),
        (_as(F16, x_nan, r(3), r(3)), A(-1, 1e-5), ("nan", "inf", "f16")),
        (_as(F64, np.full((2, 4), 3.0), r(4), r(4)), A(-1, 1e-5),
         ("constant-row", "ties", "f64")),
    ]


def _dy(rng, x):
    return rng.standard_normal(np.shape(x)).astype(np.asarray(x).dtype)


# hand cases: x rows (-1, -1, 1, 1) and (3, 3, 5, 5) both normalize to (-1, -1, 1, 1)
_LN_X = _f64([[-1, -1, 1, 1], [3, 3, 5, 5]])[0]
_HAND = {
    # row 0: g = (2, 0, 0, 0), mean g = 1/2, mean g·x̂ = -1/2 -> (1, -1, 0, 0); row 1: dy 0
    "LayerNormBackwardInput": (_f64(_LN_X, [2, 1, 1, 1], [[1, 0, 0, 0], [0, 0, 0, 0]]),
                               _f64([[1, -1, 0, 0], [0, 0, 0, 0]])[0]),
    # Σ dy·x̂ over the two rows
    "LayerNormBackwardGamma": (_f64(_LN_X, [[1, 2, 3, 4], [1, 1, 1, 1]]),
                               _f64([-2, -3, 4, 5])[0]),
    # rms 1: dx = g - x·mean(g·x) = (1, 0, 0, 0) - 1/4; rms 2: (g - x·(1/2)/4)/2
    "RmsNormBackwardInput": (_f64([[1, 1, 1, 1], [2, -2, 2, -2]], [1, 1, 1, 1], [0, 0, 0, 0],
                                  [[1, 0, 0, 0], [1, 0, 0, 0]]),
                             _f64([[0.75, -0.25, -0.25, -0.25],
                                   [0.375, 0.125, -0.125, 0.125]])[0]),
    # rms of (2, -2, 2, -2) is 2: x/r = ±1
    "RmsNormBackwardGamma": (_f64([[1, 1, 1, 1], [2, -2, 2, -2]], [1, 1, 1, 1], [0, 0, 0, 0],
                                  [[1, 2, 3, 4], [1, 1, 1, 1]]), _f64([2, 1, 4, 3])[0]),
    "RmsNormBackwardBeta": (_f64([[1, 1, 1, 1], [2, -2, 2, -2]], [1, 1, 1, 1], [0, 0, 0, 0],
                                 [[1, 2, 3, 4], [1, 1, 1, 1]]), _f64([2, 3, 4, 5])[0]),
}


def axis_samples(kind: str):
    """Samples of LayerNormBackward{Input,Gamma} and RmsNormBackward{Input,Gamma,Beta}."""
    def samples(rng):
        out = []
        for (x, gamma, beta), attrs, tags in _axis_configs(rng):
            dy = _dy(rng, x)
            if kind == "LayerNormBackwardInput":
                ops, decl = (x, gamma, dy), None
            elif kind == "LayerNormBackwardGamma":
                ops, decl = (x, dy), Shape(np.shape(gamma), _dtype(x))
            else:
                ops, decl = (x, gamma, beta, dy), None
            out.append(Sample(ops, attrs, decl, tags))
        ops, expect = _HAND[kind]
        decl = Shape(expect.shape, _dtype(expect)) if kind == "LayerNormBackwardGamma" else None
        out.append(Sample(ops, AxisNormAttrs(-1, 0.0), decl, ("hand",), expect=expect))
        return out
    return samples


def _dtype(a):
    from ..ir.dtype import DType

    return DType.of(np.asarray(a))


# ── GroupNorm: x [N, C, *spatial], gamma, beta ───────────────────────────

def _group_configs(rng):
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    G = GroupNormAttrs
    xn = r(1, 4, 2, 2)
    xn[0, 1, 0, 0] = _NAN
    return [
        ((r(2, 4, 3, 5), r(4), r(4)), G(2, 1e-5), ("prime-length",)),
        ((_offset_rows(rng, (1, 4, 2, 2)), r(4), r(4)), G(2, 1e-5), ("large-offset",)),
        (_as(F16, r(1, 6, 7), r(6), r(6)), G(2, 1e-5), ("rank-3", "odd", "f16")),
        (_as(F64, r(2, 4, 2, 2), r(1, 4, 1, 1), r(4)), G(2, 1e-6), ("broadcast", "f64")),
        (_as(F16, r(2, 6, 3), r(6), r(6)), G(6, 1e-5), ("groups=C", "f16")),
        (_as(F64, r(2, 6, 3), r(6), r(6)), G(1, 1e-5), ("groups=1", "f64")),
        (_as(F16, r(3, 6), r(6), r(6)), G(2, 1e-5), ("rank-2", "f16")),
        (_as(F64, r(2, 4, 1, 1), r(4), r(4)), G(4, 1e-5), ("size-1", "f64")),  # dx = 0
        (_as(F16, np.zeros((0, 4, 2, 2)), r(4), r(4)), G(2, 1e-5), ("empty", "f16")),
        (_as(F64, r(1, 2, 0, 3), r(2), r(2)), G(2, 1e-5), ("empty", "f64")),
        (_as(F16, xn, r(4), r(4)), G(2, 1e-5), ("nan", "f16")),
    ]


# one group over x = (-1, -1 | 1, 1) (channels of [1, 2, 1, 2]): mean 0, var 1, x̂ = x
_GN_X = _f64([[[[-1, -1]], [[1, 1]]]])[0]
_GN_HAND = {
    "GroupNormBackwardInput": ((_GN_X, *_f64([2, 1], [0, 0], [[[[1, 0]], [[0, 0]]]])),
                               _f64([[[[1, -1]], [[0, 0]]]])[0]),
    "GroupNormBackwardGamma": ((_GN_X, *_f64([[[[1, 2]], [[3, 4]]]])), _f64([-3, 7])[0]),
    "GroupNormBackwardBeta": ((_GN_X, *_f64([[[[1, 2]], [[3, 4]]]])), _f64([3, 7])[0]),
}


def group_samples(kind: str):
    """Samples of GroupNormBackward{Input,Gamma,Beta}."""
    def samples(rng):
        out = []
        for (x, gamma, beta), attrs, tags in _group_configs(rng):
            dy = _dy(rng, x)
            if kind == "GroupNormBackwardInput":
                out.append(Sample((x, gamma, beta, dy), attrs, None, tags))
            else:
                vec = gamma if kind == "GroupNormBackwardGamma" else beta
                out.append(Sample((x, dy), attrs, Shape(np.shape(vec), _dtype(x)), tags))
        ops, expect = _GN_HAND[kind]
        decl = None if kind == "GroupNormBackwardInput" else Shape((2,), _dtype(expect))
        out.append(Sample(ops, GroupNormAttrs(1, 0.0), decl, ("hand",), expect=expect))
        return out
    return samples


# ── BatchNormInference: x [..., C], gamma, beta, running mean and variance ─

def _bn_configs(rng):
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    var = lambda *s: (rng.random(s) + 0.5).astype(np.float32)  # noqa: E731
    return [
        ((r(2, 5), r(5), r(5), var(5)), ("prime-length",)),
        (_as(F16, r(2, 3, 4), r(4), r(4), var(4)), ("rank-3", "f16")),
        (_as(F64, r(3), r(3), r(3), var(3)), ("rank-1", "f64")),
        (_as(F16, r(2, 4), r(1, 4), r(4, 1), var(4)), ("broadcast", "f16")),
        (_as(F64, np.zeros((0, 3)), r(3), r(3), var(3)), ("empty", "f64")),
        (_as(F16, [[_NAN, _INF], [1, 2]], [1, 1], [0, 0], [1, 1]), ("nan", "inf", "f16")),
    ]


# c0: (x - 1)/2, c1: x; gamma (2, 1): dx = dy·(1, 1)
_BN_HAND = _f64([[1, 2], [3, 4]], [2, 1], [1, 0], [4, 1], [[1, 2], [3, 4]])
_BN_EXPECT = {"BatchNormInferenceBackwardInput": _f64([[1, 2], [3, 4]])[0],
              "BatchNormInferenceBackwardGamma": _f64([3, 20])[0],
              "BatchNormInferenceBackwardBeta": _f64([4, 6])[0]}


def _bn_operands(kind: str, x, gamma, mean, var, dy):
    if kind == "BatchNormInferenceBackwardInput":
        return (x, gamma, mean, var, dy), None
    decl = Shape(np.shape(gamma), _dtype(x))
    if kind == "BatchNormInferenceBackwardGamma":
        return (x, mean, var, dy), decl
    return (dy,), decl


def bn_samples(kind: str):
    """Samples of BatchNormInferenceBackward{Input,Gamma,Beta}."""
    unit = kind == "BatchNormInferenceBackwardBeta"     # no payload: eps does not enter

    def samples(rng):
        out = []
        for (x, gamma, mean, var), tags in _bn_configs(rng):
            ops, decl = _bn_operands(kind, x, gamma, mean, var, _dy(rng, x))
            out.append(Sample(ops, None if unit else EpsAttrs(1e-5), decl, tags))
        ops, decl = _bn_operands(kind, *_BN_HAND)
        out.append(Sample(ops, None if unit else EpsAttrs(0.0), decl, ("hand",),
                          expect=_BN_EXPECT[kind]))
        return out
    return samples
