"""MaxUnpool: the pooled values scattered to their recorded (flat) positions in zeros."""
from __future__ import annotations

import math

import numpy as np

from ..context import Unmappable
from . import converts


@converts("MaxUnpool")
def max_unpool(ctx, node, ins, attrs):
    x, idx = ctx.id(ins[0]), ctx.id(ins[1])
    dims = ctx.dims(x)
    n = len(dims) - 2
    kernel = list(attrs.get("kernel_shape"))
    strides = list(attrs.get("strides", [1] * n))
    pads = list(attrs.get("pads", [0] * (2 * n)))
    inferred = tuple(dims[:2]) + tuple((dims[2 + i] - 1) * strides[i] + kernel[i] - pads[i] -
                                       pads[i + n] for i in range(n))
    shape = inferred
    if len(ins) > 2 and ins[2]:
        shape = tuple(int(v) for v in np.asarray(ctx.need(ins[2], "MaxUnpool's output_shape")))
    if len(shape) != len(dims) or any(s < i for s, i in zip(shape, inferred)):
        raise Unmappable(f"output_shape {list(shape)} is smaller than the unpooled "
                         f"{list(inferred)}")
    # ONNX's indices count over the inferred tensor (batch and channel included); a larger
    # output_shape zero-fills past its end
    total = math.prod(inferred)
    zeros = ctx.const(np.zeros(total, ctx.dt(x).np), ctx.dt(x))
    flat = ctx.op("ScatterElements", (zeros, ctx.reshape(idx, (math.prod(dims),)),
                                      ctx.reshape(x, (math.prod(dims),))),
                  axis=0, reduction="None")
    y = ctx.reshape(flat, inferred)
    if shape != inferred:
        grow = tuple((0, s - i) for s, i in zip(shape, inferred))
        y = ctx.op("Pad", (y,), pads=grow, mode=("Constant", 0.0))
    return [y]
