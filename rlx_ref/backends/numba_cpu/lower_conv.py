"""Lowering of the conv family: Conv, ConvTranspose2d, Pool, Im2Col.

Conv with at least conv.nhwc_min_cg channels per group, at least as many output positions
as filters per group (and not 1×1 stride-1 unpadded) is
im2col + BLAS over blocks of output positions (whole output rows, or a piece of one row) of
one (image, group), at most BLOCK_BYTES of im2col rows and products each: the block's input
window is copied channels last, zero padding included, into a per-thread buffer, where each
im2col row is kH contiguous runs of kW·Cg values (kH·kW runs of Cg when dilated along W);
one ``np.dot`` ``[positions, K]·[K, Cog]`` and a transpose write the NCHW output. That
product shape is BLAS's faster one here (Cog is its small M: 80 against 67 GFLOP/s on one
thread for ``[64, 576]·[576, 256]`` the other way round), and the window copy keeps the
unfold in cache. Threads take chunks of blocks, each with single-threaded BLAS calls.
Measured on 8×64×56×56 (3×3, 64 filters, f32, 2 threads, one process): 13.1 ms against
17.3-19.2 ms for the whole-image path below (onnxruntime 12.2-15.3), its products alone
~11 ms; blocks of 0.5, 1 and 2 MiB took 14.9, 13.8 and 13.1 ms (each BLAS call packs the
whole weight, and a block of R rows copies R + kH - 1 input rows).

Fewer positions than filters (a late layer: 49 positions, 512 filters of 3×3×512) take the
path below instead: its weight is used as stored, where channels-last blocks transpose it
each run (9-11 ms for those 9.4 MB, against 2.8 ms for the single-threaded product), and
its threads share the filters rather than the positions (each block of positions would
pack all of the weight). Measured on one thread at batch 1: 3.4 ms for that layer against
17 ms channels-last; at 28×28×128 (784 positions) channels-last stays faster, 2.6 against
2.8 ms.

Conv with one input channel per group (depthwise, as MobileNet's) is a direct loop over
output planes: the input plane copied zero padded, then each output row the sum of its
kH·kW taps as scaled runs of padded rows: a GEMM per group there has K = kH·kW (9 or 25)
and one output row, all call overhead and packing.

Other Conv is im2col + BLAS on whole images: the taps of each (image, group) are unfolded
into a ``[Cg·kH·kW, H_out·W_out]`` scratch matrix and one ``np.dot`` inside ``njit`` writes
``[Cog, H_out·W_out]`` straight into the NCHW output; a 1×1 stride-1 unpadded conv skips
the unfold. The scratch (allocated once per node, reused across runs) holds as many whole
images as fit in conv.cols_bytes, unfolded in one prange pass before their GEMMs, so Numba's
threads and the BLAS threads take turns once per batch of images, not per image. Chosen by
measurement on 8×64×56×56 (3×3, 64 filters): 34 ms on one thread (54 GFLOP/s), against 69 ms
for numpy's im2col + sgemm; the baseline's direct Numba loop reached 42 GFLOP/s on two.
ConvTranspose2d is the adjoint: one GEMM ``Wᵀ·x`` per (image, group) into columns, then a
col2im scatter-add, parallel over (image, group, output channel) so no two threads write
one plane. Pool folds each window tap into a row of outputs at a time (in f64), Im2Col is a
direct loop. f16/bf16: Conv and
ConvTranspose2d compute through f32 shadows, Pool through f64; Im2Col moves values, so
16-bit payloads are copied bit for bit through uint16 views.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.dtype import DType
from ...ops import _conv_ref as R
from . import _conv_kernels as K
from .kernels import compile_kernel
from .lower_linalg import (
    FLOATS,
    SHADOW_NOTE,
    blas_serial,
    finish,
    numba_threads,
    shadow_out,
    work,
)
from .lowering import Step, lowers
from .variant_table import th, use, use_par

# conv.cols_bytes (variant_table): unfold scratch holds as many whole images as fit (>= 1)
# conv.par_min (loop iterations × inner work below it: serial) and conv.nhwc_min_cg
# (channels per group from which Conv unfolds channels-last blocks): variant_table
BLOCK_BYTES = 2 << 20        # ... whose im2col rows and products take at most this many bytes
CHUNKS_PER_THREAD = 4        # ... handed to the threads in this many chunks each
POOL_KINDS = {"Sum": 0, "Mean": 1, "Max": 2, "Min": 3, "Prod": 4}


def _axes(attrs, names=("stride", "padding", "dilation")) -> list:
    return [R.per_axis(attrs, f, 2) for f in names]


def _pick(kernel, name: str, work_units: int, family: str):
    """Kernel ``name`` or its prange twin by ``work_units`` (recorded as ``family``)."""
    par = use_par(family, work_units >= th("conv.par_min"))
    return kernel.get(name + "_par") if par else kernel.get(name)


def _work_np(dt: DType):
    return np.float64 if dt is DType.F64 else np.float32


def _block(rows: int, calls: int) -> int:
    """Rows per BLAS call: whole matrices when the ``calls`` of them occupy every thread
    (a single-threaded GEMM is most efficient whole), else blocks of at least 64 rows."""
    split = -(-numba_threads() // calls)
    return rows if split <= 1 else max(64, -(-rows // split))


def _scratch(n: int, per_image: tuple, dt: DType) -> np.ndarray:
    """The unfold buffer ``[NB, *per_image]`` for NB of the ``n`` images at a time."""
    size = math.prod(per_image) * np.dtype(_work_np(dt)).itemsize
    nb = max(1, min(n, th("conv.cols_bytes") // max(size, 1)))
    use("conv.cols.chunked" if nb < n else "conv.cols.whole")
    if nb > numba_threads():
        nb -= nb % numba_threads()         # whole rounds of GEMMs per thread
    return np.empty((nb,) + per_image, _work_np(dt))


def _as4(dims: tuple) -> tuple:
    """A rank-3 [N, C, L] operand read as [N, C, 1, L]."""
    return (dims[0], dims[1], 1, dims[2]) if len(dims) == 3 else tuple(dims)


@lowers("Conv", FLOATS, reason=SHADOW_NOTE)
def lower_conv(node, ins, ctx) -> Step:
    a = node.attrs
    n, _, h, w = _as4(tuple(ins[0].dims))
    co, cg, kh, kw = _as4(tuple(ins[1].dims))
    (sh, sw), (ph, pw), (dh, dw) = _axes(a)
    ho, wo = _as4(tuple(node.shape.dims))[2:]
    g = a.groups
    cog, kk = co // g, cg * kh * kw
    geo = np.array([kh, kw, sh, sw, ph, pw, dh, dw, ho, wo], np.int64)
    one = kh == kw == 1 and (sh, sw, ph, pw) == (1, 1, 0, 0)
    kernel = compile_kernel("conv_gemm", K.render(K.CONV, K.CONV_HEAD))
    if cg == 1 and kk:
        return _conv_dw(node, kernel, (n, g, h, w), co, geo)
    if not one and cg >= th("conv.nhwc_min_cg") and ho * wo >= cog:
        return _conv_nhwc(node, kernel, (n, g, cg, h, w), (cog, kh, kw), geo)
    gemm = _pick(kernel, "conv_1x1" if one else "conv_gemm", n * g * kk * ho * wo,
                 "conv.1x1" if one else "conv.gemm")
    cols = None if one else _scratch(n, (g, kk, ho * wo), node.shape.dtype)
    cb = _block(cog, g * (n if one else cols.shape[0]))

    def run(out, x, wt):
        if out.size == 0:
            return
        tmp = shadow_out(out)
        o4 = (out if tmp is None else tmp).reshape(n, g, cog, ho * wo)
        if kk == 0:
            o4[...] = 0
        elif one:
            w3 = work(wt).reshape(g, cog, kk)
            blas_serial(gemm, work(x).reshape(n, g, cg, h * w), w3, o4, cb)
        else:
            blas_serial(gemm, work(x).reshape(n, g, cg, h, w), work(wt).reshape(g, cog, kk),
                        o4, cols, geo, cb)
        finish(out, tmp)
    return Step(run, [kernel])


def _conv_nhwc(node, kernel, x_dims, w_dims, geo) -> Step:
    """Conv as blocks of a channels-last im2col matrix times the weight (see conv_nhwc)."""
    n, g, cg, h, w = x_dims
    cog, kh, kw = w_dims
    ho, wo = int(geo[8]), int(geo[9])
    kk = cg * kh * kw
    work_units = n * g * kk * ho * wo
    threads = numba_threads() if work_units >= th("conv.par_min") else 1
    fit = max(1, BLOCK_BYTES // ((kk + cog) * np.dtype(_work_np(node.shape.dtype)).itemsize))
    by, bx = (max(1, min(ho, fit // wo)), wo) if fit >= wo else (1, fit)
    while n * g * -(-ho // by) * -(-wo // bx) < 2 * threads and by * bx > 16:
        by, bx = (-(-by // 2), bx) if by > 1 else (by, -(-bx // 2))
    items = n * g * -(-ho // by) * -(-wo // bx)
    chunks = min(items, CHUNKS_PER_THREAD * threads)
    fn = _pick(kernel, "conv_nhwc", work_units, "conv.nhwc")

    def run(out, x, wt):
        if out.size == 0:
            return
        tmp = shadow_out(out)
        o4 = (out if tmp is None else tmp).reshape(n, g, cog, ho * wo)
        wr = np.ascontiguousarray(work(wt).reshape(g, cog, cg, kh, kw).transpose(0, 3, 4, 2, 1)
                                  .reshape(g, kk, cog))
        blas_serial(fn, work(x).reshape(n, g, cg, h, w), wr, o4, geo, by, bx, chunks)
        finish(out, tmp)
    return Step(run, [kernel])


def _conv_dw(node, kernel, x_dims, co: int, geo) -> Step:
    """Conv with one input channel per group (depthwise): a direct loop (see conv_dw)."""
    n, g, h, w = x_dims
    kh, kw, ho, wo = (int(geo[i]) for i in (0, 1, 8, 9))
    fn = _pick(kernel, "conv_dw", n * co * ho * wo * kh * kw, "conv.depthwise")

    def run(out, x, wt):
        if out.size == 0:
            return
        tmp = shadow_out(out)
        o4 = (out if tmp is None else tmp).reshape(n, co, ho, wo)
        fn(work(x).reshape(n, g, h, w), work(wt).reshape(co, kh, kw), o4, geo)
        finish(out, tmp)
    return Step(run, [kernel])


@lowers("ConvTranspose2d", FLOATS,
        reason=SHADOW_NOTE + "; the weight is transposed to [G, Cout/G·kH·kW, Cin/G] on the "
                             "host each run (a copy of the weight)")
def lower_conv_transpose(node, ins, ctx) -> Step:
    a = node.attrs
    n, ci, h, w = _as4(tuple(ins[0].dims))
    _, cog, kh, kw = _as4(tuple(ins[1].dims))
    (sh, sw), (ph, pw), (dh, dw) = _axes(a)
    ho, wo = _as4(tuple(node.shape.dims))[2:]
    g = a.groups
    cig = ci // g
    geo = np.array([kh, kw, sh, sw, ph, pw, dh, dw, ho, wo, h, w], np.int64)
    kernel = compile_kernel("conv_gemm", K.render(K.CONV, K.CONV_HEAD))
    gemm = _pick(kernel, "convt_gemm", n * g * cog * kh * kw * h * w, "convt.gemm")
    cols = _scratch(n, (g, cog * kh * kw, h * w), node.shape.dtype)
    cb = _block(cog * kh * kw, g * cols.shape[0])

    def run(out, x, wt):
        if out.size == 0:
            return
        tmp = shadow_out(out)
        o5 = (out if tmp is None else tmp).reshape(n, g, cog, ho, wo)
        if cig == 0:
            o5[...] = 0
        else:
            wt3 = np.ascontiguousarray(work(wt).reshape(g, cig, cog * kh * kw)
                                       .transpose(0, 2, 1))
            blas_serial(gemm, work(x).reshape(n, g, cig, h * w), wt3, o5, cols, geo, cb)
        finish(out, tmp)
    return Step(run, [kernel])


@lowers("Pool", FLOATS, reason="f16/bf16 run through f64 shadows converted on the host")
def lower_pool(node, ins, ctx) -> Step:
    a = node.attrs
    nsp = len(a.kernel_size)
    x_dims, o_dims = tuple(ins[0].dims), tuple(node.shape.dims)
    pad3 = (1,) * (3 - nsp)
    kern3 = pad3 + tuple(a.kernel_size)
    stride3 = pad3 + tuple(R.per_axis(a, "stride", nsp))
    padding3 = (0,) * (3 - nsp) + tuple(R.per_axis(a, "padding", nsp))
    geo = np.array(kern3 + stride3 + padding3, np.int64)
    planes = math.prod(x_dims[:2])
    x4 = (planes,) + pad3 + x_dims[2:]
    o4 = (planes,) + pad3 + o_dims[2:]
    kind = POOL_KINDS[a.kind]
    kernel = compile_kernel("pool", K.render(K.POOL, K.SPAN))
    fn = _pick(kernel, "pool", math.prod(o_dims) * math.prod(a.kernel_size), "pool")
    sixteen = node.shape.dtype in (DType.F16, DType.BF16)

    def run(out, x):
        if out.size == 0:
            return
        xs = work(x).reshape(x4)
        if sixteen:
            tmp = np.empty(o4, np.float64)
            fn(xs, tmp, geo, kind)
            with np.errstate(over="ignore"):
                out[...] = tmp.reshape(out.shape).astype(out.dtype)
        else:
            fn(xs, out.reshape(o4), geo, kind)
    return Step(run, [kernel])


@lowers("Im2Col", FLOATS, reason="f16/bf16 values are copied bit for bit (uint16 views)")
def lower_im2col(node, ins, ctx) -> Step:
    a = node.attrs
    _, _, h, w = tuple(ins[0].dims)
    kh, kw = a.kernel_size
    (sh, sw), (ph, pw), (dh, dw) = _axes(a)
    ho = R.conv_out_size(h, kh, sh, ph, dh, "H")
    wo = R.conv_out_size(w, kw, sw, pw, dw, "W")
    geo = np.array([kh, kw, sh, sw, ph, pw, dh, dw, ho, wo], np.int64)
    kernel = compile_kernel("im2col", K.render(K.IM2COL))
    fn = _pick(kernel, "im2col", math.prod(node.shape.dims), "im2col")
    bits = node.shape.dtype in (DType.F16, DType.BF16)

    def run(out, x):
        if out.size == 0:
            return
        x = np.ascontiguousarray(x)
        if bits:
            x, out = x.view(np.uint16), out.view(np.uint16)
        fn(x, out, geo)
    return Step(run, [kernel])
