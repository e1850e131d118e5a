"""BitCast between integer types of one width: RLX's Cast wraps int→int, which is the
two's-complement reinterpretation of the same bits."""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType
from ..context import Unmappable, dtype_of
from . import converts


@converts("BitCast")
def bitcast(ctx, node, ins, attrs):
    x = ctx.id(ins[0])
    src, dst = ctx.dt(x), dtype_of(attrs.get("to"), "BitCast's target")
    if src is dst:
        return [ctx.op("StopGradient", (x,))]
    ints = (src.is_int or src is DType.BOOL) and dst.is_int
    if not ints or np.dtype(src.np).itemsize != np.dtype(dst.np).itemsize:
        raise Unmappable(f"reinterpreting {src} bits as {dst}: RLX has no bit cast between "
                         "float and integer types (only same-width integers map)", "to")
    return [ctx.cast(x, dst)]
