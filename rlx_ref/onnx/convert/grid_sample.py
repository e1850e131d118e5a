"""GridSample: every output position's taps gathered from the flattened image and
weighted, with ONNX's reference rules for coordinates, padding and rounding step by step.

Per spatial axis the grid coordinate is denormalized (align_corners or not), rounded half
to even for nearest, moved inside the borders (border: clamped, reflection: reflected)
when it lies outside them, and split into taps (nearest 1, linear 2, cubic 4 with Keys'
A = -0.75); a tap outside the image reads 0 (zeros), the edge (border) or its reflection.
The taps of all axes combine as a tensor product, as ONNX's nested 1-D passes do.
"""
from __future__ import annotations

import itertools
import math

from ...ir.dtype import DType
from ..context import Unmappable
from . import converts

KEYS_A = -0.75


def _s(ctx, v, like):
    return ctx.like(v, like)


def _clampf(ctx, v, lo, hi):
    v = ctx.where(ctx.cmp("Lt", v, _s(ctx, lo, v)), _s(ctx, lo, v), v)
    return ctx.where(ctx.cmp("Gt", v, _s(ctx, hi, v)), _s(ctx, hi, v), v)


def _reflect(ctx, v, lo, hi):
    """ONNX's _gs_reflect: fold v back inside [lo, hi] by the nearer border."""
    rng = hi - lo
    below, above = ctx.cmp("Lt", v, _s(ctx, lo, v)), ctx.cmp("Gt", v, _s(ctx, hi, v))
    dx = ctx.where(below, ctx.bin("Sub", _s(ctx, lo, v), v), ctx.bin("Sub", v, _s(ctx, hi, v)))
    n = ctx.act("Floor", ctx.bin("Div", dx, _s(ctx, rng, v)))       # dx >= 0 where used
    rem = ctx.bin("Sub", dx, ctx.bin("Mul", n, _s(ctx, rng, v)))
    even = ctx.cmp("Eq", ctx.bin("Mod", n, _s(ctx, 2.0, v)), _s(ctx, 0.0, v))
    from_lo, from_hi = ctx.bin("Add", _s(ctx, lo, v), rem), ctx.bin("Sub", _s(ctx, hi, v), rem)
    return ctx.where(below, ctx.where(even, from_lo, from_hi),
                     ctx.where(above, ctx.where(even, from_hi, from_lo), v))


def _keys(ctx, t):
    """Keys' cubic weights of the taps at offsets -1, 0, 1, 2 for fraction t."""
    a = KEYS_A

    def near(s):    # |s| <= 1
        return ctx.bin("Add", ctx.bin("Mul", ctx.bin("Sub", ctx.bin(
            "Mul", _s(ctx, a + 2, s), s), _s(ctx, a + 3, s)), ctx.bin("Mul", s, s)),
            _s(ctx, 1.0, s))

    def far(s):     # 1 <= |s| < 2
        inner = ctx.bin("Add", ctx.bin("Mul", ctx.bin("Sub", ctx.bin(
            "Mul", _s(ctx, a, s), s), _s(ctx, 5 * a, s)), s), _s(ctx, 8 * a, s))
        return ctx.bin("Sub", ctx.bin("Mul", inner, s), _s(ctx, 4 * a, s))

    one = _s(ctx, 1.0, t)
    return [far(ctx.bin("Add", t, one)), near(t), near(ctx.bin("Sub", one, t)),
            far(ctx.bin("Sub", _s(ctx, 2.0, t), t))]


def _axis_taps(ctx, v, n, mode, pad, align):
    """[(index node (float, unresolved), weight node or None)] of one axis."""
    lo, hi = (0.0, n - 1.0) if align else (-0.5, n - 0.5)
    if mode == "nearest":
        v = ctx.act("Round", v)
    outside = ctx.bin("BitOr", ctx.cmp("Lt", v, _s(ctx, lo, v)), ctx.cmp("Gt", v, _s(ctx, hi, v)))
    if pad == "border":
        v = ctx.where(outside, _clampf(ctx, v, 0.0, n - 1.0), v)
    elif pad == "reflection":
        v = ctx.where(outside, _reflect(ctx, v, lo, hi), v)
    if mode == "nearest":
        return [(ctx.cast(ctx.cast(v, DType.I32), ctx.dt(v)), None)], (lo, hi)
    x0 = ctx.act("Floor", v)
    t = ctx.bin("Sub", v, x0)
    if mode == "linear":
        one = _s(ctx, 1.0, t)
        return [(x0, ctx.bin("Sub", one, t)), (ctx.bin("Add", x0, one), t)], (lo, hi)
    return [(ctx.bin("Add", x0, _s(ctx, float(k), x0)), w)
            for k, w in zip((-1, 0, 1, 2), _keys(ctx, t))], (lo, hi)


def _resolve(ctx, i, n, pad, bounds):
    """(int64 index inside the axis, validity mask or None) of a tap position."""
    valid = None
    if pad == "zeros":
        valid = ctx.bin("BitAnd", ctx.cmp("Ge", i, _s(ctx, 0.0, i)),
                        ctx.cmp("Lt", i, _s(ctx, float(n), i)))
        i = _clampf(ctx, i, 0.0, n - 1.0)
    elif pad == "border":
        i = _clampf(ctx, i, 0.0, n - 1.0)
    else:
        i = _reflect(ctx, i, *bounds)
    return ctx.cast(i, DType.I64), valid


@converts("GridSample")
def grid_sample(ctx, node, ins, attrs):
    mode = attrs.only("mode", ("linear", "nearest", "cubic", "bilinear", "bicubic"),
                      "linear")
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    pad = attrs.only("padding_mode", ("zeros", "border", "reflection"), "zeros")
    align = bool(attrs.get("align_corners", 0))
    x, grid = ctx.id(ins[0]), ctx.id(ins[1])
    xd, gd = ctx.dims(x), ctx.dims(grid)
    r = len(xd) - 2
    if gd[-1] != r or len(gd) != r + 2 or gd[0] != xd[0] or not ctx.dt(x).is_float:
        raise Unmappable(f"GridSample of {list(xd)} by a grid of {list(gd)}")
    if pad == "reflection" and align and min(xd[2:]) == 1:
        raise Unmappable("reflection about a one-pixel axis with align_corners")
    batch, chans, dims, out = xd[0], xd[1], xd[2:], gd[1:-1]
    m = math.prod(out)
    coords = ctx.reshape(ctx.cast(grid, DType.F32), (batch, m, r))   # ONNX works in f32
    taps = []
    for i, n in enumerate(dims):
        g = ctx.reshape(ctx.op("Slice", (coords,), axis=2, start=r - 1 - i, len=1, step=1),
                        (batch, m))
        g1 = ctx.bin("Add", g, _s(ctx, 1.0, g))
        v = ctx.bin("Mul", g1, _s(ctx, (n - 1) / 2.0, g)) if align else \
            ctx.bin("Div", ctx.bin("Sub", ctx.bin("Mul", g1, _s(ctx, float(n), g)),
                                   _s(ctx, 1.0, g)), _s(ctx, 2.0, g))
        axis_taps, bounds = _axis_taps(ctx, v, n, mode, pad, align)
        taps.append([(*_resolve(ctx, p, n, pad, bounds), w) for p, w in axis_taps])
    flat = ctx.reshape(x, (batch, chans, math.prod(dims)))
    strides = [math.prod(dims[i + 1:]) for i in range(r)]
    total = None
    for combo in itertools.product(*taps):
        index, weight, valid = None, None, None
        for (ix, ok, w), st in zip(combo, strides):
            term = ix if st == 1 else ctx.bin("Mul", ix, ctx.scalar(st, DType.I64))
            index = term if index is None else ctx.bin("Add", index, term)
            if w is not None:
                weight = w if weight is None else ctx.bin("Mul", weight, w)
            if ok is not None:
                valid = ok if valid is None else ctx.bin("BitAnd", valid, ok)
        if valid is not None:
            mask = ctx.cast(valid, DType.F32)
            weight = mask if weight is None else ctx.bin("Mul", weight, mask)
        idx = ctx.op("Expand", (ctx.reshape(index, (batch, 1, m)),),
                     target_shape=(batch, chans, m))
        val = ctx.op("GatherElements", (flat, idx), axis=2)
        if weight is not None:
            val = ctx.bin("Mul", val, ctx.cast(ctx.reshape(weight, (batch, 1, m)),
                                               ctx.dt(x)))
        total = val if total is None else ctx.bin("Add", total, val)
    return [ctx.reshape(total, (batch, chans) + tuple(out))]
