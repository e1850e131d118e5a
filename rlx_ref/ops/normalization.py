"""Normalization family: LayerNorm, RmsNorm, GroupNorm, LayerNorm2d, BatchNormInference.

Every kind takes ``x`` plus per-feature affine vectors (``gamma``, ``beta``; BatchNorm also
frozen statistics), normalizes with the biased (population) variance and ``eps`` inside the
square root, and returns ``x``'s shape and dtype. 16-bit floats are computed in f32.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..conformance.accuracy import reduction
from ..ir.dtype import DType
from ..ir.shape import Dyn, Shape
from .codec import F32, I32, USIZE, attr
from .opdef import Caps, OpDef, Sample, register, want

FLOATS = (DType.F32, DType.F64, DType.F16, DType.BF16)


# ── shared helpers ────────────────────────────────────────────────────────

def _work(*arrays):
    """Arrays in one arithmetic dtype: f64 if any input is f64, else f32."""
    wide = any(a.dtype == np.float64 for a in arrays)
    dt = np.float64 if wide else np.float32
    return [np.asarray(a).astype(dt) for a in arrays]


def _along(vec, axis: int, ndim: int, size: int):
    """A [C] vector shaped to broadcast along ``axis`` of a rank-``ndim`` tensor.

    Re-checks C elements at run time: with dynamic dims the verifier could not.
    """
    want(vec.size == size, f"(C3) a per-feature vector has {vec.size} elements, expected "
                           f"{size} (the normalised axis)")
    shape = [1] * ndim
    shape[axis] = size
    return vec.reshape(shape)


def _mean(a, axis: int):
    """Mean over one axis, kept as size 1 (an empty axis gives NaN without a warning)."""
    return a.sum(axis=axis, keepdims=True) / a.dtype.type(a.shape[axis])


def _check_floats(shapes, kind: str, names: tuple):
    for s, n in zip(shapes, names):
        want(s.dtype.is_float, f"(C1) {kind} operand `{n}` must be a float tensor, got {s.dtype}")


def _check_vector(s: Shape, feat, kind: str, label: str, cid: str):
    """RLX's width rule: a rank-1 [C] vector, or any shape collapsing to C elements."""
    if isinstance(feat, Dyn) or not s.is_static:
        return
    if s.rank == 1:
        want(s.dims[0] == feat, f"({cid}) {kind} {label} width ({s.dims[0]}) does not match "
                                f"the normalised axis ({feat})")
    else:
        want(s.numel == feat, f"({cid}) {kind} {label} must be rank-1 [C] (or collapse to it): "
                              f"got rank {s.rank} with {s.numel} elements, expected {feat}")


def _same_as_x(shapes, a):
    return shapes[0]


class _F32Eps:
    """Rounds ``eps`` to f32 on construction, as RLX stores it (so text round-trips)."""

    def __post_init__(self):
        # the codec's rounding leaves non-numbers and f32 overflows for the verifier
        object.__setattr__(self, "eps", F32.normalize(self.eps))


# ── LayerNorm and RmsNorm (one feature axis) ─────────────────────────────

@dataclass(frozen=True)
class AxisNormAttrs(_F32Eps):
    axis: int = attr(I32, doc="the feature axis (negative counts from the end; usually -1)")
    eps: float = attr(F32, doc="added to the variance (mean square) inside the square root")


def _feature_axis(x: Shape, axis: int) -> int:
    want(-x.rank <= axis < x.rank,
         f"(C2) axis {axis} is out of range for rank {x.rank} (expected {-x.rank}..{x.rank - 1})")
    return axis % x.rank


def _axis_norm_checker(kind: str):
    def check(shapes, a, out):
        _check_floats(shapes, kind, ("x", "gamma", "beta"))
        ax = _feature_axis(shapes[0], a.axis)
        feat = shapes[0].dims[ax]
        _check_vector(shapes[1], feat, kind, "gamma", "C3")
        _check_vector(shapes[2], feat, kind, "beta", "C3")
    return check


def _ref_layer_norm(ctx, x, gamma, beta):
    xf, g, b = _work(x, gamma, beta)
    ax = ctx.attrs.axis % x.ndim
    eps = xf.dtype.type(ctx.attrs.eps)
    with np.errstate(all="ignore"):
        mean = _mean(xf, ax)
        var = _mean((xf - mean) ** 2, ax)
        y = (xf - mean) / np.sqrt(var + eps)
        y = y * _along(g, ax, x.ndim, x.shape[ax]) + _along(b, ax, x.ndim, x.shape[ax])
    return y.astype(ctx.out_np)


def _ref_rms_norm(ctx, x, gamma, beta):
    xf, g, b = _work(x, gamma, beta)
    ax = ctx.attrs.axis % x.ndim
    eps = xf.dtype.type(ctx.attrs.eps)
    with np.errstate(all="ignore"):
        mean_sq = _mean(xf * xf, ax)
        y = xf / np.sqrt(mean_sq + eps)
        y = y * _along(g, ax, x.ndim, x.shape[ax]) + _along(b, ax, x.ndim, x.shape[ax])
    return y.astype(ctx.out_np)


def _f32(*xs):
    return tuple(np.asarray(v, np.float32) for v in xs)


def _axis_norm_samples(kind: str):
    def samples(rng):
        A = AxisNormAttrs
        r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
        out = [
            Sample((r(2, 5), r(5), r(5)), A(-1, 1e-5), tags=("prime-length",)),
            Sample((r(2, 3, 4), r(4), r(4)), A(2, 1e-5), tags=("rank-3",)),
            Sample((r(2, 3, 4), r(3), r(3)), A(1, 1e-5), tags=("axis", "non-last-axis")),
            Sample((r(3, 4), r(1, 4), r(4, 1)), A(-1, 1e-6), tags=("broadcast", "gamma-rank-2")),
            Sample((r(3, 1), r(1), r(1)), A(-1, 1e-5), tags=("size-1",)),
            Sample((np.zeros((0, 4), np.float32), r(4), r(4)), A(-1, 1e-5), tags=("empty",)),
            Sample(_f32([[1, np.nan, 2], [np.inf, 0, 1], [1, 2, 3]], [1, 1, 1], [0, 0, 0]),
                   A(-1, 1e-5), tags=("nan", "inf")),
            Sample((rng.standard_normal((2, 6)), rng.standard_normal(6),
                    rng.standard_normal(6)), A(-1, 1e-5), tags=("f64",)),
            Sample((r(2, 8).astype(np.float16), r(8).astype(np.float16),
                    r(8).astype(np.float16)), A(-1, 1e-5), tags=("f16",)),
            Sample((np.full((2, 4), 3.0, np.float32), r(4), r(4)), A(-1, 1e-5),
                   tags=("constant-row", "ties")),
        ]
        if kind == "LayerNorm":
            # rows (1, 3) and (5, -1): mean 2, std 1 and 3 -> normalized ±1, then affine
            out.append(Sample(_f32([[1, 3], [5, -1]], [2, 1], [0.5, 0]), A(-1, 0.0),
                              tags=("hand",), expect=_f32([[-1.5, 1], [2.5, -1]])[0]))
        else:
            # rms of (2, -2) is 2 and of (1, 1) is 1
            out.append(Sample(_f32([[2, -2], [1, 1]], [3, 1], [0, 0.5]), A(-1, 0.0),
                              tags=("hand",), expect=_f32([[3, -0.5], [3, 1.5]])[0]))
        out.append(Sample((r(3, 1), np.float32([2.0]), np.float32([-0.5])), A(-1, 1e-5),
                          tags=("size-1",),
                          expect=None if kind == "RmsNorm" else np.full((3, 1), -0.5,
                                                                        np.float32)))
        return out
    return samples


_AXIS_CONSTRAINTS = (
    "C1: x, gamma and beta are float tensors; the output has x's shape and dtype.",
    "C2: `axis` is in -rank..rank-1 (x has rank >= 1).",
    "C3: gamma and beta hold exactly C = x.dims[axis] elements (rank-1 `[C]`, or any shape "
    "that collapses to it such as `[1, C]`).",
)

register(OpDef(
    kind="LayerNorm", family="normalization", attrs=AxisNormAttrs, payload="struct", arity=3,
    caps=Caps.NONE, infer=_same_as_x, check=_axis_norm_checker("LayerNorm"),
    reference=_ref_layer_norm, input_names=("x", "gamma", "beta"),
    doc="Layer normalization over the single feature axis `axis`: for every position of the "
        "other axes, `mean = Σx/C`, `var = Σ(x - mean)²/C` (biased), and "
        "`y = (x - mean) / sqrt(var + eps) · gamma + beta`, with `gamma`/`beta` indexed by the "
        "feature. A row with NaN or inf yields NaN throughout; a constant row yields `beta`.",
    constraints=_AXIS_CONSTRAINTS, samples=_axis_norm_samples("LayerNorm"), dtypes=FLOATS,
    accuracy=reduction(2, lambda a, s: s[0].dims[a.axis], "row", axes=lambda a, s: (a.axis,)),
    notes="RLX's CPU kernel ignores `axis` (always the last axis) and computes the variance "
          "as max(E[x²] - E[x]², 0); the reference follows the documented semantics "
          "(`axis` is the feature axis) and uses the two-pass variance, which agrees "
          "exactly in real arithmetic and is more accurate in floating point. RLX's "
          "verifier compares gamma/beta with the last dim; here with dims[axis] (the same "
          "when axis = -1).",
))

register(OpDef(
    kind="RmsNorm", family="normalization", attrs=AxisNormAttrs, payload="struct", arity=3,
    caps=Caps.NONE, infer=_same_as_x, check=_axis_norm_checker("RmsNorm"),
    reference=_ref_rms_norm, input_names=("x", "gamma", "beta"),
    doc="RMS normalization over the feature axis `axis`: `ms = Σx²/C` (no mean subtraction) "
        "and `y = x / sqrt(ms + eps) · gamma + beta` (plain `gamma`, not Gemma's `1 + gamma`). "
        "RLX passes three operands; builders without a bias pass zeros for `beta`.",
    constraints=_AXIS_CONSTRAINTS, samples=_axis_norm_samples("RmsNorm"), dtypes=FLOATS,
    accuracy=reduction(2, lambda a, s: s[0].dims[a.axis], "row", axes=lambda a, s: (a.axis,)),
    notes="RLX's CPU kernel ignores `axis` (always the last axis); the reference honours it "
          "as documented. RLX's shape inference also accepts a declared `[∏leading, C]` "
          "output (the FuseRmsNormReshape fusion); here the output is always x's shape, so a "
          "fused graph must keep its Reshape.",
))


# ── GroupNorm and LayerNorm2d (channel axis 1) ───────────────────────────

@dataclass(frozen=True)
class GroupNormAttrs(_F32Eps):
    num_groups: int = attr(USIZE, doc="channel groups; channel c is in group c // (C/groups)")
    eps: float = attr(F32, doc="added to each group's variance inside the square root")


@dataclass(frozen=True)
class EpsAttrs(_F32Eps):
    eps: float = attr(F32, doc="added to the variance inside the square root")


def _check_nc(shapes, kind: str):
    _check_floats(shapes, kind, ("x", "gamma", "beta"))
    x = shapes[0]
    want(x.rank >= 2, f"(C2) {kind} needs x of shape [N, C, *spatial] (rank >= 2, "
                      f"usually NCHW), got rank {x.rank}")
    _check_vector(shapes[1], x.dims[1], kind, "gamma", "C3")
    _check_vector(shapes[2], x.dims[1], kind, "beta", "C3")


def _group_rule(c: int, groups: int) -> None:
    """C4; the cap at max(C, 1) matters when C = 0, where any count divides C but the
    oracle would still hold one statistic per group (2**31 groups: tens of GiB)."""
    want(0 < groups <= max(c, 1) and c % groups == 0,
         f"(C4) GroupNorm num_groups ({groups}) must divide the channel count C ({c}) "
         f"and lie in 1..{max(c, 1)}")


def _check_group_norm(shapes, a, out):
    _check_nc(shapes, "GroupNorm")
    c = shapes[0].dims[1]
    want(a.num_groups > 0, "(C4) GroupNorm num_groups must be positive, got 0")
    if not isinstance(c, Dyn):
        _group_rule(c, a.num_groups)


def _ref_group_norm(ctx, x, gamma, beta):
    xf, g, b = _work(x, gamma, beta)
    n, c = x.shape[:2]
    groups = ctx.attrs.num_groups
    _group_rule(c, groups)
    eps = xf.dtype.type(ctx.attrs.eps)
    # one row per (sample, group): its C/groups channels and all spatial positions
    rows = xf.reshape(n, groups, -1) if xf.size else xf.reshape(n, groups, 0)
    with np.errstate(all="ignore"):
        mean = _mean(rows, 2)
        var = _mean((rows - mean) ** 2, 2)
        y = ((rows - mean) / np.sqrt(var + eps)).reshape(x.shape)
        y = y * _along(g, 1, x.ndim, x.shape[1]) + _along(b, 1, x.ndim, x.shape[1])
    return y.astype(ctx.out_np)


def _ref_layer_norm2d(ctx, x, gamma, beta):
    xf, g, b = _work(x, gamma, beta)
    eps = xf.dtype.type(ctx.attrs.eps)
    with np.errstate(all="ignore"):
        mean = _mean(xf, 1)
        var = _mean((xf - mean) ** 2, 1)
        y = (xf - mean) / np.sqrt(var + eps)
        y = y * _along(g, 1, x.ndim, x.shape[1]) + _along(b, 1, x.ndim, x.shape[1])
    return y.astype(ctx.out_np)


def _nc_samples(kind: str):
    def samples(rng):
        A = (lambda eps, g=2: GroupNormAttrs(g, eps)) if kind == "GroupNorm" else \
            (lambda eps, g=None: EpsAttrs(eps))
        r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
        out = [
            Sample((r(2, 4, 3, 5), r(4), r(4)), A(1e-5), tags=("prime-length",)),
            Sample((r(1, 6, 7), r(6), r(6)), A(1e-5), tags=("rank-3", "odd")),
            Sample((r(2, 4, 2, 2), r(1, 4, 1, 1), r(4)), A(1e-6), tags=("broadcast",)),
            Sample((np.zeros((0, 4, 2, 2), np.float32), r(4), r(4)), A(1e-5), tags=("empty",)),
            Sample((r(1, 2, 0, 3), r(2), r(2)), A(1e-5), tags=("empty",)),
            Sample((rng.standard_normal((2, 4, 3)), rng.standard_normal(4),
                    rng.standard_normal(4)), A(1e-5), tags=("f64",)),
            Sample((r(1, 4, 2, 3).astype(np.float16), r(4).astype(np.float16),
                    r(4).astype(np.float16)), A(1e-5), tags=("f16",)),
        ]
        xn = r(1, 4, 2, 2)
        xn[0, 1, 0, 0] = np.nan
        out.append(Sample((xn, r(4), r(4)), A(1e-5), tags=("nan",)))
        if kind == "GroupNorm":
            out += [
                Sample((r(2, 6, 3), r(6), r(6)), A(1e-5, 6), tags=("groups=C",)),
                Sample((r(2, 6, 3), r(6), r(6)), A(1e-5, 1), tags=("groups=1",)),
                # one group over (1, 3, 1, 3): mean 2, std 1; channel affine (1, 0), (2, 10)
                Sample(_f32([[[[1, 3]], [[1, 3]]]], [1, 2], [0, 10]), A(0.0, 1), tags=("hand",),
                       expect=_f32([[[[-1, 1]], [[8, 12]]]])[0]),
            ]
        else:
            out += [
                Sample((r(2, 1, 3, 3), r(1), r(1)), A(1e-5), tags=("size-1",)),
                # positions: channels (1, 3) and (5, -1) -> ±1, then gamma (1, 2), beta (0, 1)
                Sample(_f32([[[[1, 5]], [[3, -1]]]], [1, 2], [0, 1]), A(0.0), tags=("hand",),
                       expect=_f32([[[[-1, 1]], [[3, -1]]]])[0]),
            ]
        return out
    return samples


_NC_SHAPE = ("C1: x, gamma and beta are float tensors; the output has x's shape and dtype.",
             "C2: x is `[N, C, *spatial]` (rank >= 2; NCHW in practice).",
             "C3: gamma and beta hold exactly C elements (`[C]` or a shape collapsing to it).")

register(OpDef(
    kind="GroupNorm", family="normalization", attrs=GroupNormAttrs, payload="struct",
    arity=3, caps=Caps.NONE, infer=_same_as_x, check=_check_group_norm,
    reference=_ref_group_norm, input_names=("x", "gamma", "beta"),
    doc="Group normalization on `[N, C, *spatial]`: the C channels are split into "
        "`num_groups` contiguous blocks of C/num_groups; for each sample and group, mean and "
        "biased variance are taken over all of the block's channels and spatial positions, "
        "then `y = (x - mean) / sqrt(var + eps) · gamma[c] + beta[c]` (per-channel affine).",
    constraints=_NC_SHAPE + ("C4: num_groups divides C and lies in 1..max(C, 1).",),
    samples=_nc_samples("GroupNorm"), dtypes=FLOATS,
    accuracy=reduction(2, lambda a, s: s[0].numel // max(1, s[0].dims[0] * a.num_groups),
                       "row", axes=lambda a, s: tuple(range(1, s[0].rank))),
    notes="RLX's CPU kernel reads x as NCHW (rank 3 as [N, C, 1, L]); the reference accepts "
          "any rank >= 2 with the same meaning. RLX has no verifier rule for C3/C4; a bad "
          "group count is reported here instead of failing inside the kernel.",
))

register(OpDef(
    kind="LayerNorm2d", family="normalization", attrs=EpsAttrs, payload="struct", arity=3,
    caps=Caps.NONE, infer=_same_as_x, check=lambda s, a, o: _check_nc(s, "LayerNorm2d"),
    reference=_ref_layer_norm2d, input_names=("x", "gamma", "beta"),
    doc="Channel LayerNorm on `[N, C, *spatial]` (candle / SAM `LayerNorm2d`, not PyTorch's "
        "H×W norm): at each sample and spatial position, mean and biased variance are taken "
        "over the C channels, then `y = (x - mean) / sqrt(var + eps) · gamma[c] + beta[c]`.",
    constraints=_NC_SHAPE, samples=_nc_samples("LayerNorm2d"), dtypes=FLOATS,
    accuracy=reduction(2, lambda a, s: s[0].dims[1], "row", axes=(1,)),
    notes="RLX documents NCHW; the reference accepts any rank >= 2 (channels on axis 1).",
))


# ── BatchNormInference (channels on the LAST axis) ───────────────────────

_BN_NAMES = ("x", "gamma", "beta", "running_mean", "running_var")


def _check_batch_norm(shapes, a, out):
    _check_floats(shapes, "BatchNormInference", _BN_NAMES)
    x = shapes[0]
    want(x.rank >= 1, "(C2) BatchNormInference needs x of rank >= 1 (channels on the last "
                      "axis), got a 0-d tensor")
    for s, n in zip(shapes[1:], _BN_NAMES[1:]):
        _check_vector(s, x.dims[-1], "BatchNormInference", n, "C3")


def _ref_batch_norm(ctx, x, gamma, beta, mean, var):
    xf, g, b, m, v = _work(x, gamma, beta, mean, var)
    eps = xf.dtype.type(ctx.attrs.eps)
    # [C] vectors broadcast along the last axis of x
    g, b, m, v = (_along(t, -1, 1, x.shape[-1]) for t in (g, b, m, v))
    with np.errstate(all="ignore"):
        y = g * (xf - m) / np.sqrt(v + eps) + b
    return y.astype(ctx.out_np)


def _bn_samples(rng):
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    var = lambda *s: (rng.random(s) + 0.5).astype(np.float32)  # noqa: E731
    A = EpsAttrs
    return [
        Sample((r(2, 5), r(5), r(5), r(5), var(5)), A(1e-5), tags=("prime-length",)),
        Sample((r(2, 3, 4), r(4), r(4), r(4), var(4)), A(1e-5), tags=("rank-3",)),
        Sample((r(3), r(3), r(3), r(3), var(3)), A(1e-3), tags=("rank-1",)),
        Sample((r(2, 4), r(1, 4), r(4), r(4, 1), var(4)), A(1e-5), tags=("broadcast",)),
        Sample((np.zeros((0, 3), np.float32), r(3), r(3), r(3), var(3)), A(1e-5),
               tags=("empty",)),
        Sample((rng.standard_normal((2, 3)), rng.standard_normal(3), rng.standard_normal(3),
                rng.standard_normal(3), rng.random(3) + 0.5), A(1e-5), tags=("f64",)),
        Sample(tuple(t.astype(np.float16) for t in (r(2, 3), r(3), r(3), r(3), var(3))),
               A(1e-5), tags=("f16",)),
        Sample(_f32([[np.nan, np.inf]], [1, 1], [0, 0], [0, 0], [1, 1]), A(0.0),
               tags=("nan", "inf"), expect=_f32([[np.nan, np.inf]])[0]),
        # c0: 2·(x - 1)/2 + 0 = x - 1;  c1: 1·(x - 0)/1 + 1 = x + 1
        Sample(_f32([[1, 2], [3, 4]], [2, 1], [0, 1], [1, 0], [4, 1]), A(0.0), tags=("hand",),
               expect=_f32([[0, 3], [2, 5]])[0]),
    ]


register(OpDef(
    kind="BatchNormInference", family="normalization", attrs=EpsAttrs, payload="struct",
    arity=5, caps=Caps.NONE, infer=_same_as_x, check=_check_batch_norm,
    reference=_ref_batch_norm, input_names=_BN_NAMES,
    doc="Batch normalization with frozen statistics. The channel axis is the LAST axis of x "
        "(not NCHW axis 1): `y = gamma[c] · (x - running_mean[c]) / sqrt(running_var[c] + "
        "eps) + beta[c]`.",
    constraints=("C1: all five operands are float tensors; the output has x's shape and "
                 "dtype.",
                 "C2: x has rank >= 1; its last dim is the channel count C.",
                 "C3: gamma, beta, running_mean and running_var hold exactly C elements."),
    samples=_bn_samples, dtypes=FLOATS,
    accuracy=reduction(2, 4, "all"),     # g·(x - m)/sqrt(v + eps) + b: four roundings
    notes="RLX's shape inference has no rule for BatchNormInference (the declared shape is "
          "never checked) and its verifier checks only the arity; here the output shape is "
          "inferred as x's shape and C1-C3 are verified.",
))
