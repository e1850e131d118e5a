"""Numba lowering of the integer quant ops (Quantize, Dequantize, QMatMul, QConv2d) and the
f32 MoE and LoRA products (GroupedMatMul, LoraMatMul); kernels in ``_quant_int_src``.

The integer ops are bit-exact with the oracle (see that module). GroupedMatMul checks the
expert ids on the host with the oracle's own check (a NaN, negative or too-large id is a
run-time error naming the token) before its kernel runs, so the kernel reads only experts
that exist.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.dtype import DType
from ...ops.conv import _window
from ...ops.quant_matmul import expert_ids
from ._quant_int_src import SOURCES
from .kernels import compile_kernel
from .lower_linalg import numba_threads
from .lowering import Step, lowers
from .variant_table import use

I8, F32 = (DType.I8,), (DType.F32,)
EXACT = "bit-exact with the oracle (exact integer sums, one f32 rounding per step)"
PAR_ELEMENTS = 1 << 15      # elements from which Quantize / Dequantize split over threads


def _kernel(name: str):
    return compile_kernel(name, SOURCES[name])


# ── Quantize / Dequantize ───────────────────────────────────────────────────

def _channels(node, ins) -> tuple:
    """(inner, channels) of the per-channel index ``c = (i // inner) % channels``."""
    a, dims = node.attrs, tuple(ins[0].dims)
    if a.axis is None:
        return 1, 1
    return math.prod(dims[a.axis + 1:]), dims[a.axis]


def _affine_step(node, ins, name: str, per_channel) -> Step:
    use("quant.affine")
    a = node.attrs
    inner, nc = _channels(node, ins)
    kern = _kernel(name)
    vec = np.ascontiguousarray(per_channel(a), np.float32)
    zp = np.asarray(a.zero_points, np.int64)
    total = ins[0].numel
    par = max(1, min(numba_threads(), total // PAR_ELEMENTS))

    def run(out, x):
        kern.fn(out.reshape(-1), x.reshape(-1), vec, zp, inner, nc, par)
    return Step(run, [kern])


def _reciprocals(a) -> np.ndarray:
    """``1 / scale`` rounded to f32 on the host, as the oracle (and RLX's CPU) forms it."""
    with np.errstate(all="ignore"):
        return np.float32(1) / np.asarray(a.scales, np.float32)


@lowers("Quantize", I8, reason=EXACT)
def lower_quantize(node, ins, ctx) -> Step:
    return _affine_step(node, ins, "qi_quantize", _reciprocals)


@lowers("Dequantize", F32, reason=EXACT)
def lower_dequantize(node, ins, ctx) -> Step:
    return _affine_step(node, ins, "qi_dequantize", lambda a: a.scales)


# ── QMatMul / QConv2d ───────────────────────────────────────────────────────

def _requant_args(a) -> tuple:
    return np.int64(a.x_zp), np.int64(a.w_zp), np.float32(a.mult), np.int64(a.out_zp)


@lowers("QMatMul", I8, reason=EXACT)
def lower_qmatmul(node, ins, ctx) -> Step:
    use("qmatmul")
    kern = _kernel("qi_qmatmul")
    extra = _requant_args(node.attrs)

    def run(out, x, w, bias):
        if out.size:
            kern.fn(out, x, w, bias, *extra)
    return Step(run, [kern])


@lowers("QConv2d", I8, reason=EXACT)
def lower_qconv2d(node, ins, ctx) -> Step:
    use("qconv2d")
    a = node.attrs
    g = _window(a, 2)
    geo = np.array([*g["stride"], *g["padding"], *g["dilation"], a.groups], np.int64)
    kern = _kernel("qi_qconv2d")
    extra = _requant_args(a)

    def run(out, x, w, bias):
        if out.size:
            kern.fn(out, x, w, bias, geo, *extra)
    return Step(run, [kern])


# ── GroupedMatMul / LoraMatMul (f32) ────────────────────────────────────────

@lowers("GroupedMatMul", F32)
def lower_grouped_matmul(node, ins, ctx) -> Step:
    use("grouped_matmul")
    experts = ins[1].dims[0]
    kern = _kernel("qi_grouped_mm")

    def run(out, x, w, idx):
        # checked before the kernel: it then reads only experts that exist
        ids = expert_ids(idx, experts, "GroupedMatMul")
        if out.size:
            kern.fn(out, x, w, ids)
    return Step(run, [kern])


@lowers("LoraMatMul", F32)
def lower_lora(node, ins, ctx) -> Step:
    use("lora")
    x, (k, n) = tuple(ins[0].dims), tuple(ins[1].dims)
    m = math.prod(x[:-1])
    kern = _kernel("qi_lora")
    scale = np.float32(node.attrs.scale)

    def run(out, xs, w, la, lb):
        if m * n:
            kern.fn(out.reshape(m, n), xs.reshape(m, k), w, la, lb, scale)
    return Step(run, [kern])
