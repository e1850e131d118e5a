"""Numpy references of the NCDHW kinds: Conv3d, ConvTranspose3d, their backward kinds,
MaxPool3dBackward and Interpolate3d.

The conv references are written for any number of spatial axes (here three) in the style of
``_conv_ref``: one strided slice of the padded input per kernel tap, so a reader sees one tap
at a time. ``tests/test_ops_conv3d.py`` checks them against PyTorch and the literal loops.
"""
from __future__ import annotations

import itertools

import numpy as np

from . import _conv_ref as R
from .opdef import want


def _taps(kernel):
    return itertools.product(*(range(k) for k in kernel))


def _window(offs, dil, stride, counts):
    """The strided slices tap ``offs`` reads across all output positions."""
    return tuple(R.tap_slice(o * d, s, c) for o, d, s, c in zip(offs, dil, stride, counts))


def transpose_out_size(size, k, s, p, d, op, axis, kind):
    """PyTorch's ``(in-1)s + op + d(k-1) - 2p + 1``; OpError when that is below 1."""
    want(size >= 1, f"(C5) {kind} needs a non-empty input along {axis}, got {size}")
    out = (size - 1) * s + op + d * (k - 1) - 2 * p + 1
    want(out >= 1, f"(C5) {kind} output along {axis} would be {out} "
                   f"(padding {p} crops more than the full {out + 2 * p}-wide result)")
    return out


def conv_nd(x, w, stride, padding, dilation, groups):
    """out[n, co, *o] = Σ_c Σ_taps x[n, g·Cg + c, o·s + t·d − p] · w[co, c, *t]."""
    nsp = x.ndim - 2
    c_out, c_g = w.shape[:2]
    kernel = w.shape[2:]
    outs = [R.conv_out_size(sz, k, s, p, d, ax) for sz, k, s, p, d, ax in
            zip(x.shape[2:], kernel, stride, padding, dilation, "DHW"[-nsp:])]
    xp = np.pad(x, ((0, 0), (0, 0)) + tuple((p, p) for p in padding))   # zero padding
    out = np.zeros((x.shape[0], c_out) + tuple(outs), x.dtype)
    co_g = c_out // groups
    for g in range(groups):
        xg = xp[:, g * c_g:(g + 1) * c_g]
        wg = w[g * co_g:(g + 1) * co_g]
        for offs in _taps(kernel):
            patch = xg[(slice(None), slice(None)) + _window(offs, dilation, stride, outs)]
            out[:, g * co_g:(g + 1) * co_g] += np.einsum(
                "nc...,oc->no...", patch, wg[(slice(None), slice(None)) + offs])
    return out


def conv_transpose_nd(x, w, stride, padding, dilation, output_padding, groups, out_sp):
    """Scatter form: x[n, ci, *i]·w[ci, o, *t] lands on output position i·s + t·d − p."""
    c_in = x.shape[1]
    co_g = w.shape[1]
    kernel = w.shape[2:]
    ins = x.shape[2:]
    # an uncropped canvas (index = output index + padding), cropped afterwards; it also
    # covers output_padding positions no input reaches (they stay 0)
    full = tuple(max((n - 1) * s + d * (k - 1) + 1, p + o) for n, s, d, k, p, o in
                 zip(ins, stride, dilation, kernel, padding, out_sp))
    canvas = np.zeros((x.shape[0], co_g * groups) + full, x.dtype)
    ci_g = c_in // groups
    for g in range(groups):
        xg = x[:, g * ci_g:(g + 1) * ci_g]
        wg = w[g * ci_g:(g + 1) * ci_g]
        for offs in _taps(kernel):
            contrib = np.einsum("nc...,co->no...", xg, wg[(slice(None), slice(None)) + offs])
            dst = (slice(None), slice(g * co_g, (g + 1) * co_g))
            canvas[dst + _window(offs, dilation, stride, ins)] += contrib
    crop = tuple(slice(p, p + o) for p, o in zip(padding, out_sp))
    return canvas[(slice(None), slice(None)) + crop]


def conv_backward_weight_nd(x, dy, kernel, stride, padding, dilation, groups):
    """dw[co, c, *t] = Σ_{n, o} x[n, g·Cg + c, o·s + t·d − p] · dy[n, co, *o]."""
    c_out = dy.shape[1]
    c_g, co_g = x.shape[1] // groups, c_out // groups
    outs = dy.shape[2:]
    xp = np.pad(x, ((0, 0), (0, 0)) + tuple((p, p) for p in padding))
    dw = np.zeros((c_out, c_g) + tuple(kernel), x.dtype)
    for g in range(groups):
        xg, dg = xp[:, g * c_g:(g + 1) * c_g], dy[:, g * co_g:(g + 1) * co_g]
        for offs in _taps(kernel):
            patch = xg[(slice(None), slice(None)) + _window(offs, dilation, stride, outs)]
            summed = [0] + list(range(2, dy.ndim))            # batch and output position
            dw[(slice(g * co_g, (g + 1) * co_g), slice(None)) + offs] = np.tensordot(
                dg, patch, axes=(summed, summed))
    return dw


def max_pool_backward_nd(x, dy, kernel, stride, padding):
    """Route each window's dy to its first maximum (a NaN counts as the maximum; padding
    never wins), accumulating where one position wins several windows."""
    outs = dy.shape[2:]
    sizes = x.shape[2:]
    xp = np.pad(x, ((0, 0), (0, 0)) + tuple((p, p) for p in padding))
    best = np.zeros(dy.shape, x.dtype)
    pick = np.full(dy.shape, -1)
    taps = list(_taps(kernel))
    ones = (1,) * len(kernel)
    for t, offs in enumerate(taps):
        v = xp[(slice(None), slice(None)) + _window(offs, ones, stride, outs)]
        inside = np.ones(outs, bool)
        for ax, (o, s, p, n, m) in enumerate(zip(offs, stride, padding, sizes, outs)):
            pos = np.arange(m) * s + o - p
            shape = [1] * len(outs)
            shape[ax] = m
            inside &= ((pos >= 0) & (pos < n)).reshape(shape)
        with np.errstate(invalid="ignore"):
            better = (pick < 0) | (v > best) | (np.isnan(v) & ~np.isnan(best))
        better &= inside
        best = np.where(better, v, best)
        pick = np.where(better, t, pick)
    dxp = np.zeros(xp.shape, dy.dtype)
    for t, offs in enumerate(taps):
        dxp[(slice(None), slice(None)) + _window(offs, ones, stride, outs)] += \
            np.where(pick == t, dy, 0)
    crop = tuple(slice(p, p + n) for p, n in zip(padding, sizes))
    return dxp[(slice(None), slice(None)) + crop]


def nearest_index(n_in: int, n_out: int) -> np.ndarray:
    """RLX's nearest source index ``min(floor(dst·in/out), in − 1)``, in exact integers."""
    return np.minimum(np.arange(n_out) * n_in // n_out, n_in - 1)


def interpolate3d(x, size):
    """out[n, c, z, y, x] = in[n, c, src(z), src(y), src(x)] with ``nearest_index``."""
    d, h, w = x.shape[2:]
    iz, iy, ix = (nearest_index(a, b) for a, b in zip((d, h, w), size))
    return x[:, :, iz][:, :, :, iy][:, :, :, :, ix]
