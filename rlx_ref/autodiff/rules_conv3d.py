"""VJP rules of the 3-D convolutions, their backward kinds and Interpolate3d.

All four kinds are bilinear, so each cotangent is another of them with the same geometry:
Conv3d's are Conv3dBackwardInput/Weight (RLX's ``vjp_conv3d``), ConvTranspose3d's are
Conv3d and Conv3dBackwardWeight (its adjoint, as for ConvTranspose2d), and the backward
kinds' own rules (which forward mode derives its JVPs from) close the set.
"""
from __future__ import annotations

import numpy as np

from .vjp import vjp_rule


def _geometry(a, w_dims) -> dict:
    """A Conv3dBackward payload from a Conv3d-like payload and the weight's dims."""
    return dict(kernel_size=tuple(w_dims[2:]), stride=tuple(a.stride),
                padding=tuple(a.padding), dilation=tuple(a.dilation), groups=a.groups)


def _forward(a) -> dict:
    """A Conv3d payload from a backward kind's lists (missing entries 1, 0, 1)."""
    from ..ops.backward_conv3d import forward_attrs

    f = forward_attrs(a)
    return dict(stride=f.stride, padding=f.padding, dilation=f.dilation, groups=f.groups)


@vjp_rule("Conv3d")
def vjp_conv3d(ctx, dy):
    g, (x, w) = ctx.g, ctx.x
    kw = _geometry(ctx.attrs, ctx.in_shapes[1].dims)
    dx = g.op("Conv3dBackwardInput", (dy, w), shape=ctx.in_shapes[0], **kw) \
        if ctx.needs(0) else None
    dw = g.op("Conv3dBackwardWeight", (x, dy), shape=ctx.in_shapes[1], **kw) \
        if ctx.needs(1) else None
    return [dx, dw]


@vjp_rule("ConvTranspose3d")
def vjp_conv_transpose3d(ctx, dy):
    """dx = Conv3d(dy, w) with the same geometry (w [C_in, C_out/groups, k] reads as a
    Conv3d weight); dw is that Conv3d's weight gradient with input dy, cotangent x."""
    g, (x, w), a = ctx.g, ctx.x, ctx.attrs
    kw = _geometry(a, ctx.in_shapes[1].dims)
    dx = g.op("Conv3d", (dy, w), shape=ctx.in_shapes[0], stride=a.stride, padding=a.padding,
              dilation=a.dilation, groups=a.groups) if ctx.needs(0) else None
    dw = g.op("Conv3dBackwardWeight", (dy, x), shape=ctx.in_shapes[1], **kw) \
        if ctx.needs(1) else None
    return [dx, dw]


@vjp_rule("Conv3dBackwardInput")
def vjp_conv3d_backward_input(ctx, u):
    """dx = Conv3dᵀ(dy, w): d/d dy is Conv3d(u, w), d/dw the weight gradient of (u, dy)."""
    g, (dy, w), a = ctx.g, ctx.x, ctx.attrs
    d_dy = g.op("Conv3d", (u, w), shape=ctx.in_shapes[0], **_forward(a)) \
        if ctx.needs(0) else None
    d_w = g.op("Conv3dBackwardWeight", (u, dy), a, shape=ctx.in_shapes[1]) \
        if ctx.needs(1) else None
    return [d_dy, d_w]


@vjp_rule("Conv3dBackwardWeight")
def vjp_conv3d_backward_weight(ctx, u):
    """dw = Σ x ⋆ dy: d/dx is Conv3dBackwardInput(dy, u), d/d dy is Conv3d(x, u)."""
    g, (x, dy), a = ctx.g, ctx.x, ctx.attrs
    d_x = g.op("Conv3dBackwardInput", (dy, u), a, shape=ctx.in_shapes[0]) \
        if ctx.needs(0) else None
    d_dy = g.op("Conv3d", (x, u), shape=ctx.in_shapes[1], **_forward(a)) \
        if ctx.needs(1) else None
    return [d_x, d_dy]


@vjp_rule("Interpolate3d")
def vjp_interpolate3d(ctx, dy):
    """Each output voxel copies one source voxel, so dx sums dy over the outputs that read
    each source: per axis, a MatMul by the constant 0/1 matrix ``S[o, src(o)] = 1``
    (``[L_out, L_in]``) with that axis moved last (RLX's ``vjp_interpolate3d`` scatters)."""
    from ..ops._conv3d_ref import nearest_index
    from ._build import constant, inverse_perm, transpose

    g = ctx.g
    in_dims, out_dims = ctx.in_shapes[0].static_dims(), ctx.out_shape.static_dims()
    dt = ctx.in_shapes[0].dtype
    d = dy
    for axis in (4, 3, 2):
        l_in, l_out = in_dims[axis], out_dims[axis]
        sel = np.zeros((l_out, l_in))
        sel[np.arange(l_out), nearest_index(l_in, l_out)] = 1.0
        perm = [a for a in range(5) if a != axis] + [axis]
        moved = transpose(g, d, perm)
        summed = g.op("MatMul", (moved, constant(g, sel, dt, sel.shape)))
        d = transpose(g, summed, inverse_perm(perm))
    return [d]
