"""Volumetric (NCDHW) kinds: Conv3d, ConvTranspose3d, Interpolate3d (family movement,
beside ResizeNearest2x, as RLX's op-coverage lists it).

Conv3d and ConvTranspose3d mirror ``Conv`` / ``ConvTranspose2d`` with a depth axis; their
payloads are RLX's fixed ``[usize; 3]`` arrays and the kernel size is read from the weight.
The numpy references are in ``_conv3d_ref.py``; the backward kinds in ``backward_conv3d.py``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..conformance.accuracy import exact, reduction
from ..ir.dtype import DType
from ..ir.shape import Shape
from . import _conv3d_ref as R3
from . import _conv_ref as R
from .codec import USIZE, ListOf, TupleOf, attr
from .conv import _dims_or_none, _float_operands
from .opdef import Caps, OpDef, compute_dtype, register, want

BLAS_BOUNDARY = Caps.BLAS | Caps.FUSION_BOUNDARY
_TRIPLE = TupleOf(USIZE, USIZE, USIZE)
AXES = "DHW"
# the dtypes conformance samples: RLX runs these kinds in f32; f16/bf16 also verify here
# (they compute in f32) but are not sampled, to keep the default suite small
SAMPLED = (DType.F32, DType.F64)


@dataclass(frozen=True)
class Conv3dAttrs:
    stride: tuple = attr(_TRIPLE, (1, 1, 1), doc="[sD, sH, sW]")
    padding: tuple = attr(_TRIPLE, (0, 0, 0), doc="[pD, pH, pW], symmetric zero padding")
    dilation: tuple = attr(_TRIPLE, (1, 1, 1), doc="[dD, dH, dW]")
    groups: int = attr(USIZE, 1, doc="channel groups (C_in and C_out both divisible)")


@dataclass(frozen=True)
class ConvTranspose3dAttrs:
    stride: tuple = attr(_TRIPLE, (1, 1, 1), doc="[sD, sH, sW]")
    padding: tuple = attr(_TRIPLE, (0, 0, 0), doc="[pD, pH, pW] cropped from each side")
    dilation: tuple = attr(_TRIPLE, (1, 1, 1), doc="[dD, dH, dW]")
    output_padding: tuple = attr(_TRIPLE, (0, 0, 0), doc="extra planes at the far end")
    groups: int = attr(USIZE, 1, doc="channel groups")


@dataclass(frozen=True)
class Interpolate3dAttrs:
    size: tuple = attr(ListOf(USIZE), doc="[D_out, H_out, W_out]")


def _lazy_samples(name: str):
    """Samples live in ``_conv3d_samples``, which imports this module's attrs classes."""
    def samples(rng):
        from . import _conv3d_samples

        return getattr(_conv3d_samples, name)(rng)
    return samples


# ── Conv3d and ConvTranspose3d ─────────────────────────────────────────────

def conv3d_geometry(shapes, a, transpose: bool):
    """Validate Conv3d / ConvTranspose3d and return the output Shape (None: dims dynamic)."""
    kind = "ConvTranspose3d" if transpose else "Conv3d"
    x, w = shapes
    want(x.rank == 5, f"(C1) {kind} input must be NCDHW (rank 5), got rank {x.rank} {x}")
    want(w.rank == 5, f"(C1) {kind} weight must be rank 5 "
                      f"{'[C_in, C_out/groups' if transpose else '[C_out, C_in/groups'}, "
                      f"kD, kH, kW], got rank {w.rank} {w}")
    for f in ("stride", "dilation"):
        want(all(v >= 1 for v in getattr(a, f)),
             f"(C2) {f} entries must be >= 1, got {list(getattr(a, f))}")
    want(a.groups >= 1, f"(C3) groups must be >= 1, got {a.groups}")
    if transpose:
        for ax, op, s, d in zip(AXES, a.output_padding, a.stride, a.dilation):
            want(op < max(s, d), f"(C2) output_padding {op} along {ax} must be smaller than "
                                 f"stride {s} or dilation {d}")
    _float_operands(shapes, kind)
    xd, wd = _dims_or_none(x), _dims_or_none(w, skip_batch=False)
    if xd is None or wd is None:
        return None
    kernel = tuple(wd[2:])
    want(all(k >= 1 for k in kernel), f"(C2) the weight's kernel dims must be >= 1, got {w}")
    c_in, groups = xd[1], a.groups
    if transpose:
        want(wd[0] == c_in, f"(C3) ConvTranspose3d weight C_in={wd[0]} != input C={c_in} "
                            f"(weight is [C_in, C_out/groups, kD, kH, kW])")
        want(c_in % groups == 0, f"(C3) groups={groups} does not divide C_in={c_in}")
        c_out = wd[1] * groups
        outs = [R3.transpose_out_size(*v, kind) for v in
                zip(xd[2:], kernel, a.stride, a.padding, a.dilation, a.output_padding, AXES)]
    else:
        want(wd[1] * groups == c_in, f"(C3) Conv3d weight C_in/g={wd[1]} * groups={groups} "
                                     f"!= input C={c_in}")
        want(wd[0] % groups == 0, f"(C3) groups={groups} does not divide C_out={wd[0]}")
        c_out = wd[0]
        outs = [R.conv_out_size(*v) for v in
                zip(xd[2:], kernel, a.stride, a.padding, a.dilation, AXES)]
    return Shape((xd[0], c_out) + tuple(outs), x.dtype)


def _ref_conv3d(ctx, x, w):
    a = ctx.attrs
    out = R3.conv_nd(compute_dtype(x), compute_dtype(w), a.stride, a.padding, a.dilation,
                     a.groups)
    return out.astype(ctx.out_np)


def _ref_conv_transpose3d(ctx, x, w):
    a = ctx.attrs
    out = R3.conv_transpose_nd(compute_dtype(x), compute_dtype(w), a.stride, a.padding,
                               a.dilation, a.output_padding, a.groups, ctx.out_dims[2:])
    return out.astype(ctx.out_np)


register(OpDef(
    kind="Conv3d", family="conv", attrs=Conv3dAttrs, payload="struct", arity=2,
    caps=BLAS_BOUNDARY, input_names=("x", "w"),
    check=lambda s, a, o: conv3d_geometry(s, a, False),
    infer=lambda s, a: conv3d_geometry(s, a, False), reference=_ref_conv3d,
    doc="3-D cross-correlation (no kernel flip) on NCDHW: `x [N, C_in, D, H, W]`, weight "
        "`w [C_out, C_in/groups, kD, kH, kW]` (PyTorch layout; the kernel size is the "
        "weight's), no bias. `out[n, co, od, oh, ow] = Σ_c Σ_{i,j,l} x[n, g·C_in/groups + c, "
        "od·sD + i·dD − pD, oh·sH + j·dH − pH, ow·sW + l·dW − pW] · w[co, c, i, j, l]` with "
        "`g = co // (C_out/groups)`; positions outside the input read 0. "
        "`D_out = (D + 2pD − dD(kD−1) − 1) // sD + 1` (floor), likewise H and W.",
    constraints=(
        "C1: x is rank 5 (NCDHW); w is rank 5.",
        "C2: stride and dilation entries are >= 1; the kernel dims of w are >= 1.",
        "C3: groups >= 1; w.dim1 · groups == C_in; groups divides C_out.",
        "C4: x and w share one float dtype; the output has it.",
        "C5: the dilated kernel fits the padded input on each axis: in + 2p >= d(k−1) + 1.",
        "C6: the output is [N, C_out, D_out, H_out, W_out].",
    ),
    samples=_lazy_samples("conv3d_samples"), dtypes=SAMPLED,
    accuracy=reduction(2, lambda a, s: s[1].numel // s[1].dims[0]),  # C_in/groups · kvol
    notes="RLX's builder computes the shape with conv3d_output_shape; rlx_ref infers the same "
          "and rejects a kernel that fits nowhere (C5). RLX's CPU is f32 only; 16-bit floats "
          "accumulate in f32 here.",
))

register(OpDef(
    kind="ConvTranspose3d", family="conv", attrs=ConvTranspose3dAttrs, payload="struct",
    arity=2, caps=BLAS_BOUNDARY, input_names=("x", "w"),
    check=lambda s, a, o: conv3d_geometry(s, a, True),
    infer=lambda s, a: conv3d_geometry(s, a, True), reference=_ref_conv_transpose3d,
    doc="Transposed 3-D convolution (the adjoint of `Conv3d` with the same geometry) on "
        "NCDHW: `x [N, C_in, D, H, W]`, weight `w [C_in, C_out/groups, kD, kH, kW]` (PyTorch "
        "layout), no bias. Scatter form: every `x[n, ci, z, y, x] · w[ci, o, i, j, l]` is "
        "added to `out[n, g·C_out/groups + o, z·sD + i·dD − pD, y·sH + j·dH − pH, "
        "x·sW + l·dW − pW]` (g = ci // (C_in/groups)); contributions outside the output are "
        "dropped. `D_out = (D − 1)·sD + opD + dD(kD − 1) − 2pD + 1`, likewise H and W.",
    constraints=(
        "C1: x is rank 5 (NCDHW); w is rank 5.",
        "C2: stride and dilation entries are >= 1; output_padding < max(stride, dilation) "
        "per axis; the kernel dims of w are >= 1.",
        "C3: groups >= 1 divides C_in; w.dim0 == C_in; C_out = w.dim1 · groups.",
        "C4: x and w share one float dtype; the output has it.",
        "C5: the input is non-empty spatially and D_out, H_out, W_out >= 1.",
        "C6: the output is [N, C_out, D_out, H_out, W_out].",
    ),
    samples=_lazy_samples("conv_transpose3d_samples"), dtypes=SAMPLED,
    accuracy=reduction(2, lambda a, s: s[1].dims[0] // a.groups * int(np.prod(s[1].dims[2:]))),
    notes="The output_padding < max(stride, dilation) rule is PyTorch's; RLX does not check "
          "it. RLX's CPU kernel takes the output size from the declared shape and ignores "
          "output_padding, which gives the same values.",
))


# ── Interpolate3d ──────────────────────────────────────────────────────────

def _infer_interpolate3d(shapes, a):
    (x,) = shapes
    want(x.rank == 5, f"(C1) Interpolate3d needs an NCDHW (rank 5) input, got rank {x.rank} "
                      f"{x}")
    want(len(a.size) == 3, f"(C2) size must be [D_out, H_out, W_out], got {list(a.size)}")
    want(all(s >= 1 for s in a.size), f"(C2) size entries must be >= 1, got {list(a.size)}")
    xd = _dims_or_none(x)
    if xd is not None:
        want(all(v >= 1 for v in xd[2:]),
             f"(C3) Interpolate3d needs a non-empty input volume, got {x}")
    return x.with_dims(tuple(x.dims[:2]) + tuple(a.size))


def _ref_interpolate3d(ctx, x):
    return R3.interpolate3d(x, ctx.attrs.size).astype(ctx.out_np)


register(OpDef(
    kind="Interpolate3d", family="movement", attrs=Interpolate3dAttrs, payload="struct",
    arity=1, caps=Caps.TRANSFORM, input_names=("x",),
    infer=_infer_interpolate3d, check=lambda s, a, o: _infer_interpolate3d(s, a),
    reference=_ref_interpolate3d,
    doc="Nearest-neighbour resample of the spatial axes of an NCDHW tensor to an explicit "
        "size: `out[n, c, z, y, x] = in[n, c, src(z, D), src(y, H), src(x, W)]` with "
        "`src(o, L) = min(floor(o·L / L_out), L − 1)` (PyTorch's `mode='nearest'`, not "
        "`'nearest-exact'`), computed in exact integers. Downsampling picks, upsampling "
        "repeats; values are copied bit for bit.",
    constraints=(
        "C1: x has rank 5 (NCDHW).",
        "C2: size has 3 entries, each >= 1.",
        "C3: the input volume is non-empty (D, H, W >= 1).",
        "C4: the output is [N, C, *size] with x's dtype.",
    ),
    samples=_lazy_samples("interpolate3d_samples"), dtypes=SAMPLED, accuracy=exact(),
    notes="RLX's op doc gives the mapping; its graph builder `interpolate3d` is a separate "
          "decomposition (half-pixel or align-corners grids) that never emits this kind. "
          "RLX computes the index in f32 arithmetic on some backends; the exact integer "
          "form agrees wherever that rounding is exact.",
))
