"""The conv family as CUDA kernels: Conv, ConvTranspose2d (implicit GEMM), Pool, Im2Col.

Conv is the register-tiled GEMM of ``_gemm`` with one GEMM per channel group:
``out[g] = W[g] · cols[g]`` with M = C_out/groups, K = C_in/groups·kH·kW and
N = images·H_out·W_out. The columns are never materialized: the B tile loader gathers
each element from the image, through two small host tables (per column: image offset,
top-left input row and column; per K index: channel offset and tap offsets), so the
kernel has no integer division in its loads and one kernel serves every geometry of a
dtype. ConvTranspose2d is the same GEMM in gather form: column (oy, ox) and tap (i, j)
read input row ``(oy + pH - i·dH) / sH`` when that divides exactly; the quotient is
rounded from a product with the f64 reciprocal and checked by multiplying back, which is
exact for any index below 2**50 and spares the loads a 64-bit integer division. Pool (f64
accumulators, padding skipped, Mean over the full window, the kind a uniform branch) and
Im2Col (a bit-exact element move) are one thread per output element.
"""
from __future__ import annotations

import numpy as np

from ...ops import _conv_ref as R
from ._gemm import gemm_blocks, render_gemm, tiling
from .device import DeviceConst, device_dtype, launch_shape, rows_shape
from .geometry import read_expr, store_expr
from .kernels import Launch, array_type, compile_kernel, float_type, int_type
from .lower_linalg import acc_type
from .lower_reduce import FLOAT_KINDS, _render
from .lowering import SIXTEEN_NOTE, Step, lowers

POOL_KINDS = {"Sum": 0, "Mean": 1, "Prod": 2, "Max": 3, "Min": 4}

_CONV_B = '''
yy = ntab[col * 4 + 1] + ktab[kb * 4 + 1]
xx = ntab[col * 4 + 2] + ktab[kb * 4 + 2]
if yy >= 0 and yy < h and xx >= 0 and xx < w:
    v = {acc}({read})
'''
_CONVT_B = '''
qy = ntab[col * 4 + 1] - ktab[kb * 4 + 1]
qx = ntab[col * 4 + 2] - ktab[kb * 4 + 2]
iy = np.int64(qy * rsh + 0.5)
ix = np.int64(qx * rsw + 0.5)
if qy >= 0 and qx >= 0 and iy * sh == qy and ix * sw == qx and iy < h and ix < w:
    v = {acc}({read})
'''


def _as4(dims) -> tuple:
    """A rank-3 [N, C, L] operand read as [N, C, 1, L]."""
    dims = tuple(int(d) for d in dims)
    return (dims[0], dims[1], 1, dims[2]) if len(dims) == 3 else dims


def _geometry(attrs):
    """(stride, padding, dilation), each padded to two spatial axes."""
    return [R.per_axis(attrs, f, 2) for f in ("stride", "padding", "dilation")]


def _conv_launch(prefix, node, ins, load_b: str, load_a: str, m, n, k, extra=()):
    dt = node.shape.dtype
    acc = acc_type(dt)
    tl = tiling(acc, m, n)
    name, source = render_gemm(
        prefix, acc, tl, load_a=load_a.replace("{acc}", acc),
        load_b=load_b.replace("{acc}", acc), setup="goff = batch * gstride",
        store=f"out[ntab[col * 4 + 3] + (batch * m + row) * plane] = {store_expr(dt, 'value')}",
        extra=("ntab", "ktab", "h", "w", "gstride", "plane") + tuple(extra))
    i64, tab = int_type(), array_type(np.int64)
    arrs = tuple(array_type(device_dtype(d)) for d in (dt, ins[1].dtype, ins[0].dtype))
    more = tuple(float_type() if x.startswith("r") else i64 for x in extra)
    launch = Launch(compile_kernel(name, source),
                    arrs + (i64,) * 4 + (tab, tab) + (i64,) * 4 + more)
    return launch, tl


def _gemm_step(launch, tl, m, n, k, groups, ntab, ktab, h, w, gstride, plane,
               extra=()) -> Step:
    nt, kt = DeviceConst(ntab), DeviceConst(ktab)
    blocks = gemm_blocks(tl, m, n, groups)

    def run(out, x, wt):
        if blocks:
            grid, threads = rows_shape(blocks, tl.threads)
            # the GEMM's A operand is the weight, its B operand the image
            launch(grid, threads, out, wt, x, m, n, k, groups, nt.get(), kt.get(), h, w,
                   gstride, plane, *extra)
    return Step(run, [launch])


def conv_gemm(node, ins) -> tuple:
    """A 2-D convolution as a grouped implicit GEMM: (m, n, k, groups, ntab, ktab, h, w,
    gstride, plane). ntab rows: an output column's image offset, y and x origin and output
    offset; ktab rows: a tap's image offset and dilated y, x."""
    n_img, c_in, h, w = _as4(ins[0].dims)
    c_out, cg, kh, kw = _as4(ins[1].dims)
    (sh, sw), (ph, pw), (dh, dw) = _geometry(node.attrs)
    ho, wo = _as4(node.shape.dims)[2:]
    groups = node.attrs.groups
    m, k, n = c_out // groups, cg * kh * kw, n_img * ho * wo
    img, oy, ox = (a.reshape(-1) for a in np.indices((n_img, ho, wo)))
    ybase, xbase = oy * sh - ph, ox * sw - pw
    ntab = np.stack([img * c_in * h * w + ybase * w + xbase, ybase, xbase,
                     img * c_out * ho * wo + oy * wo + ox], 1)
    c, i, j = (a.reshape(-1) for a in np.indices((cg, kh, kw)))
    ktab = np.stack([c * h * w + i * dh * w + j * dw, i * dh, j * dw, 0 * c], 1)
    return m, n, k, groups, ntab, ktab, h, w, cg * h * w, ho * wo


@lowers("Conv", FLOAT_KINDS, reason=SIXTEEN_NOTE)
def lower_conv(node, ins, ctx) -> Step:
    m, n, k, groups, ntab, ktab, h, w, gstride, plane = conv_gemm(node, ins)
    read = read_expr(ins[0].dtype, "b[ntab[col * 4] + ktab[kb * 4] + goff]")
    weight = read_expr(ins[1].dtype, "a[(batch * m + row) * k_len + ka]")
    launch, tl = _conv_launch("conv", node, ins, _CONV_B.replace("{read}", read),
                              f"v = {{acc}}({weight})", m, n, k)
    return _gemm_step(launch, tl, m, n, k, groups, ntab, ktab, h, w, gstride, plane)


@lowers("ConvTranspose2d", FLOAT_KINDS, reason=SIXTEEN_NOTE)
def lower_conv_transpose(node, ins, ctx) -> Step:
    n_img, c_in, h, w = _as4(ins[0].dims)
    _, cog, kh, kw = _as4(ins[1].dims)
    (sh, sw), (ph, pw), (dh, dw) = _geometry(node.attrs)
    ho, wo = _as4(node.shape.dims)[2:]
    groups = node.attrs.groups
    cig = c_in // groups
    m, k, n = cog, cig * kh * kw, n_img * ho * wo
    img, oy, ox = (a.reshape(-1) for a in np.indices((n_img, ho, wo)))
    ntab = np.stack([img * c_in * h * w, oy + ph, ox + pw,
                     img * cog * groups * ho * wo + oy * wo + ox], 1)
    c, i, j = (a.reshape(-1) for a in np.indices((cig, kh, kw)))
    ktab = np.stack([c * h * w, i * dh, j * dw, c * cog * kh * kw + i * kw + j], 1)
    read = read_expr(ins[0].dtype, "b[ntab[col * 4] + ktab[kb * 4] + goff + iy * w + ix]")
    load_b = _CONVT_B.replace("{read}", read)
    weight = read_expr(ins[1].dtype, "a[batch * k_len * m + row * khw + ktab[ka * 4 + 3]]")
    load_a = f"v = {{acc}}({weight})"
    launch, tl = _conv_launch("convt", node, ins, load_b, load_a, m, n, k,
                              ("sh", "sw", "rsh", "rsw", "khw"))
    return _gemm_step(launch, tl, m, n, k, groups, ntab, ktab, h, w, cig * h * w, ho * wo,
                      (sh, sw, 1.0 / sh, 1.0 / sw, kh * kw))


_POOL = '''
def {name}(out, x, geo, kind):
    kd, kh, kw, sd, sh, sw = geo[0], geo[1], geo[2], geo[3], geo[4], geo[5]
    pd, ph, pw, di, hi, wi = geo[6], geo[7], geo[8], geo[9], geo[10], geo[11]
    do, ho, wo = geo[12], geo[13], geo[14]
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < out.size:
        ox = i % wo
        r = i // wo
        oy = r % ho
        r //= ho
        oz = r % do
        base = (r // do) * di * hi * wi
        a = np.float64(1.0 if kind == 2 else (-math.inf if kind == 3 else (
            math.inf if kind == 4 else 0.0)))
        for dz in range(kd):
            z = oz * sd - pd + dz
            if z >= 0 and z < di:
                for dy in range(kh):
                    y = oy * sh - ph + dy
                    if y >= 0 and y < hi:
                        for dx in range(kw):
                            xx = ox * sw - pw + dx
                            if xx >= 0 and xx < wi:
                                v = {read}
                                if kind <= 1:
                                    a += v
                                elif kind == 2:
                                    a *= v
                                elif v != v or (v > a if kind == 3 else v < a):
                                    a = v
        if kind == 1:
            a = a / (kd * kh * kw)
        out[i] = {store}
        i += step
'''


@lowers("Pool", FLOAT_KINDS, reason=SIXTEEN_NOTE)
def lower_pool(node, ins, ctx) -> Step:
    a = node.attrs
    nsp = len(a.kernel_size)
    pad3 = (1,) * (3 - nsp)
    kern = pad3 + tuple(a.kernel_size)
    stride = pad3 + tuple(R.per_axis(a, "stride", nsp))
    padding = (0,) * (3 - nsp) + tuple(R.per_axis(a, "padding", nsp))
    x_sp = pad3 + tuple(int(d) for d in ins[0].dims[2:])
    o_sp = pad3 + tuple(int(d) for d in node.shape.dims[2:])
    geo = DeviceConst(np.array(kern + stride + padding + x_sp + o_sp, np.int64))
    read = read_expr(ins[0].dtype, "x[base + (z * hi + y) * wi + xx]")
    name, source = _render(_POOL, "pool", read=read, store=store_expr(node.shape.dtype, "a"))
    arr = array_type(device_dtype(node.shape.dtype))
    launch = Launch(compile_kernel(name, source), (arr, arr, array_type(np.int64), int_type()))
    kind = POOL_KINDS[a.kind]
    n = node.shape.numel

    def run(out, x):
        if n:
            blocks, threads = launch_shape(n)
            launch(blocks, threads, out, x, geo.get(), kind)
    return Step(run, [launch])


_IM2COL = '''
def {name}(out, x, geo):
    c_in, h, w, kh, kw, sh = geo[0], geo[1], geo[2], geo[3], geo[4], geo[5]
    sw, ph, pw, dh, dw, ho, wo = geo[6], geo[7], geo[8], geo[9], geo[10], geo[11], geo[12]
    cols = c_in * kh * kw
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < out.size:
        col = i % cols
        row = i // cols
        ox = row % wo
        r = row // wo
        oy = r % ho
        tap = col % (kh * kw)
        c = col // (kh * kw)
        y = oy * sh + (tap // kw) * dh - ph
        xx = ox * sw + (tap % kw) * dw - pw
        if y >= 0 and y < h and xx >= 0 and xx < w:
            out[i] = x[(((r // ho) * c_in + c) * h + y) * w + xx]
        else:
            out[i] = {zero}
        i += step
'''


@lowers("Im2Col", FLOAT_KINDS, reason="f16/bf16 elements are moved as their bits")
def lower_im2col(node, ins, ctx) -> Step:
    a = node.attrs
    _, c_in, h, w = (int(d) for d in ins[0].dims)
    kh, kw = a.kernel_size
    (sh, sw), (ph, pw), (dh, dw) = _geometry(a)
    ho = R.conv_out_size(h, kh, sh, ph, dh, "H")
    wo = R.conv_out_size(w, kw, sw, pw, dw, "W")
    geo = DeviceConst(np.array([c_in, h, w, kh, kw, sh, sw, ph, pw, dh, dw, ho, wo], np.int64))
    np_dt = device_dtype(node.shape.dtype)
    name, source = _render(_IM2COL, "im2col", zero=f"np.{np_dt.name}(0)")
    arr = array_type(np_dt)
    launch = Launch(compile_kernel(name, source), (arr, arr, array_type(np.int64)))
    n = node.shape.numel

    def run(out, x):
        if n:
            blocks, threads = launch_shape(n)
            launch(blocks, threads, out, x, geo.get())
    return Step(run, [launch])

