"""Col2Im: the sum of sliding blocks back into an image, as one static 0/1 matrix.

A dense product also multiplies the entries a pixel does not take by 0, so a non-finite
block value reaches every pixel (NaN) where ONNX's scatter would keep it to its own."""
from __future__ import annotations

import itertools

import numpy as np

from ..context import Unmappable
from . import converts

MAX_ENTRIES = 1 << 24       # a larger scatter matrix is refused, not built


def scatter_matrix(image, block, strides, dil, pads):
    """M [K·L, prod(image)]: column entry (k, l) adds to the pixel block l's tap k covers."""
    n = len(image)
    counts = [(image[i] + pads[i] + pads[i + n] - (dil[i] * (block[i] - 1) + 1))
              // strides[i] + 1 for i in range(n)]
    if min(counts) <= 0:
        raise Unmappable(f"blocks {list(block)} do not fit the padded image {list(image)}")
    taps = list(itertools.product(*[range(b) for b in block]))
    places = list(itertools.product(*[range(c) for c in counts]))
    m = np.zeros((len(taps) * len(places), int(np.prod(image))))
    for ki, k in enumerate(taps):
        for li, pos in enumerate(places):
            at = [pos[i] * strides[i] + k[i] * dil[i] - pads[i] for i in range(n)]
            if all(0 <= at[i] < image[i] for i in range(n)):
                m[ki * len(places) + li, int(np.ravel_multi_index(at, image))] = 1.0
    return m, int(np.prod(counts))


@converts("Col2Im")
def col2im(ctx, node, ins, attrs):
    x = ctx.id(ins[0])
    image = [int(v) for v in np.asarray(ctx.need(ins[1], "Col2Im's image_shape"))]
    block = [int(v) for v in np.asarray(ctx.need(ins[2], "Col2Im's block_shape"))]
    n = len(image)
    strides = list(attrs.get("strides", [1] * n))
    dil = list(attrs.get("dilations", [1] * n))
    pads = list(attrs.get("pads", [0] * (2 * n)))
    batch, ck, length = ctx.dims(x)
    k = int(np.prod(block))
    if ck % k:
        raise Unmappable(f"{ck} rows are not channels × {k} block taps")
    if k * length * int(np.prod(image)) > MAX_ENTRIES:
        raise Unmappable("an image too large for Col2Im's static scatter matrix")
    m, count = scatter_matrix(image, block, strides, dil, pads)
    if count != length:
        raise Unmappable(f"{length} blocks given, the geometry makes {count}")
    dt = ctx.dt(x)
    cols = ctx.reshape(x, (batch, ck // k, k * length))
    y = ctx.op("MatMul", (cols, ctx.const(m.astype(dt.np), dt)))
    return [ctx.reshape(y, (batch, ck // k) + tuple(image))]
