"""OpenCL lowering of the attention family: Attention (every mask kind, layout, GQA,
softcap, v_head_dim) and Rope.

Attention is one kernel (``_linalg_attn``): every layout is (batch, head, position)
strides over a contiguous head vector, so Q/K/V are read in place; GQA maps query head h
to K/V head ``h // (H / H_kv)``. A work-item takes CPU_ROWS query rows and blocks of 8
keys (4 in f64: one vector exp) on a CPU, so rows share each K/V read, and one row and one
key at a time on a GPU (private arrays there live in registers). Rope is one work-item
per output element: pass-through lanes are copied, rotated ones read their pair and table
entries.
Both compute in f64 when an operand is f64, else in f32.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.dtype import DType
from ...ops import _attention_geom as geo
from ...ops.attention import rope_tables
from . import _reduce_c as rc
from ._linalg_attn import MASK_CODES, attention_source
from ._linalg_cl import BUFFER, FLOATS, load, named, store, upload_longs
from ._linalg_plan import kernel
from .launch import bind_1d, scalar
from .lowering import Step, lowers
from .variant_table import use

CPU_ROWS = 8                 # query rows per work-item on a CPU ...
ROW_FLOATS = 4096            # ... while their private Q and output rows fit in 16 KiB


def _layout_strides(layout: str, seq: int, heads: int, width: int) -> list:
    """(batch, head, position) strides of ``[.., heads, seq, width]`` data in ``layout``."""
    if layout == "BHSD":
        return [heads * seq * width, seq * width, width]
    return [seq * heads * width, width, heads * width]     # BSHD, BSD and SD alike


def _work(*dts) -> str:
    return "double" if DType.F64 in dts else "float"


@lowers("Attention", FLOATS, reason="f16/bf16 are computed in f32 and rounded once")
def lower_attention(node, ins, ctx) -> Step:
    a = node.attrs
    g = geo.attention_geom(*(tuple(s.dims) for s in ins[:3]), a)
    dt = node.shape.dtype
    mk = a.mask_kind
    code = MASK_CODES[mk[0] if isinstance(mk, tuple) else mk]
    win = mk[1] if isinstance(mk, tuple) else 0
    mask_dt = ins[3].dtype if len(ins) > 3 else None
    if DType.F64 in (dt, mask_dt) and not ctx.device.fp64:
        raise ValueError(f"Attention %{node.id}: an f64 operand needs a device with fp64 "
                         f"({ctx.device.label} has none)")
    ct = _work(dt)
    wnp = np.float64 if ct == "double" else np.float32
    if a.score_scale is not None:
        scale = wnp(a.score_scale)
    else:
        scale = wnp(1) / np.sqrt(wnp(g.d))
    cap = wnp(a.attn_logit_softcap) if a.attn_logit_softcap is not None else wnp(0)
    rows, keys = 1, 1
    gpu = rc.gpu_style(ctx.device)
    use("attention.gpu" if gpu else "attention.cpu")
    if not gpu:
        rows = max(1, min(CPU_ROWS, g.s_q, ROW_FLOATS // (g.d + g.dv)))
        keys = 4 if ct == "double" else 8
    ref = kernel(ctx, attention_source(dt, code, mask_dt, a.attn_logit_softcap is not None,
                                       g.d, g.dv, rows, keys))
    geom = [g.batch, g.heads, g.kv_heads, g.s_q, g.s_k, win]
    geom += _layout_strides(g.layout, g.s_q, g.heads, g.d)
    geom += _layout_strides(g.layout, g.s_k, g.kv_heads, g.d)
    geom += _layout_strides(g.layout, g.s_k, g.kv_heads, g.dv)
    geom += _layout_strides(g.layout, g.s_q, g.heads, g.dv)
    table = upload_longs(ctx, geom)
    items = g.batch * g.heads * -(-g.s_q // rows)
    if math.prod(node.shape.dims) == 0:
        items = 0
    local = 64 if gpu else 1

    def bind(out, q, k, v, *mask):
        args = [out.buf, q.buf, k.buf, v.buf, (mask[0] if mask else table).buf, table.buf,
                scalar(scale, ct), scalar(cap, ct)]
        return bind_1d(ref, ctx.device, ctx.queue, items, args, local=local)
    return Step(bind)


_ROPE = """
__kernel void {name}(__global {ob}* out, __global const {xb}* x, __global const {cb}* cs,
                     __global const {sb}* sn, const long total, const int width,
                     const int hd, const int npair, const int seq, const int stride,
                     const int per_token)
{{
    const long o = get_global_id(0);
    if (o >= total) return;
    const long tok = o / width;
    const int e = (int)(o % width), lane = e % hd;
    const {ct} xv = {load_x};
    if (lane >= 2 * npair) {{ {store_x} return; }}
    const long row0 = o - lane;
    int i, i1, i2, first;
    if ({gptj}) {{ i = lane / 2; i1 = 2 * i; i2 = i1 + 1; first = lane % 2 == 0; }}
    else {{ first = lane < npair; i = first ? lane : lane - npair; i1 = i; i2 = i + npair; }}
    const long row = per_token ? tok : tok % seq;
    const {ct} c = {load_c}, s = {load_s};
    const {ct} x1 = {load_1}, x2 = {load_2};
    const {ct} y = first ? x1 * c - x2 * s : x2 * c + x1 * s;
    {store_y}
}}
"""


@lowers("Rope", FLOATS, reason="f16/bf16 are computed in f32 and rounded once")
def lower_rope(node, ins, ctx) -> Step:
    a = node.attrs
    x_dims, c_dims = tuple(ins[0].dims), tuple(ins[1].dims)
    half = a.n_rot // 2
    dt, cdt, sdt = node.shape.dtype, ins[1].dtype, ins[2].dtype
    ct = _work(dt, cdt, sdt)
    if ct == "double" and not ctx.device.fp64:
        raise ValueError(f"Rope %{node.id}: an f64 operand needs a device with fp64 "
                         f"({ctx.device.label} has none)")
    seq, width = x_dims[-2], x_dims[-1]
    stride, per_token = 1, False
    if half:
        _, _, stride, _, per_token = rope_tables(x_dims, c_dims, half)
    text = _ROPE.format(
        name="{name}", ob=BUFFER[dt], xb=BUFFER[dt], cb=BUFFER[cdt], sb=BUFFER[sdt], ct=ct,
        load_x=load("x", "o", dt, ct), store_x=store("out", "o", "xv", dt),
        gptj=int(a.style == "GptJ"), load_c=load("cs", "row * stride + i", cdt, ct),
        load_s=load("sn", "row * stride + i", sdt, ct), load_1=load("x", "row0 + i1", dt, ct),
        load_2=load("x", "row0 + i2", dt, ct), store_y=store("out", "o", "y", dt))
    name = named("rope", text)
    ref = ctx.kernel(text.replace("{name}", name), name)
    total = math.prod(x_dims)

    def bind(out, x, cos, sin):
        args = [out.buf, x.buf, cos.buf, sin.buf, scalar(total), scalar(width, "int"),
                scalar(a.head_dim, "int"), scalar(half, "int"), scalar(seq, "int"),
                scalar(stride, "int"), scalar(int(per_token), "int")]
        return bind_1d(ref, ctx.device, ctx.queue, total, args)
    return Step(bind)
