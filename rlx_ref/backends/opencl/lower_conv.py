"""OpenCL lowering of the conv family: Conv, ConvTranspose2d, Pool, Im2Col.

Conv is an implicit im2col + the packed product of ``_linalg_plan``: per (image, group),
``out[co, pixel] = Σ_k W[co, k] · X̃[k, pixel]`` with k = (channel, ky, kx). The weight is
packed once through an offset table; the unfolded input X̃ is written straight into the
rhs panels by the packing kernel (zero outside the input), a chunk of images at a time so
the scratch stays under conv.chunk_bytes, and the product writes NCHW directly.
ConvTranspose2d is the same product in gather form: k runs over (input channel, ky, kx)
and X̃[k, pixel] is the input element whose tap lands on that output pixel (zero where
none does), with the weight read as ``[group][C_out/g][C_in/g·kH·kW]`` through its table.
Pool and Im2Col are direct kernels (``_conv_src``). 16-bit floats compute in f32.
"""
from __future__ import annotations

import math

import numpy as np

from ...ops import _conv_ref as R
from . import memory
from ._conv_src import im2col_source, pool_source
from ._linalg_cl import FLOATS
from ._linalg_plan import Gemm, Packer, kernel, table_packer
from .launch import bind_1d, scalar
from .lowering import Step, lowers
from .variant_table import th, use

# conv.chunk_bytes (variant_table): unfolded input per product launch (whole images, >= 1)
F16_NOTE = "f16/bf16 are computed in f32 and rounded once"


def _idle():
    return None


def _as4(dims: tuple) -> tuple:
    """A rank-3 [N, C, L] operand read as [N, C, 1, L]."""
    return (dims[0], dims[1], 1, dims[2]) if len(dims) == 3 else tuple(dims)


def _geo(ctx, values) -> memory.DevArray:
    return memory.upload(ctx.program.context, ctx.queue, np.asarray(values, np.int32))


def _zeros_step(ctx) -> Step:
    """An output no term reaches (an empty reduction): zeros."""
    def bind(out, *xs):
        import pyopencl as cl

        def launch():
            cl.enqueue_fill_buffer(ctx.queue, out.buf, np.zeros(1, np.uint8), 0, out.nbytes)
        return launch
    return Step(bind)


def _conv_product(node, ctx, n: int, groups: int, M: int, N: int, K: int, a: Packer,
                  geo: list, kind: str) -> Step:
    """out[img, g·M + m, pixel] = Σ_k A[g][m, k] · unfold(x)[img, g][k, pixel]."""
    dt = node.shape.dtype
    if n * groups * M * N == 0:
        return Step(lambda out, x, w: _idle)
    if K == 0:
        return _zeros_step(ctx)
    per_image = groups * K * N * 4
    imgs = max(1, min(n, th("conv.chunk_bytes") // max(per_image, 1)))
    use("conv.images.chunked" if imgs < n else "conv.images.whole")
    chunks = [(i * groups, min(imgs, n - i) * groups) for i in range(0, n, imgs)]
    b = Packer(kind, dt, N, K, None, geo=_geo(ctx, geo))
    most = imgs * groups
    ia, ib = np.arange(most) % groups, np.arange(most)
    plan = Gemm(ctx, dt, M, N, K, a, b, ia, ib, chunks)
    return Step(lambda out, x, w: plan.bind(out, w, x))


@lowers("Conv", FLOATS, reason=F16_NOTE)
def lower_conv(node, ins, ctx) -> Step:
    a = node.attrs
    n, c, h, w = _as4(tuple(ins[0].dims))
    co, cg, kh, kw = _as4(tuple(ins[1].dims))
    (sh, sw), (ph, pw), (dh, dw) = (R.per_axis(a, f, 2) for f in
                                    ("stride", "padding", "dilation"))
    ho, wo = _as4(tuple(node.shape.dims))[2:]
    g = a.groups
    cog, kk = co // g, cg * kh * kw
    wa = table_packer(ctx, node.shape.dtype, np.arange(g) * cog * kk, np.arange(cog) * kk,
                      np.arange(kk))
    geo = [g, c, h, w, cg, kh, kw, sh, sw, ph, pw, dh, dw, wo]
    return _conv_product(node, ctx, n, g, cog, ho * wo, kk, wa, geo, "im2col")


@lowers("ConvTranspose2d", FLOATS, reason=F16_NOTE)
def lower_conv_transpose(node, ins, ctx) -> Step:
    a = node.attrs
    n, ci, h, w = _as4(tuple(ins[0].dims))
    _, cog, kh, kw = _as4(tuple(ins[1].dims))
    (sh, sw), (ph, pw), (dh, dw) = (R.per_axis(a, f, 2) for f in
                                    ("stride", "padding", "dilation"))
    ho, wo = _as4(tuple(node.shape.dims))[2:]
    g = a.groups
    cig = ci // g
    taps = kh * kw
    # weight [C_in, C_out/g, kh, kw]: group g's lhs row o, column (ci, i, j)
    ks = (np.arange(cig)[:, None] * cog * taps + np.arange(taps)[None, :]).reshape(-1)
    wa = table_packer(ctx, node.shape.dtype, np.arange(g) * cig * cog * taps,
                      np.arange(cog) * taps, ks)
    geo = [g, ci, h, w, cig, kh, kw, sh, sw, ph, pw, dh, dw, wo]
    return _conv_product(node, ctx, n, g, cog, ho * wo, cig * taps, wa, geo, "convt")


@lowers("Pool", FLOATS)
def lower_pool(node, ins, ctx) -> Step:
    a = node.attrs
    nsp = len(a.kernel_size)
    pad = (1,) * (3 - nsp)
    x_dims, o_dims = tuple(ins[0].dims), tuple(node.shape.dims)
    kern = pad + tuple(a.kernel_size)
    stride = pad + tuple(R.per_axis(a, "stride", nsp))
    padding = (0,) * (3 - nsp) + tuple(R.per_axis(a, "padding", nsp))
    geo = _geo(ctx, (pad + x_dims[2:]) + (pad + o_dims[2:]) + kern + stride + padding)
    ref = kernel(ctx, pool_source(node.shape.dtype, a.kind))
    total = math.prod(o_dims)

    def bind(out, x):
        return bind_1d(ref, ctx.device, ctx.queue, total, [out.buf, x.buf, geo.buf,
                                                           scalar(total)])
    return Step(bind)


@lowers("Im2Col", FLOATS, reason="values are copied bit for bit")
def lower_im2col(node, ins, ctx) -> Step:
    a = node.attrs
    _, c, h, w = tuple(ins[0].dims)
    kh, kw = a.kernel_size
    (sh, sw), (ph, pw), (dh, dw) = (R.per_axis(a, f, 2) for f in
                                    ("stride", "padding", "dilation"))
    ho = R.conv_out_size(h, kh, sh, ph, dh, "H")
    wo = R.conv_out_size(w, kw, sw, pw, dw, "W")
    geo = _geo(ctx, [c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, ho, wo])
    ref = kernel(ctx, im2col_source(node.shape.dtype))
    total = math.prod(node.shape.dims)

    def bind(out, x):
        return bind_1d(ref, ctx.device, ctx.queue, total, [out.buf, x.buf, geo.buf,
                                                           scalar(total)])
    return Step(bind)

