"""Backward kinds of max pooling and convolution: MaxPool2dBackward, Conv2dBackwardInput,
Conv2dBackwardWeight.

Each payload carries the FORWARD op's geometry (RLX's ``rlx-ir/src/op.rs``), and each kind
is the exact vector-Jacobian product of rlx_ref's forward ``Pool`` (kind Max) or ``Conv``
with that geometry. The checks rebuild the forward op's shapes and compare.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ..conformance.accuracy import reduction
from . import _conv_ref as R
from .codec import USIZE, ListOf, attr
from .conv import FLOATS, ConvAttrs, PoolAttrs, _as_4d, _conv_geometry, _pool_geometry, _window
from .opdef import Caps, OpDef, OpError, compute_dtype, register, want

BLAS_BOUNDARY = Caps.BLAS | Caps.FUSION_BOUNDARY
_LIST = ListOf(USIZE)


def _lazy_samples(name: str):
    """Samples live in ``_backward_conv_samples`` (it imports this module's attrs)."""
    def samples(rng):
        from . import _backward_conv_samples

        return getattr(_backward_conv_samples, name)(rng)
    return samples


def _forward(kind: str, what: str, rule, shapes, attrs):
    """The forward op's output shape; OpError naming the backward kind when it is invalid."""
    try:
        return rule(shapes, attrs)
    except OpError as e:
        raise OpError(f"{kind}: the forward {what} is invalid: {e}") from None


def _conv_forward(shapes, attrs):
    return _conv_geometry(shapes, attrs, False)


def _same_dy(kind: str, dy, expect, what: str):
    if expect is None:
        return
    want(dy == expect, f"(C2) {kind}: dy {dy} must be the forward {what}'s output {expect}")


# ── MaxPool2dBackward ─────────────────────────────────────────────────────

@dataclass(frozen=True)
class MaxPoolBackwardAttrs:
    kernel_size: tuple = attr(_LIST, doc="the forward pool's [kH, kW]")
    stride: tuple = attr(_LIST, (), doc="the forward pool's [sH, sW]; missing entries are 1")
    padding: tuple = attr(_LIST, (), doc="the forward pool's [pH, pW]; missing entries are 0")


def _pool_attrs(a) -> PoolAttrs:
    return PoolAttrs("Max", a.kernel_size, a.stride, a.padding)


def _check_maxpool_backward(shapes, a, out):
    x, dy = shapes
    want(len(a.kernel_size) == 2 and x.rank == 4,
         f"(C1) MaxPool2dBackward is 2-D: x must be NCHW (rank 4) and kernel_size [kH, kW], "
         f"got x {x} and kernel_size {list(a.kernel_size)}")
    fwd = _forward("MaxPool2dBackward", f"Pool Max of x {x}", _pool_geometry, [x], _pool_attrs(a))
    want(dy.dtype == x.dtype, f"(C2) dy and x must share one dtype, got {dy.dtype} and "
                              f"{x.dtype}")
    _same_dy("MaxPool2dBackward", dy, fwd, "Pool")


def max_pool_winners(x, kernel, stride, padding, out_hw):
    """For every window, which tap (row-major index into the kernel) holds its maximum, or
    -1 for a window made only of padding. The FIRST maximum in row-major window order wins
    ties; a NaN counts as the maximum (the first NaN wins, as the forward max propagates it);
    padding positions never win."""
    (kh, kw), (sh, sw), (ph, pw), (ho, wo) = kernel, stride, padding, out_hw
    h, w = x.shape[2:]
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    best = np.zeros(x.shape[:2] + (ho, wo), x.dtype)
    pick = np.full(best.shape, -1)
    for t, (i, j) in enumerate(itertools.product(range(kh), range(kw))):
        rows, cols = R.tap_slice(i, sh, ho), R.tap_slice(j, sw, wo)
        v = xp[:, :, rows, cols]
        # where this tap reads a real input element rather than padding
        r_in = (np.arange(ho) * sh + i - ph >= 0) & (np.arange(ho) * sh + i - ph < h)
        c_in = (np.arange(wo) * sw + j - pw >= 0) & (np.arange(wo) * sw + j - pw < w)
        inside = r_in[:, None] & c_in[None, :]
        with np.errstate(invalid="ignore"):
            better = (pick < 0) | (v > best) | (np.isnan(v) & ~np.isnan(best))
        better &= inside
        best = np.where(better, v, best)
        pick = np.where(better, t, pick)
    return pick


def _ref_maxpool_backward(ctx, x, dy):
    g = _window(ctx.attrs, 2, ("stride", "padding"))
    (kh, kw), (sh, sw), (ph, pw) = g["kernel"], g["stride"], g["padding"]
    xf, d = compute_dtype(x), compute_dtype(dy)
    ho, wo = dy.shape[2:]
    pick = max_pool_winners(xf, (kh, kw), (sh, sw), (ph, pw), (ho, wo))
    # route each window's dy to its winner, tap by tap (a position may win several windows)
    h, w = x.shape[2:]
    dxp = np.zeros(x.shape[:2] + (h + 2 * ph, w + 2 * pw), d.dtype)
    for t, (i, j) in enumerate(itertools.product(range(kh), range(kw))):
        dxp[:, :, R.tap_slice(i, sh, ho), R.tap_slice(j, sw, wo)] += np.where(pick == t, d, 0)
    return dxp[:, :, ph:ph + h, pw:pw + w].astype(ctx.out_np)


register(OpDef(
    kind="MaxPool2dBackward", family="backward", attrs=MaxPoolBackwardAttrs,
    payload="struct", arity=2, caps=Caps.NONE, infer=lambda s, a: s[0],
    check=_check_maxpool_backward, reference=_ref_maxpool_backward, input_names=("x", "dy"),
    doc="The gradient of a 2-D `Pool` with kind Max with respect to its NCHW input `x`: "
        "each window's `dy[n, c, ho, wo]` goes to the position of that window's maximum in "
        "`x` (recomputed from x; no saved indices), and positions that win several windows "
        "(stride < kernel) receive the sum. Tie rule (RLX's): the FIRST maximum in "
        "row-major window order `(i, j)` wins; a NaN counts as the maximum (the first NaN "
        "wins), and padding never wins, so a window made only of padding routes nothing. "
        "Geometry is the forward pool's (`Pool`: skipped padding, floor output size).",
    constraints=(
        "C1: x is a float NCHW tensor, kernel_size has 2 entries, and the forward `Pool` "
        "(kind Max) of x with this geometry is valid (Pool's C2, C5).",
        "C2: dy is that pool's output [N, C, H_out, W_out] with x's dtype; the output has "
        "x's shape and dtype.",
    ),
    samples=_lazy_samples("maxpool_backward_samples"), dtypes=FLOATS,
    accuracy=reduction(2, lambda a, s: int(np.prod(a.kernel_size)), "all"),
    notes="RLX's CPU kernel starts each window at -inf with a strict `>`, so a NaN never "
          "wins and a window whose real values are all -inf routes nothing; here the first "
          "NaN wins (the forward max propagates NaN) and an all -inf window routes to its "
          "first real position. Both agree on every window of finite values.",
))


# ── Conv2dBackwardInput and Conv2dBackwardWeight ──────────────────────────

def _check_conv_backward_input(shapes, a, out):
    dy, w = shapes
    fwd = _forward("Conv2dBackwardInput", f"Conv of x {out} (the declared output) and w {w}",
                   _conv_forward, [out, w], a)
    want(dy.dtype == w.dtype, f"(C2) dy and w must share one dtype, got {dy.dtype} and "
                              f"{w.dtype}")
    _same_dy("Conv2dBackwardInput", dy, fwd, "Conv")


def _check_conv_backward_weight(shapes, a, out):
    x, dy = shapes
    fwd = _forward("Conv2dBackwardWeight", f"Conv of x {x} and w {out} (the declared output)",
                   _conv_forward, [x, out], a)
    want(dy.dtype == x.dtype, f"(C2) dy and x must share one dtype, got {dy.dtype} and "
                              f"{x.dtype}")
    _same_dy("Conv2dBackwardWeight", dy, fwd, "Conv")


def output_padding(in_hw, out_hw, g) -> tuple:
    """Rows/cols the forward conv's floor left unread at the far end (0 <= r < stride)."""
    return tuple(n + 2 * p - d * (k - 1) - 1 - (m - 1) * s for n, m, k, s, p, d in
                 zip(in_hw, out_hw, g["kernel"], g["stride"], g["padding"], g["dilation"]))


def _ref_conv_backward_input(ctx, dy, w):
    g = _window(ctx.attrs, 2)
    d4, w4 = _as_4d(compute_dtype(dy), compute_dtype(w))
    x_hw = ((1,) + ctx.out_dims[2:]) if len(ctx.out_dims) == 3 else ctx.out_dims[2:]
    # Conv's adjoint is the transposed convolution with the same geometry; output_padding
    # restores the input rows/cols the forward never read (their gradient is 0)
    op = output_padding(x_hw, d4.shape[2:], g)
    dx = R.conv_transpose2d(d4, w4, g["stride"], g["padding"], g["dilation"], op,
                            ctx.attrs.groups)
    return dx.reshape(ctx.out_dims).astype(ctx.out_np)


def _ref_conv_backward_weight(ctx, x, dy):
    g = _window(ctx.attrs, 2)
    x4, d4 = _as_4d(compute_dtype(x), compute_dtype(dy))
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = g["kernel"], g["stride"], g["padding"], \
        g["dilation"]
    ho, wo = d4.shape[2:]
    groups, c_out = ctx.attrs.groups, d4.shape[1]
    c_g, co_g = x4.shape[1] // groups, c_out // groups
    xp = np.pad(x4, ((0, 0), (0, 0), (ph, ph), (pw, pw)))     # zero padding, as forward
    dw_ = np.zeros((c_out, c_g, kh, kw), x4.dtype)
    for grp in range(groups):
        xg, dg = xp[:, grp * c_g:(grp + 1) * c_g], d4[:, grp * co_g:(grp + 1) * co_g]
        for i, j in itertools.product(range(kh), range(kw)):
            # every input element tap (i, j) of every window read, times that window's dy
            patch = xg[:, :, R.tap_slice(i * dh, sh, ho), R.tap_slice(j * dw, sw, wo)]
            dw_[grp * co_g:(grp + 1) * co_g, :, i, j] = np.einsum("nchw,nohw->oc", patch, dg)
    return dw_.reshape(ctx.out_dims).astype(ctx.out_np)


_CONV_GEOMETRY = ("The payload is the forward `Conv`'s (kernel_size, stride, padding, "
                  "dilation, groups; missing entries 1, 0, 1), as are the layouts: x "
                  "`[N, C_in, H, W]`, w `[C_out, C_in/groups, kH, kW]`, dy "
                  "`[N, C_out, H_out, W_out]` (rank 3 `[N, C, L]` reads as `[N, C, 1, L]`).")

register(OpDef(
    kind="Conv2dBackwardInput", family="backward", attrs=ConvAttrs, payload="struct",
    arity=2, caps=BLAS_BOUNDARY, check=_check_conv_backward_input,
    reference=_ref_conv_backward_input, input_names=("dy", "w"),
    doc="The gradient of `Conv` with respect to its input x: "
        "`dx[n, ci, y, x] = Σ dy[n, co, ho, wo] · w[co, ci mod C_in/groups, i, j]` over the "
        "windows whose tap (i, j) read (y, x) (`y = ho·sH + i·dH − pH`, likewise x, co in "
        "ci's group): the transposed convolution of dy with w. The output shape is x's, "
        "declared on the node (rows and columns the forward's floor left unread get 0). "
        + _CONV_GEOMETRY,
    constraints=(
        "C1: the forward Conv of x (the declared output) and w is valid (Conv's C1-C5).",
        "C2: dy is that Conv's output [N, C_out, H_out, W_out] (rank 3: [N, C_out, L_out]) "
        "and shares w's float dtype; the output has it too.",
    ),
    samples=_lazy_samples("conv_backward_input_samples"), dtypes=FLOATS,
    accuracy=reduction(2, lambda a, s: s[1].dims[0] // a.groups * int(np.prod(a.kernel_size))),
    notes="RLX's builder takes the output shape from the caller (strides and padding make "
          "it ambiguous); the check rebuilds the forward Conv from it. RLX's op is 2-D "
          "(NCHW); rank-3 NCL also works here, as rlx_ref's Conv accepts it.",
))

register(OpDef(
    kind="Conv2dBackwardWeight", family="backward", attrs=ConvAttrs, payload="struct",
    arity=2, caps=BLAS_BOUNDARY, check=_check_conv_backward_weight,
    reference=_ref_conv_backward_weight, input_names=("x", "dy"),
    doc="The gradient of `Conv` with respect to its weight w: "
        "`dw[co, c, i, j] = Σ_{n, ho, wo} x[n, g·C_in/groups + c, ho·sH + i·dH − pH, "
        "wo·sW + j·dW − pW] · dy[n, co, ho, wo]` (g = co's group, zero padding). The "
        "output shape is w's, declared on the node. " + _CONV_GEOMETRY,
    constraints=(
        "C1: the forward Conv of x and w (the declared output) is valid (Conv's C1-C5).",
        "C2: dy is that Conv's output [N, C_out, H_out, W_out] (rank 3: [N, C_out, L_out]) "
        "and shares x's float dtype; the output has it too.",
    ),
    samples=_lazy_samples("conv_backward_weight_samples"), dtypes=FLOATS,
    accuracy=reduction(2, lambda a, s: max(1, s[1].numel // max(1, s[1].dims[1]))),
    notes="RLX's builder takes the output shape from the caller (w's shape); the check "
          "rebuilds the forward Conv from it. Rank-3 NCL works as for Conv.",
))
