"""Resize as one static interpolation matrix per axis: cubic, antialiased and
tf_crop_and_resize, whose taps and weights ONNX's reference defines.

Every Resize mode is affine in the data along each axis (and separable), so the matrix of
an axis is ONNX's own 1-D resize applied to the identity; extrapolated positions
(tf_crop_and_resize outside the ROI) are its constant term. The dense product multiplies
every input of the axis (most by 0), so a non-finite input spreads NaN along its axis where
ONNX's reference touches only each output's own taps.
"""
from __future__ import annotations

import math

import numpy as np

from ..context import Unmappable


def _coeffs(mode, antialias, a, near):
    from onnx.reference.ops import op_resize as R

    if mode == "cubic":
        fn = R._cubic_coeffs_antialias if antialias else R._cubic_coeffs
        return lambda r, s: fn(r, s, A=a)
    if mode == "linear":
        return R._linear_coeffs_antialias if antialias else R._linear_coeffs
    if antialias:
        raise Unmappable("antialias=1 with mode='nearest' (ONNX does not define it)",
                         "antialias")
    return lambda r, s: R._nearest_coeffs(r, mode=near)


def axis_matrix(n_in, n_out, scale, roi, how, coeffs, extrapolation, exclude):
    """(W [n_out, n_in], c [n_out]): the axis' resize is y = W·x + c."""
    from onnx.reference.ops import op_resize as R

    def run(data):
        return R._interpolate_1d_along_axis(
            data, 0, scale, n_out, coeffs, roi=roi, extrapolation_value=extrapolation,
            coordinate_transformation_mode=how, exclude_outside=exclude)

    const = run(np.zeros((n_in, 1)))[:, 0]
    return run(np.eye(n_in)) - const[:, None], const


def resize_by_weights(ctx, ins, attrs, mode, how, antialias, near, axes, outs, scales):
    """Apply each resized axis' matrix with a DotGeneral (x's axis against W's columns)."""
    from onnx.reference.ops import op_resize as R

    if not hasattr(R, "_interpolate_1d_along_axis"):    # older onnx packages lack it
        raise Unmappable("this onnx package has no 1-D resize reference to build the "
                         f"{mode} weights from")
    a = attrs.get("cubic_coeff_a", -0.75)
    exclude = bool(attrs.get("exclude_outside", 0))
    extrapolation = attrs.get("extrapolation_value", 0.0)
    coeffs = _coeffs(mode, antialias, a, near)
    x = ctx.id(ins[0])
    dims = ctx.dims(x)
    r = len(dims)
    roi = None
    if how == "tf_crop_and_resize":
        raw = np.asarray(ctx.need(ins[1], "Resize's roi"), np.float64).reshape(-1) \
            if len(ins) > 1 and ins[1] else np.zeros(0)
        if raw.size not in (2 * len(axes), 2 * r):
            raise Unmappable("tf_crop_and_resize needs an roi of [starts, ends]")
        listed = axes if raw.size == 2 * len(axes) else list(range(r))
        roi = {ax: (raw[i], raw[i + len(listed)]) for i, ax in enumerate(listed)}
    dt = ctx.dt(x)
    for ax, n_out, sc in zip(axes, outs, scales):
        box = roi.get(ax, (0.0, 1.0)) if roi is not None else None
        n_in = ctx.dims(x)[ax]
        if math.isclose(sc, 1.0) and n_out == n_in and (
                box is None or (math.isclose(box[0], 0.0) and math.isclose(box[1], 1.0))):
            continue        # ONNX's reference leaves such an axis as it is
        if n_out <= 0:
            raise Unmappable(f"an empty output along axis {ax}")
        w, c = axis_matrix(n_in, n_out, sc, list(box) if box else None, how, coeffs,
                           extrapolation, exclude)
        y = ctx.op("DotGeneral", (x, ctx.const(w.astype(dt.np), dt)), lhs_contracting=(ax,),
                   rhs_contracting=(1,), lhs_batch=(), rhs_batch=())
        perm = list(range(ax)) + [r - 1] + list(range(ax, r - 1))
        x = ctx.op("Transpose", (y,), perm=tuple(perm))
        if np.any(c):
            shape = [1] * r
            shape[ax] = n_out
            x = ctx.bin("Add", x, ctx.const(c.reshape(shape).astype(dt.np), dt))
    return [x if x != ctx.id(ins[0]) else ctx.op("StopGradient", (x,))]
