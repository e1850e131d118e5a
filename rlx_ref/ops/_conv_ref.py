"""Window geometry and the numpy references of the conv family (Conv, ConvTranspose2d, Pool,
Im2Col).

Every reference loops over the kernel taps and moves a whole strided slice of the (padded)
input per tap: the same sum as the textbook 7-nested loop, written so a reader sees one tap
at a time. ``tests/test_ops_conv.py`` checks each against the literal nested loops.
"""
from __future__ import annotations

import itertools

import numpy as np

from ..ir.shape import Dyn
from .opdef import want

# Missing trailing entries of stride / padding / dilation / output_padding take these values,
# as RLX's CPU backend reads them (``stride.get(1).unwrap_or(1)``...).
DEFAULTS = {"stride": 1, "padding": 0, "dilation": 1, "output_padding": 0}


def per_axis(attrs, name: str, n: int) -> tuple:
    """Field ``name`` padded to ``n`` entries with its default; OpError when it is longer."""
    vals = tuple(getattr(attrs, name))
    want(len(vals) <= n, f"(C2) {name} has {len(vals)} entries, expected at most {n} "
                         f"(one per spatial axis)")
    return vals + (DEFAULTS[name],) * (n - len(vals))


def static(d):
    """The dim as an int, or None when it is dynamic."""
    return None if isinstance(d, Dyn) else d


def conv_out_size(size: int, k: int, s: int, p: int, d: int, axis: str) -> int:
    """``(in + 2p - d(k-1) - 1) // s + 1``; OpError when the dilated kernel does not fit."""
    span = d * (k - 1) + 1
    want(size + 2 * p >= span,
         f"(C5) the dilated kernel spans {span} along {axis} but the padded input has only "
         f"{size + 2 * p} (in {size} + 2·padding {p}): the window fits nowhere")
    return (size + 2 * p - span) // s + 1


def conv_transpose_out_size(size: int, k: int, s: int, p: int, d: int, op: int,
                            axis: str) -> int:
    """PyTorch's ``(in-1)s + op + d(k-1) - 2p + 1``; OpError when that is below 1."""
    want(size >= 1, f"(C5) ConvTranspose2d needs a non-empty input along {axis}, got {size}")
    out = (size - 1) * s + op + d * (k - 1) - 2 * p + 1
    want(out >= 1, f"(C5) ConvTranspose2d output along {axis} would be {out} "
                   f"(padding {p} crops more than the full {out + 2 * p}-wide result)")
    return out


def tap_slice(start: int, step: int, count: int) -> slice:
    """``count`` positions ``start, start+step, ...`` as a slice."""
    return slice(start, start + step * (count - 1) + 1, step)


# ── references ─────────────────────────────────────────────────────────────

def conv2d(x, w, stride, padding, dilation, groups):
    """out[n,co,ho,wo] = Σ x[n, g·Cg+c, ho·sh + i·dh - ph, wo·sw + j·dw - pw] · w[co,c,i,j]."""
    n, _, h, wd = x.shape
    c_out, c_g, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    ho = conv_out_size(h, kh, sh, ph, dh, "H")
    wo = conv_out_size(wd, kw, sw, pw, dw, "W")
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))   # zero padding
    out = np.zeros((n, c_out, ho, wo), x.dtype)
    co_g = c_out // groups
    for g in range(groups):
        xg = xp[:, g * c_g:(g + 1) * c_g]
        wg = w[g * co_g:(g + 1) * co_g]
        for i, j in itertools.product(range(kh), range(kw)):
            patch = xg[:, :, tap_slice(i * dh, sh, ho), tap_slice(j * dw, sw, wo)]
            out[:, g * co_g:(g + 1) * co_g] += np.einsum("nchw,oc->nohw", patch, wg[:, :, i, j])
    return out


def conv_transpose2d(x, w, stride, padding, dilation, output_padding, groups):
    """Scatter form: x[n,ci,iy,ix]·w[ci,o,i,j] lands on (iy·sh + i·dh - ph, ix·sw + j·dw - pw)."""
    n, c_in, h, wd = x.shape
    _, co_g, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw), (oph, opw) = stride, padding, dilation, output_padding
    ho = conv_transpose_out_size(h, kh, sh, ph, dh, oph, "H")
    wo = conv_transpose_out_size(wd, kw, sw, pw, dw, opw, "W")
    # Accumulate on an uncropped canvas (index = output index + padding), then crop; the
    # canvas also covers output_padding rows that no input reaches (they stay 0).
    full_h = max((h - 1) * sh + dh * (kh - 1) + 1, ph + ho)
    full_w = max((wd - 1) * sw + dw * (kw - 1) + 1, pw + wo)
    canvas = np.zeros((n, co_g * groups, full_h, full_w), x.dtype)
    ci_g = c_in // groups
    for g in range(groups):
        xg = x[:, g * ci_g:(g + 1) * ci_g]
        wg = w[g * ci_g:(g + 1) * ci_g]
        for i, j in itertools.product(range(kh), range(kw)):
            contrib = np.einsum("nchw,co->nohw", xg, wg[:, :, i, j])
            canvas[:, g * co_g:(g + 1) * co_g,
                   tap_slice(i * dh, sh, h), tap_slice(j * dw, sw, wd)] += contrib
    return canvas[:, :, ph:ph + ho, pw:pw + wo]


# kind -> (value the padding holds, reduction over the window axis)
POOL_KINDS = {
    "Max": (-np.inf, np.max),
    "Min": (np.inf, np.min),
    "Sum": (0.0, np.sum),
    "Mean": (0.0, np.sum),      # divided by the full window size afterwards
    "Prod": (1.0, np.prod),
}


def pool(x, kind, kernel, stride, padding):
    """Reduce each window over the trailing ``len(kernel)`` axes (2-D: NCHW, 3-D: NCDHW)."""
    nsp = len(kernel)
    lead = x.ndim - nsp
    sizes = x.shape[lead:]
    outs = [pool_out_size(sz, k, s, p, ax) for sz, k, s, p, ax in
            zip(sizes, kernel, stride, padding, "DHW"[-nsp:])]
    fill, reduce = POOL_KINDS[kind]
    # Padding holds the reduction's identity, so padded positions never change the result.
    xp = np.pad(x, ((0, 0),) * lead + tuple((p, p) for p in padding), constant_values=fill)
    taps = []
    for offs in itertools.product(*(range(k) for k in kernel)):
        sl = tuple(tap_slice(o, s, n) for o, s, n in zip(offs, stride, outs))
        taps.append(xp[(Ellipsis,) + sl])
    windows = np.stack(taps, axis=-1)
    out = reduce(windows, axis=-1)
    if kind == "Mean":
        out = out / np.prod(kernel)   # count_include_pad: padding counts as zeros
    return out


def pool_out_size(size: int, k: int, s: int, p: int, axis: str) -> int:
    """``(in + 2p - k) // s + 1``; OpError (RLX's builder message) when nothing fits."""
    want(size + 2 * p >= k,
         f"(C5) pool window {k} with stride {s} and padding {p} leaves no output for an "
         f"input of {size} along {axis}")
    return (size + 2 * p - k) // s + 1


def im2col(x, kernel, stride, padding, dilation):
    """Rows ``(n, ho, wo)``, columns ``(c, i, j)``: out[row, col] = padded x at that tap."""
    n, c, h, wd = x.shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    ho = conv_out_size(h, kh, sh, ph, dh, "H")
    wo = conv_out_size(wd, kw, sw, pw, dw, "W")
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    cols = np.zeros((n, c, kh, kw, ho, wo), x.dtype)
    for i, j in itertools.product(range(kh), range(kw)):
        cols[:, :, i, j] = xp[:, :, tap_slice(i * dh, sh, ho), tap_slice(j * dw, sw, wo)]
    # [n, c, kh, kw, ho, wo] -> [n, ho, wo, c, kh, kw] -> [n·ho·wo, c·kh·kw]
    return cols.transpose(0, 4, 5, 1, 2, 3).reshape(n * ho * wo, c * kh * kw)

