"""OpenCL lowering of the integer quant ops (Quantize, Dequantize, QMatMul, QConv2d) and the
f32 MoE and LoRA products (GroupedMatMul, LoraMatMul); kernels in ``_quant_int_src``.

The integer ops are bit-exact with the oracle (see that module). GroupedMatMul reads the
expert ids back before its launch and checks them on the host as the oracle does (a NaN,
negative or too-large id is a run-time error naming the token), so the kernel reads
only ids in range.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.dtype import DType
from ...ops.conv import _window
from ...ops.quant_matmul import expert_ids
from . import _reduce_c as rc
from . import memory
from ._quant_int_src import source
from .launch import bind_1d, bind_nd, round_up, scalar
from .lowering import Step, lowers
from .variant_table import use

I8, F32 = (DType.I8,), (DType.F32,)
EXACT = "bit-exact with the oracle (exact integer sums, one f32 rounding per step)"


def _upload(ctx, values, dtype) -> memory.DevArray:
    return memory.upload(ctx.program.context, ctx.queue, np.asarray(values, dtype))


def _kernel(ctx, which: str):
    name, src = source(which)
    return ctx.kernel(src, name)


def _idle():
    return None


def _grid(ctx, n: int, rows: int) -> tuple:
    """(global, local) of a kernel with an output column per item along axis 0."""
    l0 = rc.item_local(ctx.device, n)
    return (round_up(n, l0), rows), (l0, 1)


# ── Quantize / Dequantize ───────────────────────────────────────────────────

def _channels(node, ins) -> tuple:
    """(inner, channels) of the per-channel index ``c = (i // inner) % channels``."""
    a, dims = node.attrs, tuple(ins[0].dims)
    if a.axis is None:
        return 1, 1
    return math.prod(dims[a.axis + 1:]), dims[a.axis]


def _affine_step(node, ins, ctx, which: str, per_channel) -> Step:
    use("quant.affine")
    a = node.attrs
    inner, nc = _channels(node, ins)
    ref = _kernel(ctx, which)
    vec = _upload(ctx, per_channel(a), np.float32)
    zp = _upload(ctx, a.zero_points, np.int64)
    total = ins[0].numel

    def bind(out, x):
        args = [out.buf, x.buf, vec.buf, zp.buf, scalar(total), scalar(inner), scalar(nc)]
        return bind_1d(ref, ctx.device, ctx.queue, total, args)
    return Step(bind)           # the Step's closure keeps vec and zp alive with the plan


def _reciprocals(a) -> np.ndarray:
    """``1 / scale`` rounded to f32 on the host, as the oracle (and RLX's CPU) forms it."""
    with np.errstate(all="ignore"):
        return np.float32(1) / np.asarray(a.scales, np.float32)


@lowers("Quantize", I8, reason=EXACT)
def lower_quantize(node, ins, ctx) -> Step:
    return _affine_step(node, ins, ctx, "quantize", _reciprocals)


@lowers("Dequantize", F32, reason=EXACT)
def lower_dequantize(node, ins, ctx) -> Step:
    return _affine_step(node, ins, ctx, "dequantize", lambda a: a.scales)


# ── QMatMul / QConv2d ───────────────────────────────────────────────────────

def _requant_args(a) -> list:
    return [scalar(a.x_zp), scalar(a.w_zp), scalar(np.float32(a.mult), "float"),
            scalar(a.out_zp)]


@lowers("QMatMul", I8, reason=EXACT)
def lower_qmatmul(node, ins, ctx) -> Step:
    use("qmatmul")
    (m, k), n = tuple(ins[0].dims), node.shape.dims[1]
    ref = _kernel(ctx, "qmatmul")
    gsz, lsz = _grid(ctx, n, m)

    def bind(out, x, w, bias):
        if m * n == 0:
            return _idle
        args = [out.buf, x.buf, w.buf, bias.buf, scalar(m, "int"), scalar(n, "int"),
                scalar(k, "int")] + _requant_args(node.attrs)
        return bind_nd(ref, ctx.queue, gsz, lsz, args)
    return Step(bind)


@lowers("QConv2d", I8, reason=EXACT)
def lower_qconv2d(node, ins, ctx) -> Step:
    use("qconv2d")
    a = node.attrs
    g = _window(a, 2)
    x, w = tuple(ins[0].dims), tuple(ins[1].dims)
    out_dims = tuple(node.shape.dims)
    geo = _upload(ctx, [x[1], x[2], x[3], w[0], out_dims[2], out_dims[3], *g["kernel"],
                        *g["stride"], *g["padding"], *g["dilation"], a.groups], np.int32)
    ref = _kernel(ctx, "qconv2d")
    total = math.prod(out_dims)

    def bind(out, xs, ws, bias):
        args = [out.buf, xs.buf, ws.buf, bias.buf, geo.buf, scalar(total)] + _requant_args(a)
        return bind_1d(ref, ctx.device, ctx.queue, total, args)
    return Step(bind)


# ── GroupedMatMul / LoraMatMul (f32) ────────────────────────────────────────

@lowers("GroupedMatMul", F32)
def lower_grouped_matmul(node, ins, ctx) -> Step:
    use("grouped_matmul")
    (m, k), (e, _, n) = tuple(ins[0].dims), tuple(ins[1].dims)
    ref = _kernel(ctx, "grouped_mm")
    gsz, lsz = _grid(ctx, n, m)
    q = ctx.queue

    def bind(out, x, w, idx):
        if m * n == 0:
            return _idle
        ids_dev = memory.empty(ctx.program.context, (m,), np.int32)
        go = bind_nd(ref, q, gsz, lsz, [out.buf, x.buf, w.buf, ids_dev.buf,
                                        scalar(m, "int"), scalar(n, "int"), scalar(k, "int")])

        def launch():
            # checked before the launch: the kernel then reads only experts that exist
            ids = expert_ids(idx.get(q), e, "GroupedMatMul").astype(np.int32)
            ids_dev.set(q, ids, blocking=True)
            go()
        return launch
    return Step(bind)


@lowers("LoraMatMul", F32)
def lower_lora(node, ins, ctx) -> Step:
    use("lora")
    x, (k, n), r = tuple(ins[0].dims), tuple(ins[1].dims), ins[2].dims[1]
    m = math.prod(x[:-1])
    down, up = _kernel(ctx, "lora_down"), _kernel(ctx, "lora_up")
    scale = scalar(np.float32(node.attrs.scale), "float")
    g_down, l_down = _grid(ctx, r, m)
    g_up, l_up = _grid(ctx, n, m)

    def bind(out, xs, w, la, lb):
        if m * n == 0:
            return _idle
        t = memory.empty(ctx.program.context, (m * r,), np.float32)
        first = bind_nd(down, ctx.queue, g_down, l_down,
                        [t.buf, xs.buf, la.buf, scalar(m, "int"), scalar(r, "int"),
                         scalar(k, "int"), scale])
        second = bind_nd(up, ctx.queue, g_up, l_up,
                         [out.buf, xs.buf, w.buf, t.buf, lb.buf, scalar(m, "int"),
                          scalar(n, "int"), scalar(k, "int"), scalar(r, "int")])

        def launch():
            first()
            second()
        launch.held = t             # kernel arguments keep no buffer alive
        return launch
    return Step(bind)

