"""KAN spline family: SplineActivation and its two backward kinds, SplineActivationBackwardX
and SplineActivationBackwardCoeff.

Each channel `c` (the last axis of x) maps through its own Gaussian-RBF expansion
`φ_c(v) = Σ_g coeff[c, g]·exp(−((v − center_g)·inv_h)²)`. The grid constants are RLX's,
in f32 from the f32 payload: `step = (grid_max − grid_min)/(num_basis − 1)` (1 when
num_basis is 1), `center_g = grid_min + g·step`, `inv_h = 1/step`; the sums run in f64
and round once into the output.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..ir.dtype import DType
from ..ir.shape import Dyn, Shape
from .codec import F32, U32, attr
from .opdef import OpDef, Sample, register, want

FLOATS = (DType.F32, DType.F64)
FAMILY = "spline"


@dataclass(frozen=True)
class SplineAttrs:
    num_basis: int = attr(U32, doc="RBF basis functions per channel (G)")
    grid_min: float = attr(F32, doc="centre of the first basis function")
    grid_max: float = attr(F32, doc="centre of the last basis function")

    def __post_init__(self):
        for f in ("grid_min", "grid_max"):
            object.__setattr__(self, f, F32.normalize(getattr(self, f)))


def grid(a) -> tuple[np.ndarray, float]:
    """(centers [G] as f64, inv_h) computed in f32 as RLX's kernels do."""
    f = np.float32
    g = int(a.num_basis)
    step = f(f(a.grid_max) - f(a.grid_min)) / f(g - 1) if g > 1 else f(1.0)
    centers = f(a.grid_min) + np.arange(g, dtype=f) * step
    return centers.astype(np.float64), float(f(1.0) / step)


def basis(x: np.ndarray, a) -> tuple[np.ndarray, np.ndarray]:
    """(B [.., C, G], dB/dx [.., C, G]) in f64 for every element of x."""
    centers, inv_h = grid(a)
    z = (np.asarray(x, np.float64)[..., None] - centers) * inv_h
    b = np.exp(-(z * z))
    return b, b * (-2.0 * inv_h) * z


def _channels(kind: str, x: Shape):
    want(x.rank >= 1, f"(C1) {kind}: x needs a channel axis (rank >= 1), got rank 0")
    return x.dims[-1]


def _common(kind: str, shapes, a, names):
    want(a.num_basis >= 1, f"(C2) {kind}: num_basis must be >= 1, got 0")
    want(math.isfinite(a.grid_min) and math.isfinite(a.grid_max) and
         (a.num_basis == 1 or a.grid_min < a.grid_max),
         f"(C2) {kind}: the grid must be finite with grid_min < grid_max when num_basis > 1, "
         f"got [{a.grid_min}, {a.grid_max}] (a zero step divides by zero)")
    dt = shapes[0].dtype
    want(dt in FLOATS, f"(C3) {kind}: x must be f32 or f64, got {dt}")
    for s, n in zip(shapes, names):
        want(s.dtype == dt, f"(C3) {kind}: operands share one dtype: x is {dt} but {n} is "
                            f"{s.dtype}")
    return _channels(kind, shapes[0])


def _check_coeff(kind, coeff: Shape, c, a):
    ok = coeff.rank == 2 and all(isinstance(d, Dyn) or d == w for d, w in
                                 zip(coeff.dims, (c, a.num_basis)))
    want(ok,
         f"(C4) {kind}: coeff must be [C, num_basis] = [{c}, {a.num_basis}], got "
         f"{coeff.dims_text()}")


def _check_upstream(kind, up: Shape, x: Shape):
    want(up.dims == x.dims, f"(C5) {kind}: upstream must have x's shape {x.dims_text()}, got "
                            f"{up.dims_text()}")


def _infer_fwd(shapes, a):
    c = _common("SplineActivation", shapes, a, ("x", "coeff"))
    _check_coeff("SplineActivation", shapes[1], c, a)
    return shapes[0]


def _infer_bwd_x(shapes, a):
    kind = "SplineActivationBackwardX"
    c = _common(kind, shapes, a, ("x", "coeff", "upstream"))
    _check_coeff(kind, shapes[1], c, a)
    _check_upstream(kind, shapes[2], shapes[0])
    return shapes[0]


def _infer_bwd_coeff(shapes, a):
    kind = "SplineActivationBackwardCoeff"
    c = _common(kind, shapes, a, ("x", "upstream"))
    _check_upstream(kind, shapes[1], shapes[0])
    return Shape((c, a.num_basis), shapes[0].dtype)


def _ref_fwd(ctx, x, coeff):
    b, _ = basis(x, ctx.attrs)
    return np.einsum("...cg,cg->...c", b, np.asarray(coeff, np.float64)).astype(ctx.out_np)


def _ref_bwd_x(ctx, x, coeff, up):
    _, db = basis(x, ctx.attrs)
    slope = np.einsum("...cg,cg->...c", db, np.asarray(coeff, np.float64))
    return (np.asarray(up, np.float64) * slope).astype(ctx.out_np)


def _ref_bwd_coeff(ctx, x, up):
    b, _ = basis(x, ctx.attrs)
    c, g = ctx.out_dims
    p = b * np.asarray(up, np.float64)[..., None]
    return p.reshape(-1, c, g).sum(axis=0).astype(ctx.out_np)


def _r(rng, *dims):
    return rng.standard_normal(dims).astype(np.float32)


def _fwd_samples(rng):
    x = np.float32([[0.0, 1.0]])
    coeff = np.float32([[1, 2, 3], [0, 1, 0]])
    e1, e4 = math.exp(-1), math.exp(-4)
    # centers -1, 0, 1 (step 1): channel 0 at 0 → e⁻¹ + 2 + 3e⁻¹; channel 1 at 1 → e⁻¹
    want_ = np.float32([[2 + 4 * e1, e1]])
    return [
        Sample((x, coeff), SplineAttrs(3, -1.0, 1.0), expect=want_, tags=("hand",)),
        Sample((np.float32([2.0]), np.float32([[0.5]])), SplineAttrs(1, 0.0, 0.0),
               expect=np.float32([0.5 * e4]), tags=("one-basis", "rank-1")),
        Sample((_r(rng, 2, 3, 5), _r(rng, 5, 7)), SplineAttrs(7, -2.0, 2.0),
               tags=("rank-3", "prime")),
        Sample((np.float32([[-30.0, 30.0]]), _r(rng, 2, 4)), SplineAttrs(4, -1.0, 1.0),
               expect=np.float32([[0.0, 0.0]]), tags=("far-tail", "underflow")),
        Sample((np.zeros((0, 3), np.float32), _r(rng, 3, 2)), SplineAttrs(2, 0.0, 1.0),
               tags=("empty",)),
    ]


def _bwd_x_samples(rng):
    x = np.float32([[0.5]])
    coeff = np.float32([[1.0, 1.0]])
    # centers 0, 1 (step 1): d/dx Σ e^{-(x-c)²} = -2(0.5)e^{-.25} - 2(-0.5)e^{-.25} = 0
    return [
        Sample((x, coeff, np.float32([[3.0]])), SplineAttrs(2, 0.0, 1.0),
               expect=np.float32([[0.0]]), tags=("hand", "symmetric")),
        Sample((np.float32([1.0]), np.float32([[2.0]]), np.float32([1.0])),
               SplineAttrs(1, 0.0, 0.0), expect=np.float32([-4 * math.exp(-1)]),
               tags=("hand", "one-basis")),
        Sample((_r(rng, 3, 4), _r(rng, 4, 5), _r(rng, 3, 4)), SplineAttrs(5, -1.5, 1.5),
               tags=("random",)),
        Sample((np.zeros((0, 2), np.float32), _r(rng, 2, 3), np.zeros((0, 2), np.float32)),
               SplineAttrs(3, 0.0, 1.0), tags=("empty",)),
    ]


def _bwd_coeff_samples(rng):
    x = np.float32([[0.0], [1.0]])
    up = np.float32([[1.0], [2.0]])
    e1 = math.exp(-1)
    # centers 0, 1: dcoeff[0] = [1·1 + 2e⁻¹, 1·e⁻¹ + 2·1]
    return [
        Sample((x, up), SplineAttrs(2, 0.0, 1.0),
               expect=np.float32([[1 + 2 * e1, e1 + 2]]), tags=("hand",)),
        Sample((_r(rng, 2, 3, 4), _r(rng, 2, 3, 4)), SplineAttrs(6, -2.0, 2.0),
               tags=("rank-3",)),
        Sample((np.float32([0.25, -0.5, 3.0]), np.float32([1.0, -1.0, 2.0])),
               SplineAttrs(1, 0.0, 0.0), tags=("rank-1", "one-basis")),
        Sample((np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32)),
               SplineAttrs(2, 0.0, 1.0), expect=np.zeros((3, 2), np.float32),
               tags=("empty",)),
    ]


_GRID = ("C1: x has rank >= 1; its last axis is the channel axis C.",
         "C2: num_basis >= 1; grid_min and grid_max are finite, grid_min < grid_max when "
         "num_basis > 1.",
         "C3: every operand has x's dtype, f32 or f64.")
_NOTE = ("RLX's kernels are f32 only and accept any payload (a zero step gives inf/NaN); "
         "here f64 is accepted too and a degenerate grid is a verifier error. The grid "
         "constants are rounded as RLX rounds them (f32); the basis sums are taken in f64.")

register(OpDef(
    kind="SplineActivation", family=FAMILY, attrs=SplineAttrs, payload="struct", arity=2,
    input_names=("x", "coeff"), infer=_infer_fwd, check=lambda s, a, o: _infer_fwd(s, a),
    reference=_ref_fwd,
    doc="KAN learnable activation: `y[.., c] = Σ_g coeff[c, g]·exp(−((x[.., c] − center_g)"
        "·inv_h)²)` with `center_g = grid_min + g·step`, `step = (grid_max − grid_min)/"
        "(num_basis − 1)` (1 when num_basis is 1) and `inv_h = 1/step`. y has x's shape.",
    constraints=_GRID + ("C4: coeff is [C, num_basis].",),
    samples=_fwd_samples, dtypes=FLOATS, notes=_NOTE))

register(OpDef(
    kind="SplineActivationBackwardX", family=FAMILY, attrs=SplineAttrs, payload="struct",
    arity=3, input_names=("x", "coeff", "upstream"), infer=_infer_bwd_x,
    check=lambda s, a, o: _infer_bwd_x(s, a), reference=_ref_bwd_x,
    doc="The x-gradient of SplineActivation: `dx = upstream·Σ_g coeff[c, g]·B_g'(x)` with "
        "`B_g(v) = exp(−z²)`, `z = (v − center_g)·inv_h`, so `B_g' = −2·inv_h·z·B_g`. dx has "
        "x's shape.",
    constraints=_GRID + ("C4: coeff is [C, num_basis].", "C5: upstream has x's shape."),
    samples=_bwd_x_samples, dtypes=FLOATS, notes=_NOTE))

register(OpDef(
    kind="SplineActivationBackwardCoeff", family=FAMILY, attrs=SplineAttrs, payload="struct",
    arity=2, input_names=("x", "upstream"), infer=_infer_bwd_coeff,
    check=lambda s, a, o: _infer_bwd_coeff(s, a), reference=_ref_bwd_coeff,
    doc="The coeff-gradient of SplineActivation: `dcoeff[c, g] = Σ over every leading index "
        "of upstream[.., c]·B_g(x[.., c])`, a `[C, num_basis]` tensor.",
    constraints=_GRID + ("C4: (no coeff operand) the output is [C, num_basis].",
                         "C5: upstream has x's shape."),
    samples=_bwd_coeff_samples, dtypes=FLOATS,
    notes=_NOTE + " RLX's shape rule makes dcoeff f32 whatever x is; here it has x's dtype "
                  "(the same for RLX's only dtype, f32)."))
