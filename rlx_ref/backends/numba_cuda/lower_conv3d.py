"""Conv3d and Interpolate3d as CUDA kernels (NCDHW).

Conv3d is direct: one thread per output element sums its group's channels and taps in
f64 (16-bit operands widened exactly) and rounds once; every input read is range-guarded,
positions outside the input read 0. The geometry is fixed at lowering and rendered into
the kernel. Interpolate3d is a gather: one thread per output element computes its source
``min(o·L // L_out, L − 1)`` per axis in exact integers and copies the device element, so
values (16-bit bits too) move bit for bit.
"""
from __future__ import annotations

from ...ir.dtype import DType
from .device import device_dtype, launch_shape
from .geometry import read_expr, store_expr
from .kernels import Launch, array_type, compile_kernel
from .lower_reduce import _render
from .lowering import FLOATS, SIXTEEN, SIXTEEN_NOTE, Step, lowers

_CONV = '''
def {name}(out, x, w):
    e = cuda.grid(1)
    step = cuda.gridsize(1)
    while e < out.size:
        ox = e % {WO}
        r = e // {WO}
        oy = r % {HO}
        r //= {HO}
        oz = r % {DO}
        r //= {DO}
        co = r % {CO}
        n = r // {CO}
        c0 = (co // {COG}) * {CG}
        acc = 0.0
        for c in range({CG}):
            xb = (n * {CI} + c0 + c) * {D}
            wb = (co * {CG} + c) * {KD}
            for i in range({KD}):
                iz = oz * {SD} + i * {DD} - {PD}
                if iz >= 0 and iz < {D}:
                    for j in range({KH}):
                        iy = oy * {SH} + j * {DH} - {PH}
                        if iy >= 0 and iy < {H}:
                            for l in range({KW}):
                                ix = ox * {SW} + l * {DW} - {PW}
                                if ix >= 0 and ix < {W}:
                                    acc += {xr} * {wr}
        out[e] = {store}
        e += step
'''
_NEAREST = '''
def {name}(out, x):
    e = cuda.grid(1)
    step = cuda.gridsize(1)
    while e < out.size:
        ox = e % {WO}
        r = e // {WO}
        oy = r % {HO}
        r //= {HO}
        oz = r % {DO}
        p = r // {DO}
        iz = min(oz * {D} // {DO}, {D} - 1)
        iy = min(oy * {H} // {HO}, {H} - 1)
        ix = min(ox * {W} // {WO}, {W} - 1)
        out[e] = x[((p * {D} + iz) * {H} + iy) * {W} + ix]
        e += step
'''


def _step(launch: Launch):
    def run(out, *xs):
        if out.size:
            blocks, threads = launch_shape(out.size)
            launch(blocks, threads, out, *xs)
    return Step(run, [launch])


@lowers("Conv3d", FLOATS + SIXTEEN, reason=SIXTEEN_NOTE)
def lower_conv3d(node, ins, ctx) -> Step:
    a = node.attrs
    _, ci, d, h, w = (int(v) for v in ins[0].dims)
    co, cg, kd, kh, kw = (int(v) for v in ins[1].dims)
    _, _, do_, ho, wo = (int(v) for v in node.shape.dims)
    (sd, sh, sw), (pd, ph, pw), (dd, dh, dw) = a.stride, a.padding, a.dilation
    src, dst = ins[0].dtype, node.shape.dtype
    name, source = _render(
        _CONV, "conv3d", WO=wo, HO=ho, DO=do_, CO=co, COG=co // a.groups, CG=cg, CI=ci,
        D=d, H=h, W=w, KD=kd, KH=kh, KW=kw, SD=sd, SH=sh, SW=sw, PD=pd, PH=ph, PW=pw,
        DD=dd, DH=dh, DW=dw, xr=read_expr(src, f"x[((xb + iz) * {h} + iy) * {w} + ix]"),
        wr=read_expr(ins[1].dtype, f"w[((wb + i) * {kh} + j) * {kw} + l]"),
        store=store_expr(dst, "acc"))
    types = tuple(array_type(device_dtype(s)) for s in (dst, src, ins[1].dtype))
    return _step(Launch(compile_kernel(name, source), types))


@lowers("Interpolate3d", tuple(DType))
def lower_interpolate3d(node, ins, ctx) -> Step:
    d, h, w = (int(v) for v in ins[0].dims[2:])
    do_, ho, wo = (int(v) for v in node.shape.dims[2:])
    name, source = _render(_NEAREST, "interp3d", D=d, H=h, W=w, DO=do_, HO=ho, WO=wo)
    arr = array_type(device_dtype(node.shape.dtype))
    return _step(Launch(compile_kernel(name, source), (arr, arr)))
