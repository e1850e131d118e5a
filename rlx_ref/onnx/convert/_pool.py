"""Pool geometry: ONNX's ceil_mode and count_include_pad in terms of RLX's plain Pool."""
from __future__ import annotations

import numpy as np


def pool_geometry(dims, kernel, strides, pads, ceil: bool):
    """Per-axis (begin, end) padding that makes a floor-mode pool give ONNX's output size,
    and that size. ceil_mode adds rows at the end; a window may not start in them."""
    full, outs = [], []
    for d, k, s, (b, e) in zip(dims, kernel, strides, pads):
        span = d + b + e
        if ceil:
            out = -(-(span - k) // s) + 1
            if (out - 1) * s >= d + b:
                out -= 1
        else:
            out = (span - k) // s + 1
        extra = max((out - 1) * s + k - span, 0)
        full.append((b, e + extra))
        outs.append(out)
    return full, outs


def window_indices(out: int, k: int, stride: int, dilation: int) -> np.ndarray:
    """[out, k]: the padded-input position each window tap reads."""
    return (np.arange(out) * stride)[:, None] + (np.arange(k) * dilation)[None, :]


def sum_pool_counts(dims, kernel, strides, dilations, full, pads, include_pad: bool,
                    outs) -> np.ndarray:
    """How many elements each window averages: in-range ones, plus ONNX's explicit padding
    when ``include_pad`` (never the rows ceil_mode adds). Shape ``outs``."""
    ones = np.ones(dims, np.float64)
    spec = [(b, e) for b, e in pads]
    if include_pad:
        ones = np.pad(ones, spec, constant_values=1.0)
        more = [(fb - b, fe - e) for (fb, fe), (b, e) in zip(full, spec)]
    else:
        more = list(full)
    ones = np.pad(ones, more, constant_values=0.0)
    for a, (o, k, s, d) in enumerate(zip(outs, kernel, strides, dilations)):
        ones = np.take(ones, window_indices(o, k, s, d), axis=a).sum(axis=a + 1)
    return ones
