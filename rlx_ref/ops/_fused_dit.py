"""Fused family, DiT modulation: AdaLayerNorm, GatedResidual and their packed backward
kinds (registered by ``fused.py``)."""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.dtype import DType
from ..ir.shape import broadcast_dims
from . import _fused_forms as F
from ._fused_def import register_fused
from .codec import F32, Enum, attr
from .opdef import want

FLOATS = (DType.F32, DType.F64)
ADA_NORM = Enum("AdaNormKind", units=("LayerNorm", "RmsNorm"))


def _samples(name: str):
    def samples(rng):
        from . import _fused_samples

        return getattr(_fused_samples, name)(rng)
    return samples


@dataclass(frozen=True)
class AdaLayerNormAttrs:
    norm: str = attr(ADA_NORM, doc="LayerNorm or RmsNorm, no learnable affine")
    eps: float = attr(F32, doc="the norm's epsilon")

    def __post_init__(self):
        object.__setattr__(self, "eps", F32.normalize(self.eps))


def _modulates(kind: str, x, m, label: str, cid: str) -> None:
    """``m`` broadcasts to x's dims and ends in x's feature dim."""
    want(x.rank >= 1, f"({cid}) {kind} x must have a feature axis, got {x}")
    try:
        ok = broadcast_dims(m.dims, x.dims) == x.dims
    except Exception:  # noqa: BLE001  (not broadcastable)
        ok = False
    want(ok and m.rank >= 1 and m.dims[-1] == x.dims[-1],
         f"({cid}) {kind} {label} {m} must broadcast to x {x} and end in its feature dim "
         f"{x.dims[-1]} (e.g. [B, 1, D] over [B, S, D])")


def _ada_rules(kind: str, backward: bool):
    def rules(shapes, a):
        want(a.norm in ADA_NORM.units, f"(C3) {kind} norm must be LayerNorm or RmsNorm, got "
                                       f"{a.norm!r}")
        x, scale, shift = shapes[:3]
        _modulates(kind, x, scale, "scale", "C3")
        want(shift.dims == scale.dims, f"(C3) {kind} shift must have scale's shape {scale}, "
                                       f"got {shift}")
        if backward:
            want(shapes[3].dims == x.dims, f"(C4) {kind} dy must have x's shape {x}, got "
                                           f"{shapes[3]}")
    return rules


def _gated_rules(kind: str, backward: bool):
    def rules(shapes, a):
        x, y, gate = shapes[:3]
        want(y.dims == x.dims, f"(C3) {kind} y must have x's shape {x}, got {y}")
        _modulates(kind, x, gate, "gate", "C3")
        if backward:
            want(shapes[3].dims == x.dims, f"(C4) {kind} dy must have x's shape {x}, got "
                                           f"{shapes[3]}")
    return rules


_ADA_C = (
    "C2: one dtype, f32 or f64.",
    "C3: norm is LayerNorm or RmsNorm; scale broadcasts to x and ends in x's last dim "
    "(e.g. [B, 1, D] over [B, S, D]); shift has scale's shape.")

register_fused(
    "AdaLayerNorm", F.ada_layer_norm, AdaLayerNormAttrs, ("x", "scale", "shift"),
    "DiT adaLN: `norm(x) · (1 + scale) + shift`, where `norm` normalizes the last axis "
    "with `eps` and no affine (LayerNorm: `(x - mean)/sqrt(var + eps)`; RmsNorm: "
    "`x/sqrt(mean(x²) + eps)`) and scale/shift broadcast over the other axes. "
    "Decomposition: the norm kind with unit gamma and zero beta, Binary Add of 1 to scale, "
    "Binary Mul, Binary Add of shift. Output has x's shape.",
    ("C1: three operands: x, scale, shift.",) + _ADA_C,
    _samples("ada_layer_norm"), FLOATS, rules=_ada_rules("AdaLayerNorm", False),
    notes="RLX's unfuse of this kind (`unfuse_dit_modulation`) is not in the public "
          "snapshot; the decomposition is the one its op doc states (`norm → "
          "mul(1 + scale) → add(shift)`).")

register_fused(
    "AdaLayerNormBackward", F.ada_layer_norm_backward, AdaLayerNormAttrs,
    ("x", "scale", "shift", "dy"),
    "Packed reverse of AdaLayerNorm: a 1-D `[nx + 2·ns]` holding `dx` (x's numel), "
    "`dscale` and `dshift` (scale's numel each), row-major. With `n = norm(x)`: "
    "`dshift = Σ dy` and `dscale = Σ dy·n` over the axes scale broadcasts along, and `dx` "
    "is the norm's input gradient (LayerNormBackwardInput / RmsNormBackwardInput with unit "
    "gamma) of `dy · (1 + scale)`.",
    ("C1: four operands: x, scale, shift, dy.",) + _ADA_C
    + ("C4: dy has x's shape.",),
    _samples("ada_layer_norm_backward"), FLOATS, rules=_ada_rules("AdaLayerNormBackward",
                                                                  True))

register_fused(
    "GatedResidual", F.gated_residual, None, ("x", "y", "gate"),
    "DiT gated residual `x + gate · y`; gate broadcasts over every axis but the last "
    "(e.g. `[B, 1, D]` over `[B, S, D]`). Decomposition: Binary Mul(gate, y), Binary "
    "Add(x, ·). Output has x's shape.",
    ("C1: three operands: x, y, gate.",
     "C2: one dtype, f32 or f64.",
     "C3: y has x's shape; gate broadcasts to x and ends in x's last dim."),
    _samples("gated_residual"), FLOATS, rules=_gated_rules("GatedResidual", False),
    payload="unit")

register_fused(
    "GatedResidualBackward", F.gated_residual_backward, None, ("x", "y", "gate", "dy"),
    "Packed reverse of GatedResidual: a 1-D `[nx + ny + ng]` holding `dx = dy`, "
    "`dy_y = dy · gate` and `dgate = Σ dy · y` over the axes gate broadcasts along, "
    "row-major.",
    ("C1: four operands: x, y, gate, dy.",
     "C2: one dtype, f32 or f64.",
     "C3: y has x's shape; gate broadcasts to x and ends in x's last dim.",
     "C4: dy has x's shape."),
    _samples("gated_residual_backward"), FLOATS,
    rules=_gated_rules("GatedResidualBackward", True), payload="unit")
