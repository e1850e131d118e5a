"""Attention family, axial positions: AxialRope2d (SAM2's 2-D rotary embedding).

RLX's CPU runs ``rlx_ir::ops::axial_rope2d::apply_axial_rope2d`` once per batch plane of
``[batch, seq, num_heads·head_dim]``; the reference below is that function, vectorised.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..conformance.accuracy import reduction
from ..ir.dtype import DType
from ..ir.shape import Dyn
from .codec import F32, USIZE, attr
from .opdef import Caps, OpDef, Sample, compute_dtype, register, want

# sampled dtypes (RLX runs f32); f16/bf16 also verify and compute in f32
SAMPLED = (DType.F32, DType.F64)


@dataclass(frozen=True)
class AxialRope2dAttrs:
    end_x: int = attr(USIZE, doc="grid width (tokens per row)")
    end_y: int = attr(USIZE, doc="grid height (rows)")
    head_dim: int = attr(USIZE, doc="lanes per head; a multiple of 4")
    num_heads: int = attr(USIZE, doc="heads interleaved on the last axis")
    theta: float = attr(F32, 10000.0, doc="frequency base")
    repeat_factor: int = attr(USIZE, 1, doc="consecutive tokens sharing one grid position "
                                            "(0 reads as 1)")


def _check(shapes, a, out=None):
    (x,) = shapes
    want(a.head_dim >= 4 and a.head_dim % 4 == 0,
         f"(C1) head_dim must be a positive multiple of 4 (two rotated halves of pairs), "
         f"got {a.head_dim}")
    want(a.end_x >= 1 and a.end_y >= 1 and a.num_heads >= 1,
         f"(C1) end_x, end_y and num_heads must be >= 1, got {a.end_x}, {a.end_y}, "
         f"{a.num_heads}")
    want(math.isfinite(a.theta) and a.theta > 0, f"(C1) theta must be finite and > 0, got "
                                                 f"{a.theta}")
    want(x.rank == 3 and x.dtype.is_float,
         f"(C2) AxialRope2d takes a float [batch, seq, num_heads·head_dim] tensor, got {x}")
    hidden, seq = x.dims[2], x.dims[1]
    if not isinstance(hidden, Dyn):
        want(hidden == a.num_heads * a.head_dim,
             f"(C2) the last axis is {hidden}, expected num_heads·head_dim = "
             f"{a.num_heads}·{a.head_dim} = {a.num_heads * a.head_dim}")
    if not isinstance(seq, Dyn):
        need = a.end_x * a.end_y * max(a.repeat_factor, 1)
        want(seq == need, f"(C3) seq is {seq}, expected end_x·end_y·repeat_factor = {need}")
    return x


def angles(a, f64: bool):
    """(angle_x, angle_y) ``[seq, head_dim/4]``: grid column/row times ``theta^(−4i/hd)``.

    RLX forms both in f32; the float64 oracle forms them in f64.
    """
    dt = np.float64 if f64 else np.float32
    q4 = a.head_dim // 4
    freqs = (1.0 / np.power(dt(a.theta), np.arange(q4, dtype=dt) * 4 / dt(a.head_dim)))
    pos = np.arange(a.end_x * a.end_y * max(a.repeat_factor, 1)) // max(a.repeat_factor, 1)
    tx, ty = (pos % a.end_x).astype(dt), (pos // a.end_x).astype(dt)
    return (tx[:, None] * freqs.astype(dt)[None, :]).astype(dt), \
        (ty[:, None] * freqs.astype(dt)[None, :]).astype(dt)


def _ref(ctx, x):
    a = ctx.attrs
    wide = ctx.out_np
    f64 = wide == np.float64
    b, s, _ = x.shape
    ax, ay = angles(a, f64)
    xh = compute_dtype(x).astype(np.float64 if f64 else np.float32)
    xh = xh.reshape(b, s, a.num_heads, 2, a.head_dim // 4, 2)   # half, pair, lane of pair
    out = np.empty_like(xh)
    for half, ang in ((0, ax), (1, ay)):
        c, sn = np.cos(ang)[None, :, None, :], np.sin(ang)[None, :, None, :]
        x0, x1 = xh[:, :, :, half, :, 0], xh[:, :, :, half, :, 1]
        out[:, :, :, half, :, 0] = x0 * c - x1 * sn
        out[:, :, :, half, :, 1] = x0 * sn + x1 * c
    return out.reshape(x.shape).astype(wide)


def _samples(rng):
    A = AxialRope2dAttrs
    f = np.float32
    # head_dim 4, one head: lanes (0, 1) turn by tx, lanes (2, 3) by ty; grid 2 wide, so
    # token 3 sits at (tx, ty) = (1, 1) and both pairs turn by 1 radian
    x = np.tile(np.array([1, 0, 0, 1], f), (1, 4, 1))
    c1, s1 = np.cos(f(1.0)), np.sin(f(1.0))     # f32, as the f32 oracle forms them
    expect = np.array([[[1, 0, 0, 1], [c1, s1, 0, 1], [1, 0, -s1, c1],
                        [c1, s1, -s1, c1]]], f)
    return [
        Sample((x,), A(2, 2, 4, 1), tags=("hand",), expect=expect),
        Sample((rng.standard_normal((2, 6, 16)).astype(f),), A(3, 2, 8, 2, 100.0),
               tags=("batch", "heads")),
        Sample((rng.standard_normal((1, 12, 8)).astype(f),), A(2, 3, 8, 1, 10000.0, 2),
               tags=("repeat",)),
        Sample((rng.standard_normal((1, 5, 12)).astype(f),), A(5, 1, 4, 3, 10.0, 0),
               tags=("repeat-0", "odd")),
        Sample((np.zeros((0, 4, 4), f),), A(2, 2, 4, 1), tags=("empty",)),
    ]


register(OpDef(
    kind="AxialRope2d", family="attention", attrs=AxialRope2dAttrs, payload="struct",
    arity=1, caps=Caps.NONE, infer=lambda s, a: _check(s, a), check=_check, reference=_ref,
    input_names=("x",),
    doc="SAM2's axial 2-D rotary embedding on `x [batch, seq, num_heads·head_dim]`. Token t "
        "sits at grid position `p = t // repeat_factor` (repeat_factor 0 reads as 1), column "
        "`tx = p mod end_x`, row `ty = p // end_x`. With `q = head_dim/4` and "
        "`f_i = theta^(−4i/head_dim)` for i < q, every head rotates the interleaved pairs "
        "`(2i, 2i+1)` of its first half by `tx·f_i` and those of its second half "
        "(`head_dim/2 + 2i`, `+1`) by `ty·f_i`: `y₀ = x₀·cos − x₁·sin`, "
        "`y₁ = x₀·sin + x₁·cos`. Every batch plane is rotated alike.",
    constraints=(
        "C1: head_dim is a positive multiple of 4; end_x, end_y, num_heads >= 1; theta is "
        "finite and > 0.",
        "C2: x is a float rank-3 tensor whose last axis is num_heads·head_dim.",
        "C3: seq = end_x·end_y·max(repeat_factor, 1).",
        "C4: the output has x's shape and dtype.",
    ),
    samples=_samples, dtypes=SAMPLED,
    accuracy=reduction(2, 2, "row", axes=(-1,)),
    notes="RLX's op doc says `[1, seq, ...]` but its CPU rotates every batch plane; rlx_ref "
          "follows the CPU. RLX only debug-asserts C1 and C3; here they are verifier rules. "
          "RLX forms the angles in f32 (`tx as f32 * freqs[c]`); the f32 oracle does too.",
))
