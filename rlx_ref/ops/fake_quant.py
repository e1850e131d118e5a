"""Fake-quantization family (quantization-aware training): FakeQuantize, its STE backward
FakeQuantizeBackward, Learned Step Size quantization FakeQuantizeLSQ and its two backward
kinds. Payloads, operand orders and arithmetic are RLX's (``rlx-ir/src/op.rs``; CPU kernels
in ``rlx-cpu/src/thunk/ops/quant.rs``).

Every kind quantizes symmetrically, per channel of ``axis`` (or per tensor): with
``q = q_max(bits)`` (8 → 127, 4 → 7, 2 → 1) and a scale ``s[c]``,
``out = clamp(round(x / s), -q, q) · s``, rounding half away from zero, in f32 (also for
the float64 oracle: f32 roundings decide the steps). The
formulas live in ``_fake_quant_math`` (one function per kind, shared with the
decompositions); samples in ``_fake_quant_samples``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..conformance.accuracy import exact, per_op, reduction, ulp
from ..ir.dtype import DType
from ..ir.shape import Dyn, Shape
from . import _fake_quant_math as fq
from ._fake_quant_codec import SCALE_MODE, STE, U8, mode_tag, needs_state
from ._fake_quant_samples import (backward_samples, fake_quantize_samples, lsq_samples)
from .codec import USIZE, Optional, attr
from .opdef import Caps, OpDef, register, want

F32_ONLY = (DType.F32,)


@dataclass(frozen=True)
class FakeQuantizeAttrs:
    bits: int = attr(U8, doc="quantized width: 8, 4 or 2 (q_max 127, 7, 1)")
    axis: int | None = attr(Optional(USIZE), doc="channel axis of x; None = one scale for "
                                                 "the whole tensor")
    ste: str = attr(STE, doc="straight-through estimator of the backward (the forward "
                             "ignores it): Identity, ClippedIdentity, Tanh or HardTanh")
    scale_mode: object = attr(SCALE_MODE, doc="PerBatch (max|x|/q_max each call), "
                              "{\"EMA\":{\"decay\":d}} or Fixed (read the state operand)")


@dataclass(frozen=True)
class FakeQuantizeBackwardAttrs:
    bits: int = attr(U8, doc="the forward's bits")
    axis: int | None = attr(Optional(USIZE), doc="the forward's channel axis")
    ste: str = attr(STE, doc="the straight-through estimator applied to dy")


@dataclass(frozen=True)
class LsqAttrs:
    bits: int = attr(U8, doc="quantized width: 8, 4 or 2 (q_max 127, 7, 1)")
    axis: int | None = attr(Optional(USIZE), doc="channel axis of x; None = per tensor "
                                                 "(scale holds one element)")


# ── checks ───────────────────────────────────────────────────────────────────

def _check_common(kind: str, shapes, a, names):
    for s, n in zip(shapes, names):
        want(s.dtype is DType.F32, f"(C1) {kind} operand `{n}` must be f32 (RLX's kernels "
                                   f"read f32 buffers), got {s.dtype}")
    want(a.bits in fq.Q_MAX, f"(C2) {kind} bits must be 8, 4 or 2 (q_max 127, 7, 1), got "
                             f"{a.bits}; RLX's kernels panic on any other width")
    x = shapes[0]
    want(a.axis is None or a.axis < x.rank,
         f"(C3) {kind} axis {a.axis} is out of range for x of rank {x.rank} (expected None "
         f"or 0..{x.rank - 1})")


def _check_channel_vector(kind: str, x: Shape, v: Shape, axis, label: str, cid: str):
    """RLX reads C = x.dims[axis] (1 per tensor) f32 values from the operand."""
    c = 1 if axis is None else x.dims[axis]
    if isinstance(c, Dyn) or not v.is_static:
        return
    want(v.numel == c, f"({cid}) {kind} `{label}` must hold C = {c} elements (x.dims[axis], "
                       f"or 1 when axis is None), got shape {v.dims_text()}")


def _check_like_x(kind: str, x: Shape, dy: Shape, cid: str):
    want(dy.dims == x.dims, f"({cid}) {kind} `dy` must have x's shape {x.dims_text()}, got "
                            f"{dy.dims_text()}")


def _check_fake_quantize(shapes, a, out):
    names = ("x", "state")[:len(shapes)]
    _check_common("FakeQuantize", shapes, a, names)
    wanted = 2 if needs_state(a.scale_mode) else 1
    want(len(shapes) == wanted,
         f"(C4) FakeQuantize with scale_mode {mode_tag(a.scale_mode)} takes {wanted} "
         f"operand(s) ({', '.join(('x', 'state')[:wanted])}), got {len(shapes)}")
    if wanted == 2:
        _check_channel_vector("FakeQuantize", shapes[0], shapes[1], a.axis, "state", "C5")
    if mode_tag(a.scale_mode) == "EMA":
        decay = a.scale_mode[1].decay
        want(math.isfinite(decay), f"(C6) FakeQuantize EMA decay must be finite, got {decay}")


def _check_backward(shapes, a, out):
    _check_common("FakeQuantizeBackward", shapes, a, ("x", "dy"))
    _check_like_x("FakeQuantizeBackward", shapes[0], shapes[1], "C4")


def _lsq_checker(kind: str, names: tuple):
    def check(shapes, a, out):
        _check_common(kind, shapes, a, names)
        _check_channel_vector(kind, shapes[0], shapes[1], a.axis, "scale", "C4")
        if len(names) == 3:
            _check_like_x(kind, shapes[0], shapes[2], "C5")
    return check


# ── references ───────────────────────────────────────────────────────────────

def _reference(rule):
    """The oracle: ``rule`` on f32 arrays, also for the float64 oracle: the kinds are
    defined by RLX's f32 arithmetic, whose roundings decide which step an element lands
    on (a tie, the clip bound s·q); a wider computation would decide some other way."""
    def ref(ctx, *arrays):
        with np.errstate(all="ignore"):
            ops = [np.asarray(a, np.float32) for a in arrays]
            out = np.asarray(rule(fq.NUMPY, ctx.attrs, *ops))
        return out.astype(ctx.out_np)
    ref.__doc__ = rule.__doc__
    return ref


def _x_shape(shapes, a):
    """x's shape and dtype"""
    return shapes[0]


def _scale_shape(shapes, a):
    """scale's shape and dtype (operand 1)"""
    return shapes[1]


def _per_channel(a, shapes) -> int:
    """Elements one channel's statistic combines (64 when dynamic)."""
    x = shapes[0]
    if not x.is_static:
        return 64
    c = 1 if a.axis is None else x.dims[a.axis]
    return max(1, x.numel // max(1, c))


_QUANT_ACC = ulp(2, reason="one division and one product per element; a backend that "
                           "rounds a tie the other way is one quantum off and fails")

# ── registrations ────────────────────────────────────────────────────────────

_C1 = "C1: every operand is an f32 tensor; "
_C2 = "C2: bits is 8, 4 or 2 (q_max = 127, 7, 1)."
_C3 = "C3: axis is None (per tensor) or an axis of x (0..rank-1)."
_ROUND = ("`round` is half away from zero (Rust's `f32::round`: 2.5 → 3, -0.5 → -1), "
          "`clamp` keeps NaN, and `x / s` is a true division.")

register(OpDef(
    kind="FakeQuantize", family="fake_quant", attrs=FakeQuantizeAttrs, payload="struct",
    arity=None, min_arity=1, caps=Caps.NONE, infer=_x_shape, check=_check_fake_quantize,
    reference=_reference(fq.fake_quantize), input_names=("x", "state"),
    doc="Quantize-then-dequantize for quantization-aware training: per channel c of `axis` "
        "(or per tensor), `out = clamp(round(x / s[c]), -q, q) · s[c]` with q = q_max(bits). "
        + _ROUND + " The scale: PerBatch `s = max(max|x[c]| / q, 1e-12)` (a NaN never wins "
        "the max; an all-zero channel gets 1e-12 and stays 0); EMA reads the state operand "
        "`[C]` and uses `s = cur` where `state <= 0` (cold start), else `decay·state + (1 - "
        "decay)·cur` (cur the PerBatch scale); Fixed uses `s = max(state, 1e-12)` (a NaN or "
        "non-positive state becomes 1e-12). The output is one tensor; `ste` only selects the "
        "backward.",
    constraints=(_C1 + "the output has x's shape and dtype.", _C2, _C3,
                 "C4: operands are x alone for PerBatch, x and state for EMA and Fixed.",
                 "C5: state holds exactly C elements: C = x.dims[axis], or 1 when axis is "
                 "None (`[C]`, or any shape with C elements).",
                 "C6: EMA's decay is finite."),
    samples=fake_quantize_samples, dtypes=F32_ONLY, accuracy=_QUANT_ACC,
    notes="EMA: RLX's CPU and CUDA kernels also write the blended scale back into the "
          "state operand's buffer in place (the running statistic of the next call). That "
          "write is a side effect outside RLX's SSA graph (a node has one output); here, "
          "as in a pure graph, the state operand is only read, and the output is the "
          "quantization with the blended scale. A caller that carries the statistic "
          "computes it as its own node. A channel whose max|x| is below q·1e-12 is "
          "quantized with the floor scale 1e-12 (not its own). An infinite element makes "
          "its channel's scale infinite, and then every element of that channel NaN "
          "(x/inf·inf), as in RLX. RLX's LowerFakeQuantize decomposition (PerBatch only) "
          "rounds half to even and multiplies by 1/q instead of dividing, so it differs "
          "from RLX's native kernels on exact .5 ties (RLX's XDNA test notes this); the "
          "native kernels' rounding is the one followed here. RLX has no verifier rule "
          "for C1-C6: other bit widths panic in its kernels, an out-of-range axis panics "
          "in its layout, a short state is read past its end.",
))

_STE_DOC = ("`Identity`: dx = dy; `ClippedIdentity`: dx = dy where |x| <= q·s, else 0; "
            "`Tanh`: dx = dy·(1 - tanh²(x/s)); `HardTanh`: dx = dy·max(1 - |x/(q·s)|, 0)")

register(OpDef(
    kind="FakeQuantizeBackward", family="fake_quant", attrs=FakeQuantizeBackwardAttrs,
    payload="struct", arity=2, caps=Caps.NONE, infer=_x_shape, check=_check_backward,
    reference=_reference(fq.fake_quantize_backward), input_names=("x", "dy"),
    doc="The gradient of FakeQuantize under a straight-through estimator: the rounding "
        "is treated as the identity (or a surrogate) and dy is attenuated. The PerBatch "
        "scale `s = max(max|x[c]| / q, 1e-12)` is recomputed from x, then " + _STE_DOC +
        " (a NaN x gives 0 under ClippedIdentity and HardTanh, as the comparisons and the "
        "NaN-ignoring max make it). Tanh and HardTanh are surrogates, not derivatives.",
    constraints=(_C1 + "the output has x's shape and dtype.", _C2, _C3,
                 "C4: dy has x's shape."),
    samples=backward_samples, dtypes=F32_ONLY,
    accuracy=per_op({"Identity": exact(), "ClippedIdentity": exact(),
                     "Tanh": ulp(4, floor=4, at_least=1),
                     "HardTanh": ulp(4, floor=4, at_least=1)}, key="ste"),
    notes="RLX's payload has no scale mode: the scale is always the PerBatch one "
          "recomputed from x, also when the forward ran EMA or Fixed (whose scale it "
          "cannot see), as RLX's CPU and CUDA kernels do. With the PerBatch scale |x| <= "
          "q·s holds up to the rounding of s·q, so ClippedIdentity zeroes only NaN and the "
          "element(s) where s·q rounds below max|x|. RLX's autodiff emits this kind only "
          "for a non-Identity ste (Identity routes dy through unchanged).",
))

_LSQ_DOC = ("`s[c] = max(scale[c], 1e-12)` (a NaN, zero or negative scale becomes 1e-12) "
            "and `z = x / s[c]`")

register(OpDef(
    kind="FakeQuantizeLSQ", family="fake_quant", attrs=LsqAttrs, payload="struct", arity=2,
    caps=Caps.NONE, infer=_x_shape, check=_lsq_checker("FakeQuantizeLSQ", ("x", "scale")),
    reference=_reference(fq.lsq), input_names=("x", "scale"),
    doc="Learned Step Size quantization (Esser et al. 2020): FakeQuantize with a learned "
        "per-channel scale operand: with " + _LSQ_DOC + ", `out = clamp(round(z), -q, q) · "
        "s[c]`. " + _ROUND,
    constraints=(_C1 + "the output has x's shape and dtype.", _C2, _C3,
                 "C4: scale holds exactly C elements: C = x.dims[axis], or 1 when axis is "
                 "None (RLX documents `[C]` and `[1]`)."),
    samples=lsq_samples("FakeQuantizeLSQ"), dtypes=F32_ONLY, accuracy=_QUANT_ACC,
    notes="RLX has no verifier rule for C1-C4.",
))

register(OpDef(
    kind="FakeQuantizeLSQBackwardX", family="fake_quant", attrs=LsqAttrs, payload="struct",
    arity=3, caps=Caps.NONE, infer=_x_shape,
    check=_lsq_checker("FakeQuantizeLSQBackwardX", ("x", "scale", "dy")),
    reference=_reference(fq.lsq_backward_x), input_names=("x", "scale", "dy"),
    doc="The gradient of FakeQuantizeLSQ with respect to x (clipped straight-through): "
        "with " + _LSQ_DOC + ", `dx = dy` where `|z| <= q`, else 0 (a NaN z gives 0).",
    constraints=(_C1 + "the output has x's shape and dtype.", _C2, _C3,
                 "C4: scale holds exactly C elements (C = x.dims[axis], or 1).",
                 "C5: dy has x's shape."),
    samples=lsq_samples("FakeQuantizeLSQBackwardX"), dtypes=F32_ONLY, accuracy=exact(),
))

register(OpDef(
    kind="FakeQuantizeLSQBackwardScale", family="fake_quant", attrs=LsqAttrs,
    payload="struct", arity=3, caps=Caps.NONE, infer=_scale_shape,
    check=_lsq_checker("FakeQuantizeLSQBackwardScale", ("x", "scale", "dy")),
    reference=_reference(fq.lsq_backward_scale), input_names=("x", "scale", "dy"),
    doc="The gradient of FakeQuantizeLSQ with respect to its scale, reduced per channel: "
        "with " + _LSQ_DOC + ", `dscale[c] = Σ ψ(z)·dy` over the channel's elements, "
        "`ψ(z) = round(z) - z` where `|z| <= q` (the straight-through derivative of "
        "`round(x/s)·s`), else `q` for z > 0 and `-q` otherwise (a NaN z counts as -q). "
        "The output has scale's shape.",
    constraints=(_C1 + "the output has scale's shape and dtype.", _C2, _C3,
                 "C4: scale holds exactly C elements (C = x.dims[axis], or 1).",
                 "C5: dy has x's shape."),
    samples=lsq_samples("FakeQuantizeLSQBackwardScale"), dtypes=F32_ONLY,
    accuracy=reduction(2, lambda a, s: _per_channel(a, s) + 2, "all",
                       reason="a sum per channel of terms ψ·dy, |ψ| <= q"),
    notes="LSQ's paper also scales this gradient by 1/sqrt(N·q); RLX does not, nor does "
          "the reference. RLX's CPU kernel sums each channel sequentially in f32; the "
          "reference's order is numpy's (within the contract).",
))
