"""The integer quant ops as CUDA kernels: Quantize, Dequantize, QMatMul and QConv2d.

Quantize and Dequantize are one thread per element with the channel's scale and zero
point from small host tables (Quantize multiplies by ``f32(1 / scale)``, computed on the
host as the oracle does). QMatMul and QConv2d are the register-tiled GEMM of ``_gemm``
with i64 accumulators over zero-point-shifted i8 operands (exact, as the oracle; QConv2d
gathers its image tile as Conv does, a tap in the padding adding nothing), requantized
to i8 where each output is stored (``_quant_device_int._requant``).
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.dtype import DType
from ._gemm import gemm_blocks, render_gemm, tiling
from .device import DeviceConst, launch_shape, rows_shape
from .kernels import Launch, array_type, compile_kernel, float_type, int_type
from .lower_conv import _CONV_B, conv_gemm
from .lower_reduce import _render
from .lowering import Step, lowers

_IMPORT = ("from rlx_ref.backends.numba_cuda._quant_device_int import _requant, _round_sat, "
           "_to_i8\n")
_I8, _I32 = array_type(np.int8), array_type(np.int32)

_QUANTIZE = '''
def {name}(out, x, sc, zp, inner, chans):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    while i < out.size:
        c = (i // inner) % chans
        {body}
        i += cuda.gridDim.x * cuda.blockDim.x
'''
_BODY = {
    "Quantize": "out[i] = _to_i8(_round_sat(x[i] * sc[c]), zp[c])",
    "Dequantize": "out[i] = np.float32(np.int64(x[i]) - zp[c]) * sc[c]",
}


def _channels(node, ins):
    """(inner run, channel count) of the node's scales along its axis."""
    a = node.attrs
    dims = [int(d) for d in ins[0].dims]
    if a.axis is None:
        return 1, 1
    return math.prod(dims[a.axis + 1:]), dims[a.axis]


def _elementwise(node, ins, scales: np.ndarray) -> Step:
    name, source = _render(_QUANTIZE, node.kind.lower(), body=_BODY[node.kind])
    out_t = _I8 if node.kind == "Quantize" else array_type(np.float32)
    in_t = array_type(np.float32) if node.kind == "Quantize" else _I8
    i64 = int_type()
    launch = Launch(compile_kernel(name, _IMPORT + source),
                    (out_t, in_t, array_type(np.float32), array_type(np.int64), i64, i64))
    inner, chans = _channels(node, ins)
    sc = DeviceConst(scales.astype(np.float32))
    zp = DeviceConst(np.asarray(node.attrs.zero_points, np.int64))

    def run(out, x):
        if out.size:
            grid, threads = launch_shape(out.size)
            launch(grid, threads, out, x, sc.get(), zp.get(), inner, chans)
    return Step(run, [launch])


@lowers("Quantize", (DType.I8,), reason="one thread per element; f32(1/scale) from the host")
def lower_quantize(node, ins, ctx) -> Step:
    with np.errstate(divide="ignore", over="ignore"):
        inv = np.float32(1) / np.asarray(node.attrs.scales, np.float32)
    return _elementwise(node, ins, inv)


@lowers("Dequantize", (DType.F32,), reason="one thread per element")
def lower_dequantize(node, ins, ctx) -> Step:
    return _elementwise(node, ins, np.asarray(node.attrs.scales, np.float32))


_REQ = ("bias", "xzp", "wzp", "ozp", "mult")


def _req_args(a):
    return (int(a.x_zp), int(a.w_zp), int(a.out_zp), float(np.float32(a.mult)))


@lowers("QMatMul", (DType.I8,), reason="i64-accumulating register-tiled GEMM, requantized "
                                      "where stored")
def lower_qmatmul(node, ins, ctx) -> Step:
    m, k = (int(d) for d in ins[0].dims)
    n = int(ins[1].dims[1])
    tl = tiling("np.int64", m, n)
    name, source = render_gemm(
        "qmatmul", "np.int64", tl, load_a="v = np.int64(a[row * k_len + ka]) - xzp",
        load_b="v = np.int64(b[kb * n + col]) - wzp",
        store="out[row * n + col] = _requant(value + np.int64(bias[col]), mult, ozp)",
        extra=_REQ)
    i64 = int_type()
    launch = Launch(compile_kernel(name, _IMPORT + source),
                    (_I8, _I8, _I8) + (i64,) * 4 + (_I32, i64, i64, i64, float_type()))
    blocks = gemm_blocks(tl, m, n, 1)
    req = _req_args(node.attrs)

    def run(out, x, w, bias):
        if out.size:
            grid, threads = rows_shape(blocks, tl.threads)
            launch(grid, threads, out, x, w, m, n, k, 1, bias, *req)
    return Step(run, [launch])


@lowers("QConv2d", (DType.I8,), reason="i64-accumulating implicit GEMM per channel group "
                                      "(as Conv), requantized where stored")
def lower_qconv(node, ins, ctx) -> Step:
    m, n, k, groups, ntab, ktab, h, w, gstride, plane = conv_gemm(node, ins)
    tl = tiling("np.int64", m, n)
    load_b = _CONV_B.replace("{acc}", "np.int64").replace(
        "{read}", "np.int64(b[ntab[col * 4] + ktab[kb * 4] + goff]) - xzp")
    name, source = render_gemm(
        "qconv", "np.int64", tl, load_a="v = np.int64(a[(batch * m + row) * k_len + ka]) - wzp",
        load_b=load_b, setup="goff = batch * gstride",
        store="out[ntab[col * 4 + 3] + (batch * m + row) * plane] = _requant(value + "
              "np.int64(bias[batch * m + row]), mult, ozp)",
        extra=("ntab", "ktab", "h", "w", "gstride", "plane") + _REQ)
    i64, tab = int_type(), array_type(np.int64)
    launch = Launch(compile_kernel(name, _IMPORT + source),
                    (_I8, _I8, _I8) + (i64,) * 4 + (tab, tab) + (i64,) * 4
                    + (_I32, i64, i64, i64, float_type()))
    nt, kt = DeviceConst(ntab.astype(np.int64)), DeviceConst(ktab.astype(np.int64))
    blocks = gemm_blocks(tl, m, n, groups)
    req = _req_args(node.attrs)

    def run(out, x, wt, bias):
        if blocks:
            grid, threads = rows_shape(blocks, tl.threads)
            # the GEMM's A operand is the weight, its B operand the image
            launch(grid, threads, out, wt, x, m, n, k, groups, nt.get(), kt.get(), h, w,
                   gstride, plane, bias, *req)
    return Step(run, [launch])
