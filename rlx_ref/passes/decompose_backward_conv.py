"""Decompositions of MaxPool2dBackward, Conv2dBackwardInput and Conv2dBackwardWeight into
forward conv/pool kinds and data movement (differentiable again, kernels every backend has).
"""
from __future__ import annotations

import itertools

import numpy as np

from ..ir.dtype import DType
from ..ir.graph import Graph
from ..ir.shape import Shape
from ..ops._conv_ref import per_axis
from ..ops.backward_conv import output_padding
from .decompose import _narrow, _reshape, _static, _transpose, constant, decomposes


def _geometry(a, fields=("stride", "padding", "dilation")) -> dict:
    return {"kernel": tuple(a.kernel_size), **{f: per_axis(a, f, 2) for f in fields}}


# ── MaxPool2dBackward ──────────────────────────────────────────────────────

def _tap(g, xp, i, j, out_hw, stride):
    """The input element tap (i, j) of every window reads: ``xp[..., i::sH, j::sW]``."""
    rows = g.op("Slice", (xp,), axis=2, start=i, len=out_hw[0], step=stride[0])
    return g.op("Slice", (rows,), axis=3, start=j, len=out_hw[1], step=stride[1])


def _inside(i, j, hw, out_hw, stride, pad) -> np.ndarray:
    """``[H_out, W_out]`` bool: tap (i, j) of that window reads a real element, not padding."""
    r = np.arange(out_hw[0]) * stride[0] + i - pad[0]
    c = np.arange(out_hw[1]) * stride[1] + j - pad[1]
    return ((r >= 0) & (r < hw[0]))[:, None] & ((c >= 0) & (c < hw[1]))[None, :]


@decomposes("MaxPool2dBackward",
            ("Pool", "Pad", "Slice", "Compare", "Where", "Constant", "Transpose", "Reshape",
             "Concat", "ScatterAdd", "Narrow"))
def lower_maxpool2d_backward(g: Graph, node, ins) -> int | None:
    """Recompute the window max with Pool; per tap in row-major order, the windows where
    this tap is the first to hold the max (or a NaN) take their dy; ScatterAdd puts every
    tap's share at its (padded) input position, taps in order as the oracle adds them."""
    x, dy = ins
    if not _static(g, ins):
        return None
    a, dt = node.attrs, node.shape.dtype
    geo = _geometry(a, ("stride", "padding"))
    (kh, kw), stride, pad = geo["kernel"], geo["stride"], geo["padding"]
    n, c, h, w = g.shape(x).dims
    out_hw = g.shape(dy).dims[2:]
    m = g.op("Pool", (x,), kind="Max", kernel_size=(kh, kw), stride=stride, padding=pad)
    xp = x
    if any(pad):            # the value is never read: padding taps are masked out below
        xp = g.op("Pad", (x,), pads=((0, 0), (0, 0), (pad[0],) * 2, (pad[1],) * 2),
                  mode=("Constant", 0.0))
    yes, no = constant(g, True, DType.BOOL), constant(g, False, DType.BOOL)
    zero = constant(g, 0, dt)
    found, parts, targets = None, [], []
    wp = w + 2 * pad[1]
    for i, j in itertools.product(range(kh), range(kw)):
        tap = _tap(g, xp, i, j, out_hw, stride)
        is_nan = g.op("Compare", (tap, tap), op="Ne")
        hit = g.op("Where", (g.op("Compare", (tap, m), op="Eq"), yes, is_nan))
        inside = _inside(i, j, (h, w), out_hw, stride, pad)
        if not inside.all():
            hit = g.op("Where", (constant(g, inside, DType.BOOL), hit, no))
        take = hit if found is None else g.op("Where", (found, no, hit))
        found = hit if found is None else g.op("Where", (found, yes, hit))
        share = g.op("Where", (take, dy, zero))                      # [N, C, H_out, W_out]
        parts.append(_reshape(g, _transpose(g, share, (2, 3, 0, 1)),
                              (out_hw[0] * out_hw[1], n, c)))
        rows = np.arange(out_hw[0]) * stride[0] + i
        cols = np.arange(out_hw[1]) * stride[1] + j
        targets.append((rows[:, None] * wp + cols[None, :]).reshape(-1))
    rows = parts[0] if len(parts) == 1 else g.op("Concat", parts, axis=0)
    index = constant(g, np.concatenate(targets).astype(np.int64), DType.I64)
    hp = h + 2 * pad[0]
    summed = g.op("ScatterAdd", (rows, index), shape=Shape((hp * wp, n, c), dt))
    dxp = _transpose(g, _reshape(g, summed, (hp, wp, n, c)), (2, 3, 0, 1))
    if pad[0]:
        dxp = _narrow(g, dxp, 2, pad[0], h)
    if pad[1]:
        dxp = _narrow(g, dxp, 3, pad[1], w)
    return dxp


# ── Conv2dBackwardInput ────────────────────────────────────────────────────

@decomposes("Conv2dBackwardInput", ("ConvTranspose2d",))
def lower_conv2d_backward_input(g: Graph, node, ins) -> int | None:
    """ConvTranspose2d of dy with the forward weight and geometry; output_padding restores
    the rows/cols the forward's floor left unread (the oracle computes exactly this)."""
    dy, w = ins
    if not _static(g, ins) or not node.shape.is_static:
        return None
    a = node.attrs
    geo = _geometry(a)
    dims = node.shape.dims
    x_hw = (1,) + dims[2:] if len(dims) == 3 else dims[2:]
    dy_hw = (1,) + g.shape(dy).dims[2:] if len(dims) == 3 else g.shape(dy).dims[2:]
    return g.op("ConvTranspose2d", (dy, w), kernel_size=geo["kernel"], stride=geo["stride"],
                padding=geo["padding"], dilation=geo["dilation"],
                output_padding=output_padding(x_hw, dy_hw, geo), groups=a.groups)


# ── Conv2dBackwardWeight ───────────────────────────────────────────────────

def _group_weight_grad(g, x, dy, geo):
    """One group: Conv(xᵀ, dyᵀ) with stride and dilation swapped is ``[C, C_out, kH', kW']``
    with kH' >= kH (the floor's spare rows); narrow to the kernel and swap the channels."""
    (kh, kw) = geo["kernel"]
    out_hw = g.shape(dy).dims[2:]
    xt, dyt = _transpose(g, x, (1, 0, 2, 3)), _transpose(g, dy, (1, 0, 2, 3))
    r = g.op("Conv", (xt, dyt), kernel_size=tuple(out_hw), stride=geo["dilation"],
             padding=geo["padding"], dilation=geo["stride"], groups=1)
    big = g.shape(r).dims
    if big[2] != kh:
        r = _narrow(g, r, 2, 0, kh)
    if big[3] != kw:
        r = _narrow(g, r, 3, 0, kw)
    return _transpose(g, r, (1, 0, 2, 3))


@decomposes("Conv2dBackwardWeight", ("Reshape", "Narrow", "Transpose", "Conv", "Concat"),
            exact=False, note="the sum over batch and windows runs in Conv's order (its "
                              "channel axis is the batch), not the oracle's einsum order")
def lower_conv2d_backward_weight(g: Graph, node, ins) -> int | None:
    """Per group: the weight gradient is a convolution of x with dy over the batch."""
    x, dy = ins
    if not _static(g, ins) or not node.shape.is_static:
        return None
    a, geo = node.attrs, _geometry(node.attrs)
    rank3 = len(node.shape.dims) == 3
    if rank3:                                    # [N, C, L] reads as [N, C, 1, L]
        x = _reshape(g, x, g.shape(x).dims[:2] + (1,) + g.shape(x).dims[2:])
        dy = _reshape(g, dy, g.shape(dy).dims[:2] + (1,) + g.shape(dy).dims[2:])
    c_g, co_g = g.shape(x).dims[1] // a.groups, g.shape(dy).dims[1] // a.groups
    parts = []
    for grp in range(a.groups):
        xg = _narrow(g, x, 1, grp * c_g, c_g) if a.groups > 1 else x
        dg = _narrow(g, dy, 1, grp * co_g, co_g) if a.groups > 1 else dy
        parts.append(_group_weight_grad(g, xg, dg, geo))
    dw = parts[0] if len(parts) == 1 else g.op("Concat", parts, axis=0)
    return _reshape(g, dw, node.shape.dims) if rank3 else dw
