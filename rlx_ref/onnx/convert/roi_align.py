"""RoiAlign with a fixed sampling grid: every bin's samples gathered bilinearly from the
ROI's image with ONNX's reference rules, then averaged (or maxed) per bin.

The sample positions are separable (rows from the ROI's y extent, columns from its x
extent), so each axis gives two taps and weights per sample; coordinates and weights are
computed in f64, as ONNX's reference computes them in Python floats.
"""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType
from ..context import Unmappable
from . import converts

F64 = DType.F64


def _axis(ctx, start, size, bins, grid, n):
    """Per-sample (low index, high index, low weight, high weight, valid) along one axis,
    each [R, bins·grid]: ONNX's pre_calc_for_bilinear_interpolate, one axis at a time."""
    frac = (np.arange(bins)[:, None] + (np.arange(grid)[None, :] + 0.5) / grid).reshape(-1)
    r = ctx.dims(start)[0]
    step = ctx.bin("Div", size, ctx.scalar(float(bins), F64))
    pos = ctx.bin("Add", ctx.reshape(start, (r, 1)),
                  ctx.bin("Mul", ctx.reshape(step, (r, 1)), ctx.const(frac[None, :])))
    valid = ctx.bin("BitAnd", ctx.cmp("Ge", pos, ctx.scalar(-1.0, F64)),
                    ctx.cmp("Le", pos, ctx.scalar(float(n), F64)))
    pos = ctx.op("Binary", (pos, ctx.scalar(0.0, F64)), op="Max")
    low = ctx.act("Floor", pos)
    edge = ctx.cmp("Ge", low, ctx.scalar(n - 1.0, F64))
    low = ctx.where(edge, ctx.scalar(n - 1.0, F64), low)
    pos = ctx.where(edge, low, pos)
    high = ctx.where(edge, low, ctx.bin("Add", low, ctx.scalar(1.0, F64)))
    lw = ctx.bin("Sub", pos, low)
    hw = ctx.bin("Sub", ctx.scalar(1.0, F64), lw)
    return (ctx.cast(low, DType.I64), ctx.cast(high, DType.I64), hw, lw,
            ctx.cast(valid, F64))


@converts("RoiAlign")
def roi_align(ctx, node, ins, attrs):
    how = attrs.only("coordinate_transformation_mode", ("half_pixel", "output_half_pixel"),
                     "half_pixel")
    mode = attrs.only("mode", ("avg", "max"), "avg")
    oh, ow = attrs.get("output_height", 1), attrs.get("output_width", 1)
    ratio = attrs.get("sampling_ratio", 0)
    scale = attrs.get("spatial_scale", 1.0)
    if ratio <= 0:
        raise Unmappable("sampling_ratio=0 sizes each ROI's sampling grid from its run-time "
                         "extent; RLX maps a fixed sampling_ratio", "sampling_ratio")
    x, rois = ctx.id(ins[0]), ctx.cast(ctx.id(ins[1]), F64)
    n_img, chans, h, w = ctx.dims(x)
    r = ctx.dims(rois)[0]
    off = 0.5 if how == "half_pixel" else 0.0
    col = [ctx.reshape(ctx.op("Slice", (rois,), axis=1, start=k, len=1, step=1), (r,))
           for k in range(4)]
    col = [ctx.bin("Sub", ctx.bin("Mul", c, ctx.scalar(scale, F64)), ctx.scalar(off, F64))
           for c in col]
    sizes = [ctx.bin("Sub", col[3], col[1]), ctx.bin("Sub", col[2], col[0])]
    if how == "output_half_pixel":      # ONNX's legacy mode keeps ROIs at least 1 wide
        sizes = [ctx.op("Binary", (s, ctx.scalar(1.0, F64)), op="Max") for s in sizes]
    ys = _axis(ctx, col[1], sizes[0], oh, ratio, h)
    xs = _axis(ctx, col[0], sizes[1], ow, ratio, w)
    sy, sx = oh * ratio, ow * ratio
    img = ctx.op("Gather", (ctx.reshape(x, (n_img, chans, h * w)), ctx.id(ins[2])), axis=0)
    img = ctx.cast(img, F64)
    valid = ctx.bin("Mul", ctx.reshape(ys[4], (r, sy, 1)), ctx.reshape(xs[4], (r, 1, sx)))
    terms = []
    for yi, yw in ((ys[0], ys[2]), (ys[1], ys[3])):
        for xi, xw in ((xs[0], xs[2]), (xs[1], xs[3])):
            flat = ctx.bin("Add", ctx.reshape(ctx.bin("Mul", yi, ctx.scalar(w, DType.I64)),
                                              (r, sy, 1)), ctx.reshape(xi, (r, 1, sx)))
            # an invalid sample reads position 0 with weight 0, as ONNX's reference does
            flat = ctx.where(ctx.cmp("Gt", valid, ctx.scalar(0.0, F64)), flat,
                             ctx.scalar(0, DType.I64))
            idx = ctx.op("Expand", (ctx.reshape(flat, (r, 1, sy * sx)),),
                         target_shape=(r, chans, sy * sx))
            val = ctx.op("GatherElements", (img, idx), axis=2)
            wt = ctx.bin("Mul", ctx.bin("Mul", ctx.reshape(yw, (r, sy, 1)),
                                        ctx.reshape(xw, (r, 1, sx))), valid)
            terms.append(ctx.bin("Mul", val, ctx.reshape(wt, (r, 1, sy * sx))))
    kind = "Max" if mode == "max" else "Add"
    acc = terms[0]
    for t in terms[1:]:
        acc = ctx.op("Binary", (acc, t), op=kind)
    acc = ctx.reshape(acc, (r, chans, oh, ratio, ow, ratio))
    out = ctx.op("Reduce", (acc,), op="Max" if mode == "max" else "Mean", axes=(3, 5),
                 keep_dim=False)
    return [ctx.cast(out, ctx.dt(x))]
