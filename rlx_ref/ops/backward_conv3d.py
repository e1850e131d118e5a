"""Backward kinds of 3-D max pooling and convolution: MaxPool3dBackward,
Conv3dBackwardInput, Conv3dBackwardWeight.

As for the 2-D kinds (``backward_conv.py``), each payload carries the FORWARD op's
geometry as RLX's ``Vec<usize>`` lists, and each kind is the exact vector-Jacobian product
of rlx_ref's forward ``Pool`` (kind Max, 3-D) or ``Conv3d`` with that geometry.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..conformance.accuracy import reduction
from . import _conv3d_ref as R3
from .backward_conv import _forward, _same_dy
from .codec import USIZE, ListOf, attr
from .conv import PoolAttrs, _pool_geometry, _window
from .conv3d import SAMPLED, Conv3dAttrs, conv3d_geometry
from .opdef import Caps, OpDef, compute_dtype, register, want

BLAS_BOUNDARY = Caps.BLAS | Caps.FUSION_BOUNDARY
_LIST = ListOf(USIZE)


def _lazy_samples(name: str):
    def samples(rng):
        from . import _conv3d_samples

        return getattr(_conv3d_samples, name)(rng)
    return samples


# ── MaxPool3dBackward ─────────────────────────────────────────────────────

@dataclass(frozen=True)
class MaxPool3dBackwardAttrs:
    kernel_size: tuple = attr(_LIST, doc="the forward pool's [kD, kH, kW]")
    stride: tuple = attr(_LIST, (), doc="the forward pool's strides; missing entries are 1")
    padding: tuple = attr(_LIST, (), doc="the forward pool's padding; missing entries are 0")


def _check_maxpool3d_backward(shapes, a, out):
    x, dy = shapes
    want(len(a.kernel_size) == 3 and x.rank == 5,
         f"(C1) MaxPool3dBackward is 3-D: x must be NCDHW (rank 5) and kernel_size "
         f"[kD, kH, kW], got x {x} and kernel_size {list(a.kernel_size)}")
    fwd = _forward("MaxPool3dBackward", f"Pool Max of x {x}", _pool_geometry, [x],
                   PoolAttrs("Max", a.kernel_size, a.stride, a.padding))
    want(dy.dtype == x.dtype, f"(C2) dy and x must share one dtype, got {dy.dtype} and "
                              f"{x.dtype}")
    _same_dy("MaxPool3dBackward", dy, fwd, "Pool")


def _ref_maxpool3d_backward(ctx, x, dy):
    g = _window(ctx.attrs, 3, ("stride", "padding"))
    dx = R3.max_pool_backward_nd(compute_dtype(x), compute_dtype(dy), g["kernel"],
                                 g["stride"], g["padding"])
    return dx.astype(ctx.out_np)


register(OpDef(
    kind="MaxPool3dBackward", family="backward", attrs=MaxPool3dBackwardAttrs,
    payload="struct", arity=2, caps=Caps.NONE, infer=lambda s, a: s[0],
    check=_check_maxpool3d_backward, reference=_ref_maxpool3d_backward,
    input_names=("x", "dy"),
    doc="The gradient of a 3-D `Pool` with kind Max with respect to its NCDHW input `x`: "
        "each window's `dy[n, c, od, oh, ow]` goes to the position of that window's maximum "
        "in `x` (recomputed from x; no saved indices), and positions that win several "
        "windows receive the sum. The FIRST maximum in window order `(i, j, l)` (depth, "
        "row, column) wins ties; a NaN counts as the maximum (the first NaN wins) and padding "
        "never wins, so a window made only of padding routes nothing. Geometry is the "
        "forward pool's (`Pool`: skipped padding, floor output size).",
    constraints=(
        "C1: x is a float NCDHW tensor, kernel_size has 3 entries, and the forward `Pool` "
        "(kind Max) of x with this geometry is valid (Pool's C2, C5).",
        "C2: dy is that pool's output [N, C, D_out, H_out, W_out] with x's dtype; the output "
        "has x's shape and dtype.",
    ),
    samples=_lazy_samples("maxpool3d_backward_samples"), dtypes=SAMPLED,
    accuracy=reduction(2, lambda a, s: int(np.prod(a.kernel_size)), "all"),
    notes="RLX's CPU kernel (`maxpool3d_backward_ncdhw`) takes the first in-range position "
          "and then a strict `>`, so a NaN wins only when it comes first; here the first NaN "
          "wins (the forward max propagates NaN), as MaxPool2dBackward does. Both agree on "
          "every window without NaN.",
))


# ── Conv3dBackwardInput and Conv3dBackwardWeight ──────────────────────────

@dataclass(frozen=True)
class Conv3dBackwardAttrs:
    kernel_size: tuple = attr(_LIST, doc="the forward conv's [kD, kH, kW]")
    stride: tuple = attr(_LIST, (1, 1, 1), doc="[sD, sH, sW]; missing entries are 1")
    padding: tuple = attr(_LIST, (0, 0, 0), doc="[pD, pH, pW]; missing entries are 0")
    dilation: tuple = attr(_LIST, (1, 1, 1), doc="[dD, dH, dW]; missing entries are 1")
    groups: int = attr(USIZE, 1, doc="channel groups")


def forward_attrs(a) -> Conv3dAttrs:
    """The forward Conv3d payload: the lists padded to 3 entries with their defaults."""
    g = _window(a, 3)
    return Conv3dAttrs(g["stride"], g["padding"], g["dilation"], a.groups)


def _conv_forward(kind: str, x, w, a):
    """The forward Conv3d's output shape; also checks kernel_size against w's dims."""
    fwd = _forward(kind, f"Conv3d of x {x} and w {w}",
                   lambda s, f: conv3d_geometry(s, f, False), [x, w], forward_attrs(a))
    if w.rank == 5 and w.is_static:
        want(tuple(w.dims[2:]) == tuple(a.kernel_size),
             f"(C1) {kind}: kernel_size {list(a.kernel_size)} does not match the weight's "
             f"kernel dims {list(w.dims[2:])}")
    return fwd


def _check_conv3d_backward_input(shapes, a, out):
    dy, w = shapes
    fwd = _conv_forward("Conv3dBackwardInput", out, w, a)
    want(dy.dtype == w.dtype, f"(C2) dy and w must share one dtype, got {dy.dtype} and "
                              f"{w.dtype}")
    _same_dy("Conv3dBackwardInput", dy, fwd, "Conv3d")


def _check_conv3d_backward_weight(shapes, a, out):
    x, dy = shapes
    fwd = _conv_forward("Conv3dBackwardWeight", x, out, a)
    want(dy.dtype == x.dtype, f"(C2) dy and x must share one dtype, got {dy.dtype} and "
                              f"{x.dtype}")
    _same_dy("Conv3dBackwardWeight", dy, fwd, "Conv3d")


def _ref_conv3d_backward_input(ctx, dy, w):
    f = forward_attrs(ctx.attrs)
    # Conv3d's adjoint is the transposed convolution with the same geometry, onto x's
    # declared extent (planes the forward's floor never read get 0)
    dx = R3.conv_transpose_nd(compute_dtype(dy), compute_dtype(w), f.stride, f.padding,
                              f.dilation, (0, 0, 0), f.groups, ctx.out_dims[2:])
    return dx.astype(ctx.out_np)


def _ref_conv3d_backward_weight(ctx, x, dy):
    f = forward_attrs(ctx.attrs)
    dw = R3.conv_backward_weight_nd(compute_dtype(x), compute_dtype(dy),
                                    tuple(ctx.attrs.kernel_size), f.stride, f.padding,
                                    f.dilation, f.groups)
    return dw.astype(ctx.out_np)


_GEOMETRY = ("The payload is the forward `Conv3d`'s (kernel_size, stride, padding, "
             "dilation, groups; missing list entries 1, 0, 1), as are the layouts: x "
             "`[N, C_in, D, H, W]`, w `[C_out, C_in/groups, kD, kH, kW]`, dy "
             "`[N, C_out, D_out, H_out, W_out]`.")
_CONSTRAINTS = (
    "C1: the forward Conv3d of x and w (one of them the declared output) is valid "
    "(Conv3d's C1-C5) and kernel_size equals w's kernel dims.",
    "C2: dy is that Conv3d's output and shares the other operand's float dtype; the "
    "output has it too.",
)

register(OpDef(
    kind="Conv3dBackwardInput", family="backward", attrs=Conv3dBackwardAttrs,
    payload="struct", arity=2, caps=BLAS_BOUNDARY, check=_check_conv3d_backward_input,
    reference=_ref_conv3d_backward_input, input_names=("dy", "w"),
    doc="The gradient of `Conv3d` with respect to its input x: `dx[n, ci, z, y, x] = "
        "Σ dy[n, co, od, oh, ow] · w[co, ci mod C_in/groups, i, j, l]` over the windows "
        "whose tap (i, j, l) read (z, y, x) (`z = od·sD + i·dD − pD`, likewise y and x; co "
        "in ci's group): the transposed 3-D convolution of dy with w. The output shape is "
        "x's, declared on the node (positions the forward's floor left unread get 0). "
        + _GEOMETRY,
    constraints=_CONSTRAINTS,
    samples=_lazy_samples("conv3d_backward_input_samples"), dtypes=SAMPLED,
    accuracy=reduction(2, lambda a, s: s[1].dims[0] // a.groups * int(np.prod(a.kernel_size))),
    notes="RLX's builder takes the output shape from the caller; the check rebuilds the "
          "forward Conv3d from it. RLX's CPU reads stride/padding/dilation per axis from the "
          "lists (`conv3d_backward_input_ncdhw`).",
))

register(OpDef(
    kind="Conv3dBackwardWeight", family="backward", attrs=Conv3dBackwardAttrs,
    payload="struct", arity=2, caps=BLAS_BOUNDARY, check=_check_conv3d_backward_weight,
    reference=_ref_conv3d_backward_weight, input_names=("x", "dy"),
    doc="The gradient of `Conv3d` with respect to its weight w: `dw[co, c, i, j, l] = "
        "Σ_{n, od, oh, ow} x[n, g·C_in/groups + c, od·sD + i·dD − pD, oh·sH + j·dH − pH, "
        "ow·sW + l·dW − pW] · dy[n, co, od, oh, ow]` (g = co's group, zero padding). The "
        "output shape is w's, declared on the node. " + _GEOMETRY,
    constraints=_CONSTRAINTS,
    samples=_lazy_samples("conv3d_backward_weight_samples"), dtypes=SAMPLED,
    accuracy=reduction(2, lambda a, s: max(1, s[1].numel // max(1, s[1].dims[1]))),
    notes="RLX's builder takes the output shape from the caller (w's shape); the check "
          "rebuilds the forward Conv3d from it.",
))
