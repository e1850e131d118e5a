"""Lowering of the NCDHW kinds and AxialRope2d: Conv3d, ConvTranspose3d,
Conv3dBackwardInput, Conv3dBackwardWeight, MaxPool3dBackward, Interpolate3d, AxialRope2d.

Direct parallel loops (``_conv3d_kernels``), one thread per output plane: the volumes of
3-D U-Net decoders are small per plane, and a gather form keeps the transposed kernels free
of write races. f16/bf16 compute through f32 operands and an f32 output shadow; Interpolate3d
moves values, so 16-bit payloads are copied bit for bit through uint16 views.
"""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType
from ...ops import _conv3d_ref as R3
from ...ops.attention_axial import angles
from ...ops.backward_conv3d import forward_attrs
from ...ops.conv import _window
from . import _conv3d_kernels as K
from .kernels import compile_kernel
from .lower_linalg import FLOATS, SHADOW_NOTE, finish, shadow_out, work
from .lowering import Step, lowers

def _geo(a) -> np.ndarray:
    return np.array(tuple(a.stride) + tuple(a.padding) + tuple(a.dilation) + (a.groups,),
                    np.int64)


def _conv_step(kernel, geo) -> Step:
    """``kernel(a, b, out, geo)`` on working-precision operands, 16-bit through a shadow."""
    def run(out, a, b):
        if out.size == 0:
            return
        tmp = shadow_out(out)
        kernel.fn(work(a), work(b), out if tmp is None else tmp, geo)
        finish(out, tmp)
    return Step(run, [kernel])


@lowers("Conv3d", FLOATS, reason=SHADOW_NOTE)
def lower_conv3d(node, ins, ctx) -> Step:
    return _conv_step(compile_kernel("conv3d", K.CONV3D), _geo(node.attrs))


@lowers("ConvTranspose3d", FLOATS, reason=SHADOW_NOTE)
def lower_conv_transpose3d(node, ins, ctx) -> Step:
    return _conv_step(compile_kernel("conv_t3d", K.CONV_T3D), _geo(node.attrs))


@lowers("Conv3dBackwardInput", FLOATS, reason=SHADOW_NOTE)
def lower_conv3d_backward_input(node, ins, ctx) -> Step:
    # Conv3d's adjoint: the transposed conv of dy with w, onto x's declared extent
    return _conv_step(compile_kernel("conv_t3d", K.CONV_T3D), _geo(forward_attrs(node.attrs)))


@lowers("Conv3dBackwardWeight", FLOATS, reason=SHADOW_NOTE)
def lower_conv3d_backward_weight(node, ins, ctx) -> Step:
    return _conv_step(compile_kernel("conv3d_dw", K.CONV3D_DW), _geo(forward_attrs(node.attrs)))


@lowers("MaxPool3dBackward", FLOATS, reason=SHADOW_NOTE)
def lower_maxpool3d_backward(node, ins, ctx) -> Step:
    g = _window(node.attrs, 3, ("stride", "padding"))
    geo = np.array(g["kernel"] + g["stride"] + g["padding"], np.int64)
    kernel = compile_kernel("maxpool3d_bwd", K.MAXPOOL3D_BWD)
    x_dims, dy_dims = tuple(ins[0].dims), tuple(ins[1].dims)
    planes = x_dims[0] * x_dims[1]

    def run(out, x, dy):
        if out.size == 0:
            return
        tmp = shadow_out(out)
        o = out if tmp is None else tmp
        kernel.fn(work(x).reshape((planes,) + x_dims[2:]),
                  work(dy).reshape((planes,) + dy_dims[2:]),
                  o.reshape((planes,) + x_dims[2:]), geo)
        finish(out, tmp)
    return Step(run, [kernel])


@lowers("Interpolate3d", FLOATS, reason="f16/bf16 values are copied bit for bit (uint16 "
                                        "views)")
def lower_interpolate3d(node, ins, ctx) -> Step:
    x_dims, o_dims = tuple(ins[0].dims), tuple(node.shape.dims)
    planes = x_dims[0] * x_dims[1]
    idx = [R3.nearest_index(a, b).astype(np.int64) for a, b in zip(x_dims[2:], o_dims[2:])]
    kernel = compile_kernel("gather3d", K.GATHER3D)
    bits = node.shape.dtype in (DType.F16, DType.BF16)

    def run(out, x):
        if out.size == 0:
            return
        x = np.ascontiguousarray(x)
        if bits:
            x, out = x.view(np.uint16), out.view(np.uint16)
        kernel.fn(x.reshape((planes,) + x_dims[2:]), out.reshape((planes,) + o_dims[2:]),
                  *idx)
    return Step(run, [kernel])


@lowers("AxialRope2d", FLOATS, reason=SHADOW_NOTE)
def lower_axial_rope2d(node, ins, ctx) -> Step:
    a = node.attrs
    f64 = node.shape.dtype is DType.F64
    ax, ay = angles(a, f64)
    wdt = np.float64 if f64 else np.float32
    # the oracle's tables: cos/sin of the angles in the working precision
    tables = [np.ascontiguousarray(f(t), wdt) for t in (ax, ay) for f in (np.cos, np.sin)]
    kernel = compile_kernel("axial_rope", K.AXIAL_ROPE)

    def run(out, x):
        if out.size == 0:
            return
        tmp = shadow_out(out)
        kernel.fn(work(x), *tables, out if tmp is None else tmp, a.num_heads, a.head_dim)
        finish(out, tmp)
    return Step(run, [kernel])
