"""Lowering of the NCDHW kinds and AxialRope2d: Conv3d, ConvTranspose3d,
Conv3dBackwardInput, Conv3dBackwardWeight, MaxPool3dBackward, Interpolate3d, AxialRope2d.

Conv3d and Conv3dBackwardWeight unfold the taps of one (image, group) and a block of output
depth planes (at most COLS_BYTES) into a ``[planes·H_out·W_out, Cg·kvol]`` matrix in
parallel, then one BLAS product each: ``rows · w_gᵀ`` for the output (the
``[positions, K]·[K, Cog]`` shape ``lower_conv`` found faster), ``dy_g · rows`` summed into
dw. ConvTranspose3d and Conv3dBackwardInput (the same transposed conv) are the mirror: one
product ``x_gᵀ · w_g`` per block of input planes, folded into the output in parallel over
output channels (no two threads write one element). On 2×32×24³ (3³, 32 filters, f32, a
loaded 2-core machine) the unfold took Conv3d from 4.3 s (a direct loop) to 1.1 s, PyTorch
0.08-0.3 s in the same runs. MaxPool3dBackward is a direct loop, one thread per plane.
f16/bf16 compute through f32 operands and an f32 output shadow; Interpolate3d moves values,
so 16-bit payloads are copied bit for bit through uint16 views.
"""
from __future__ import annotations

import math

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

COLS_BYTES = 8 << 20     # unfolded taps per block: a block of output planes fits this

def _geo(a) -> np.ndarray:
    return np.array(tuple(a.stride) + tuple(a.padding) + tuple(a.dilation) + (a.groups,),
                    np.int64)


class _Unfold:
    """The unfold geometry of a Conv3d (x dims, w dims, output dims, forward payload)."""

    def __init__(self, x_dims, w_dims, o_dims, a, dtype: DType):
        self.n, self.cout, self.groups = x_dims[0], w_dims[0], a.groups
        self.cg, self.kk = w_dims[1], math.prod(w_dims[1:])
        self.cog = self.cout // a.groups
        self.do_, self.plane = o_dims[2], o_dims[3] * o_dims[4]
        self.geo = np.concatenate([_geo(a), np.array(w_dims[2:] + o_dims[3:], np.int64)])
        item = 8 if dtype is DType.F64 else 4
        self.nz = max(1, min(self.do_, COLS_BYTES // max(1, self.kk * self.plane * item)))
        self.kernel = compile_kernel("unfold3d", K.UNFOLD3D)

    def blocks(self, x):
        """(image, group, first plane, planes, rows) for every block, rows filled: one row
        of Cg·kvol taps per output position."""
        buf = np.empty(self.kk * self.nz * self.plane, x.dtype)
        for b in range(self.n):
            for g in range(self.groups):
                for z0 in range(0, self.do_, self.nz):
                    m = min(self.nz, self.do_ - z0)
                    rows = buf[:self.kk * m * self.plane].reshape(m * self.plane, self.kk)
                    self.kernel.fn(x, rows, b, g * self.cg, self.geo, z0, m)
                    yield b, g, z0, m, rows


@lowers("Conv3d", FLOATS, reason=SHADOW_NOTE)
def lower_conv3d(node, ins, ctx) -> Step:
    u = _Unfold(tuple(ins[0].dims), tuple(ins[1].dims), tuple(node.shape.dims), node.attrs,
                node.shape.dtype)

    def run(out, x, w):
        if out.size == 0:
            return
        tmp = shadow_out(out)
        o = (out if tmp is None else tmp).reshape(u.n, u.cout, u.do_, u.plane)
        xw, ww = work(x), work(w).reshape(u.cout, u.kk)
        for b, g, z0, m, rows in u.blocks(xw):
            co = slice(g * u.cog, (g + 1) * u.cog)
            # [positions, K]·[K, Cog]: BLAS's faster shape here (lower_conv says why)
            o[b, co, z0:z0 + m] = np.dot(rows, ww[co].T).T.reshape(u.cog, m, u.plane)
        finish(out, tmp)
    return Step(run, [u.kernel])


def _transposed_step(x_dims, w_dims, o_dims, a, dtype: DType) -> Step:
    """The transposed conv of x [N, C_in, D, H, W] with w [C_in, C_out/groups, k]: per
    (image, group, block of input planes) one BLAS product ``x_gᵀ · w_g`` gives every
    input position's ``[C_out/groups · kvol]`` contributions, which ``fold3d`` adds in."""
    n, cin, d_in = x_dims[:3]
    groups, cog, kvol = a.groups, w_dims[1], math.prod(w_dims[2:])
    cig, plane = cin // groups, x_dims[3] * x_dims[4]
    geo = np.concatenate([_geo(a), np.array(w_dims[2:] + x_dims[3:], np.int64)])
    item = 8 if dtype is DType.F64 else 4
    nz = max(1, min(d_in, COLS_BYTES // max(1, cog * kvol * plane * item)))
    kernel = compile_kernel("fold3d", K.FOLD3D)

    def run(out, x, w):
        if out.size == 0:
            return
        tmp = shadow_out(out)
        o = out if tmp is None else tmp
        o[...] = 0
        xw = work(x).reshape(n, cin, d_in * plane)
        ww = work(w).reshape(cin, cog * kvol)
        for b in range(n):
            for g in range(groups):
                ci = slice(g * cig, (g + 1) * cig)
                for z0 in range(0, d_in, nz):
                    m = min(nz, d_in - z0)
                    rows = np.dot(xw[b, ci, z0 * plane:(z0 + m) * plane].T, ww[ci])
                    kernel.fn(rows, o, b, g * cog, geo, z0, m)
        finish(out, tmp)
    return Step(run, [kernel])


@lowers("ConvTranspose3d", FLOATS, reason=SHADOW_NOTE)
def lower_conv_transpose3d(node, ins, ctx) -> Step:
    return _transposed_step(tuple(ins[0].dims), tuple(ins[1].dims), tuple(node.shape.dims),
                            node.attrs, node.shape.dtype)


@lowers("Conv3dBackwardInput", FLOATS, reason=SHADOW_NOTE)
def lower_conv3d_backward_input(node, ins, ctx) -> Step:
    # Conv3d's adjoint: the transposed conv of dy with w, onto x's declared extent
    return _transposed_step(tuple(ins[0].dims), tuple(ins[1].dims), tuple(node.shape.dims),
                            forward_attrs(node.attrs), node.shape.dtype)


@lowers("Conv3dBackwardWeight", FLOATS, reason=SHADOW_NOTE)
def lower_conv3d_backward_weight(node, ins, ctx) -> Step:
    x_dims, dy_dims, w_dims = tuple(ins[0].dims), tuple(ins[1].dims), tuple(node.shape.dims)
    u = _Unfold(x_dims, w_dims, dy_dims, forward_attrs(node.attrs), node.shape.dtype)

    def run(out, x, dy):
        if out.size == 0:
            return
        tmp = shadow_out(out)
        o = (out if tmp is None else tmp).reshape(u.cout, u.kk)
        o[...] = 0
        xw, d = work(x), work(dy).reshape(u.n, u.cout, u.do_, u.plane)
        for b, g, z0, m, rows in u.blocks(xw):
            co = slice(g * u.cog, (g + 1) * u.cog)
            o[co] += np.dot(d[b, co, z0:z0 + m].reshape(u.cog, m * u.plane), rows)
        finish(out, tmp)
    return Step(run, [u.kernel])


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
