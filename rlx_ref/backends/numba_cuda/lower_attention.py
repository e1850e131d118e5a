"""Attention (every mask kind, layout, GQA, softcap, v_head_dim) and Rope as CUDA kernels.

Attention is one fused kernel per node (``_attention_src``): query tiles in shared
memory, key/value tiles streamed through it, an online softmax, each output written
once. Q, K, V and the output are read in their own layout through (batch, head,
position) strides, so no layout copy is made. Products run in f64, or in f32 for
f32/f16/bf16 when S_k and S_k·D are large enough that the contract's budget (∝ S_k·D)
dwarfs the f32 rounding of a D-term dot (the CPU backend's rule). Head widths are
rounded up to a power of two for the shared tiles (one kernel serves every width up to
it; the true widths, the mask kind and the softcap are run-time arguments), and the tile
sizes are chosen so the four shared tiles fit 48 KiB. Rope is one thread per output
element: it reads its lane and its pair partner and rotates in f64.
"""
from __future__ import annotations

import math
import textwrap

import numpy as np

from ...ops import _attention_geom as geo
from ...ops.attention import rope_tables
from . import _attention_src as S
from .device import (
    DeviceConst,
    device_dtype,
    launch_shape,
    rows_shape,
    simulator_active,
)
from .geometry import read_expr, store_expr
from .kernels import Launch, array_type, compile_kernel, int_type
from .lower_reduce import FLOAT_KINDS, _render
from .lowering import Step, lowers

F32_MIN_KEYS = 64                 # f32 products need S_k >= this ...
F32_MIN_TERMS = 4096              # ... and S_k·D >= this
SHARED_BYTES = 48 * 1024          # static shared memory per block
MASKS = {"None": 0, "Causal": 1, "SlidingWindow": 2, "Custom": 3, "Bias": 4}


def _tiles(d: int, dv: int, itemsize: int) -> tuple[int, int, int]:
    """(BQ, BKV, TPR): the largest query and key tiles whose shared arrays fit (the Q and
    K tiles hold d + 1 columns: the pad spreads a column's rows over the banks)."""
    if simulator_active():
        return 4, 4, 2
    for bq, bkv in ((32, 32), (32, 16), (16, 16), (16, 8), (8, 8), (4, 4), (2, 4), (1, 4)):
        elems = bq * (d + 1) + bkv * (d + 1) + bkv * dv + bq * (bkv + 1)
        if elems * itemsize <= SHARED_BYTES - 64:
            return bq, bkv, 4
    raise ValueError(f"head_dim {d} and v_head_dim {dv} are too wide for one key and one "
                     f"query row in {SHARED_BYTES // 1024} KiB of shared memory")


def _strides(layout: str, batch_seq: int, heads: int, width: int) -> np.ndarray:
    """(batch, head, position) element strides of a Q/K/V/output array."""
    if layout == "BHSD":
        return np.array([heads * batch_seq * width, batch_seq * width, width], np.int64)
    return np.array([batch_seq * heads * width, width, heads * width], np.int64)


def _bucket(width: int) -> int:
    """A power of two >= ``width`` (at least 8): one kernel serves every width up to it."""
    return max(8, 1 << (max(width, 1) - 1).bit_length())


def _load(rows: int, width: int, threads: int, limit: str, row_ok: str, read: str,
          dest: str, acc: str) -> str:
    chunk = min(threads, width)
    return S.LOAD.format(ROWS=rows, WIDTH=width, CHUNK=chunk, PER=threads // chunk,
                         limit=limit, row_ok=row_ok, read=read, dest=dest, acc=acc)


@lowers("Attention", FLOAT_KINDS,
        reason="f16/bf16 stay 16-bit on the device; scores and sums run in f32 or f64")
def lower_attention(node, ins, ctx) -> Step:
    a = node.attrs
    g = geo.attention_geom(*(tuple(int(d) for d in s.dims) for s in ins[:3]), a)
    dt, in_dt = node.shape.dtype, ins[0].dtype
    wide = dt.name == "F64" or g.s_k < F32_MIN_KEYS or g.s_k * g.d < F32_MIN_TERMS
    acc = "np.float64" if wide else "np.float32"
    work = np.float64 if in_dt.name == "F64" else np.float32
    mk = a.mask_kind
    code = MASKS[mk[0] if isinstance(mk, tuple) else mk]
    win = mk[1] if isinstance(mk, tuple) else 0
    dmax, dvmax = _bucket(g.d), _bucket(g.dv)
    bq, bkv, tpr = _tiles(dmax, dvmax, 8 if wide else 4)
    nt = bq * tpr
    mask_dt = ins[3].dtype if len(ins) > 3 else in_dt
    score = S.SCORE.format(
        acc=acc, wcast="np.float32" if work is np.float32 else "np.float64",
        read_bias=read_expr(mask_dt, "mask[((b * nh + h) * sq + qi) * sk + kj]"),
        read_keep=read_expr(mask_dt, "mask[b * sk + kj]"))
    load_k = _load(bkv, dmax, nt, "d", "k0 + jj < sk", read_expr(
        ins[1].dtype, "k[kbase + (k0 + jj) * k_st[2] + dd]"), "sk_t", acc)
    load_v = _load(bkv, dvmax, nt, "dv", "k0 + jj < sk", read_expr(
        ins[2].dtype, "v[vbase + (k0 + jj) * v_st[2] + dd]"), "sv_t", acc)
    fields = {"acc": acc, "BQ": bq, "BKV": bkv, "TPR": tpr, "NT": nt, "DP": dmax + 1,
              "DV": dvmax, "BKVP": bkv + 1, "DVP": -(-dvmax // tpr), "KPT": bkv // tpr,
              "score": textwrap.indent(score.strip(), " " * 8),
              "load_k": load_k.strip(), "load_v": load_v.strip(),
              "store": store_expr(dt, "_div(o[c], total)")}
    fields["tile"] = textwrap.indent(S.TILE.format(**fields).strip(), " " * 16)
    fields["load_q"] = textwrap.indent(_load(bq, dmax, nt, "d", "q0 + jj < sq", read_expr(
        in_dt, "q[qbase + (q0 + jj) * q_st[2] + dd]"), "sq_t", acc).strip(), " " * 8)
    name, source = _render(S.ATTENTION, "attention", **fields)
    from numba import types

    i64, idx, real = int_type(), array_type(np.int64), getattr(types, acc[3:])
    arrs = tuple(array_type(device_dtype(s.dtype)) for s in [node.shape] + list(ins[:3]))
    launch = Launch(compile_kernel(name, source),
                    arrs + (array_type(device_dtype(mask_dt)), array_type(np.int32))
                    + (i64,) * 5 + (idx,) * 4 + (i64,) * 4 + (real, real))
    strides = [DeviceConst(_strides(g.layout, s, h, w)) for s, h, w in (
        (g.s_q, g.heads, g.d), (g.s_k, g.kv_heads, g.d), (g.s_k, g.kv_heads, g.dv),
        (g.s_q, g.heads, g.dv))]
    scale = float(work(a.score_scale) if a.score_scale is not None
                  else work(1) / np.sqrt(work(g.d)))
    cap = float(work(a.attn_logit_softcap)) if a.attn_logit_softcap is not None else 0.0
    items = g.batch * g.heads * -(-g.s_q // bq)
    check = _nonfinite(ins[2].dtype) if code in (1, 2) else None
    launches = [launch] + ([check] if check else [])
    dummy = DeviceConst(np.zeros(1, device_dtype(mask_dt)))
    flag = DeviceConst(np.zeros(1, np.int32))
    zero = np.zeros(1, np.int32)

    def run(out, q, k, v, *mask):
        if not items or g.s_k == 0:
            return
        f = flag.get()
        if check is not None:
            f.copy_to_device(zero)
            blocks, threads = launch_shape(v.size)
            check(blocks, threads, v, f)
        blocks, threads = rows_shape(items, bq * tpr)
        launch(blocks, threads, out, q, k, v, mask[0] if mask else dummy.get(), f,
               g.batch, g.heads, g.kv_heads, g.s_q, g.s_k, *(st.get() for st in strides),
               g.d, g.dv, code, win, scale, cap)
    return Step(run, launches)


def _nonfinite(dt) -> Launch:
    """A kernel setting ``flag[0]`` when ``x`` holds inf or NaN."""
    name, source = _render(S.NONFINITE, "nonfinite", read=read_expr(dt, "x[i]"))
    return Launch(compile_kernel(name, source),
                  (array_type(device_dtype(dt)), array_type(np.int32)))


_ROPE = '''
def {name}(out, x, cos, sin, seq, width, hd, half, nrot, stride, per_token, gptj):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < out.size:
        row = i // width
        e = i - row * width
        lane = e % hd
        y = {read_x}
        if lane < nrot:
            first = (lane % 2 == 0) if gptj else lane < half
            if gptj:
                p = lane // 2
                mate = i + 1 if first else i - 1
            else:
                p = lane if first else lane - half
                mate = i + half if first else i - half
            t = (row if per_token else row % seq) * stride + p
            c = {read_cos}
            s = {read_sin}
            w = {read_mate}
            y = y * c - w * s if first else y * c + w * s
        out[i] = {store}
        i += step
'''


@lowers("Rope", FLOAT_KINDS, reason="f16/bf16 stay 16-bit on the device; pairs rotate in f64")
def lower_rope(node, ins, ctx) -> Step:
    a = node.attrs
    x_dims, c_dims = tuple(int(d) for d in ins[0].dims), tuple(int(d) for d in ins[1].dims)
    half = a.n_rot // 2
    seq, width = x_dims[-2], x_dims[-1]
    stride, per_token = 1, False
    if half and math.prod(x_dims):
        _, _, stride, _, per_token = rope_tables(x_dims, c_dims, half)
    name, source = _render(
        _ROPE, "rope", read_x=read_expr(ins[0].dtype, "x[i]"),
        read_mate=read_expr(ins[0].dtype, "x[mate]"), read_cos=read_expr(ins[1].dtype, "cos[t]"),
        read_sin=read_expr(ins[2].dtype, "sin[t]"), store=store_expr(node.shape.dtype, "y"))
    from numba import types

    i64 = int_type()
    launch = Launch(compile_kernel(name, source),
                    tuple(array_type(device_dtype(s.dtype)) for s in [node.shape] + list(ins))
                    + (i64,) * 6 + (types.boolean, types.boolean))
    n = node.shape.numel
    gptj = a.style == "GptJ"

    def run(out, x, cos, sin):
        if n:
            blocks, threads = launch_shape(n)
            launch(blocks, threads, out, x, cos, sin, seq, width, a.head_dim, half,
                   a.n_rot, stride, per_token, gptj)
    return Step(run, [launch])
