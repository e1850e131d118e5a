"""Reduce, Softmax and the running scans (Cumsum, CumProd, CumMax) as CUDA kernels.

Reduce gives each output row one block: the block's threads stride over the row's K
elements (a tail shorter than a block is simply fewer iterations), then fold their
partial results through a shared-memory tree. Few long rows (a full sum) are split into
``parts`` per row first, so the whole GPU works: pass one writes partial accumulators,
pass two folds them. Floats accumulate in f64, integers in i64 (wrapping when stored).
Softmax is one block per row (max, sum of exponentials, write). The scans run one
thread per row, sequentially along K.
"""
from __future__ import annotations

import hashlib
import math

import numpy as np

from ...ir.dtype import DType, int_range
from ..codegen.literal import py_literal
from .device import block_threads, device_dtype, launch_shape, rows_shape
from .geometry import acc_np, read_expr, reduce_layout, split3, store_expr
from .kernels import Launch, array_type, compile_kernel, int_type
from .lower_movement import permute_step
from .lowering import FLOATS, INTS, SIXTEEN, SIXTEEN_NOTE, Step, lowers

NUMERIC = FLOATS + SIXTEEN + INTS
FLOAT_KINDS = FLOATS + SIXTEEN

_REDUCE = '''
def {name}(out, x, k_len, inner, parts, count):
    sm = cuda.shared.array({T}, {acc})
    t = cuda.threadIdx.x
    chunk = (k_len + parts - 1) // parts
    vr = cuda.blockIdx.x
    while vr < out.size:
        r = vr // parts
        p = vr - r * parts
        o = r // inner
        base = o * k_len * inner + (r - o * inner)
        lo = p * chunk
        hi = min(lo + chunk, k_len)
        a = {init}
        k = lo + t
        while k < hi:
            v = {read}
            a = {combine}
            k += {T}
        sm[t] = a
        cuda.syncthreads()
        s = {T} // 2
        while s > 0:
            if t < s:
                a = sm[t]
                v = sm[t + s]
                sm[t] = {combine}
            cuda.syncthreads()
            s //= 2
        if t == 0:
            a = sm[0]
            out[vr] = {store}
        cuda.syncthreads()
        vr += cuda.gridDim.x
'''


def _combine(op: str, is_float: bool) -> str:
    if op in ("Sum", "Mean"):
        return "a + v"
    if op == "Prod":
        return "a * v"
    fn = {"Max": "_fmax", "Min": "_fmin"}[op] if is_float else op.lower()
    return f"{fn}(a, v)"


def _init(op: str, dt: DType) -> str:
    """The accumulator's starting value over ``dt``: the op's identity, as a literal."""
    acc = DType.F64 if acc_np(dt) == "np.float64" else DType.I64
    value = {"Sum": 0, "Mean": 0, "Prod": 1}.get(op)
    if value is None and dt.is_float:
        value = -math.inf if op == "Max" else math.inf
    elif value is None:
        value = int_range(dt)[0 if op == "Max" else 1]
    return py_literal(value, acc)


def _render(template: str, prefix: str, **fields) -> tuple[str, str]:
    body = template.format(name="{name}", **fields)
    name = f"{prefix}_{hashlib.sha256(body.encode()).hexdigest()[:12]}"
    from .prelude import PRELUDE

    return name, PRELUDE + body.replace("{name}", name)


def reduce_launch(op: str, src: DType, dst: DType, final: bool, from_acc: bool):
    """A Reduce pass: reads ``src`` elements (or accumulators), writes ``dst`` (or
    unfinished accumulators when not ``final``)."""
    acc = acc_np(src)
    is_float = acc == "np.float64"
    read = "x[base + k * inner]" if from_acc else read_expr(src, "x[base + k * inner]")
    finish = "_div(a, np.float64(count))" if op == "Mean" else "a"
    store = store_expr(dst, finish) if final else "a"
    name, source = _render(_REDUCE, "reduce", T=block_threads(), acc=acc,
                           init=_init(op, DType.F32 if src in SIXTEEN else src),
                           read=read, combine=_combine(op, is_float), store=store)
    out_t = array_type(device_dtype(dst) if final else np.dtype(acc[3:]))
    in_t = array_type(np.dtype(acc[3:]) if from_acc else device_dtype(src))
    i64 = int_type()
    return Launch(compile_kernel(name, source), (out_t, in_t, i64, i64, i64, i64))


@lowers("Reduce", NUMERIC, reason=SIXTEEN_NOTE)
def lower_reduce(node, ins, ctx) -> Step:
    a = node.attrs
    src, dst = ins[0].dtype, node.shape.dtype
    perm, (outer, k, inner) = reduce_layout(ins[0].dims, set(a.axes))
    pre = permute_step(ins[0], perm) if perm is not None else None
    rows = outer * inner
    threads = block_threads()
    parts = max(1, min(-(-k // (threads * 8)), max(1, 1024 // max(rows, 1)))) if rows < 256 \
        else 1
    count = k
    if parts == 1:
        one = reduce_launch(a.op, src, dst, True, False)
        launches = [one]
    else:
        first = reduce_launch(a.op, src, dst, False, False)
        second = reduce_launch(a.op, src, dst, True, True)
        launches = [first, second]
    scratch = {}

    def run(out, x):
        if not rows:
            return
        if pre is not None:
            x = pre(x)
        if parts == 1:
            blocks, t = rows_shape(rows, threads)
            one(blocks, t, out, x, k, inner, 1, count)
            return
        if "acc" not in scratch:
            from .device import import_cuda

            scratch["acc"] = import_cuda().device_array(rows * parts, np.dtype(acc_np(src)[3:]))
        part = scratch["acc"]
        blocks, t = rows_shape(rows * parts, threads)
        first(blocks, t, part, x, k, inner, parts, count)
        blocks, t = rows_shape(rows, threads)
        second(blocks, t, out, part, parts, 1, 1, count)
    if pre is not None:
        launches = launches + pre.launches
    return Step(run, launches)


_SOFTMAX = '''
def {name}(out, x, k_len, inner):
    sm = cuda.shared.array({T}, np.float64)
    t = cuda.threadIdx.x
    rows = out.size // k_len
    r = cuda.blockIdx.x
    while r < rows:
        o = r // inner
        base = o * k_len * inner + (r - o * inner)
        m = -math.inf
        k = t
        while k < k_len:
            v = {read}
            m = v if (v > m or v != v) else m           # the max, NaN propagating
            k += {T}
        sm[t] = m
        cuda.syncthreads()
        s = {T} // 2
        while s > 0:
            if t < s:
                a = sm[t]
                b = sm[t + s]
                sm[t] = b if (b > a or b != b) else a
            cuda.syncthreads()
            s //= 2
        m = sm[0]
        cuda.syncthreads()
        total = np.float64(0.0)
        k = t
        while k < k_len:
            total += math.exp({read} - m)
            k += {T}
        total = _block_sum(sm, total)
        k = t
        while k < k_len:
            out[base + k * inner] = {store}
            k += {T}
        cuda.syncthreads()
        r += cuda.gridDim.x
'''


@lowers("Softmax", FLOAT_KINDS, reason=SIXTEEN_NOTE)
def lower_softmax(node, ins, ctx) -> Step:
    dt = node.shape.dtype
    ax = node.attrs.axis % ins[0].rank
    outer, k, inner = split3(ins[0].dims, ax, ax + 1)
    read = read_expr(dt, "x[base + k * inner]")
    name, source = _render(_SOFTMAX, "softmax", T=block_threads(), read=read,
                           store=store_expr(dt, f"math.exp({read} - m) / total"))
    arr = array_type(device_dtype(dt))
    launch = Launch(compile_kernel(name, source), (arr, arr, int_type(), int_type()))
    rows = outer * inner

    def run(out, x):
        if rows and k:
            blocks, t = rows_shape(rows, block_threads())
            launch(blocks, t, out, x, k, inner)
    return Step(run, [launch])


_SCAN = '''
def {name}(out, x, k_len, inner, exclusive):
    lines = out.size // k_len
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < lines:
        o = i // inner
        base = o * k_len * inner + (i - o * inner)
        a = {init}
        for k in range(k_len):
            v = {read}
            if exclusive:
                out[base + k * inner] = {store}
                a = {combine}
            else:
                a = {combine}
                out[base + k * inner] = {store}
        i += stride
'''
_SCAN_COMBINE = {"Cumsum": "a + v", "CumProd": "a * v"}


@lowers("Cumsum", NUMERIC, reason=SIXTEEN_NOTE)
@lowers("CumProd", NUMERIC, reason=SIXTEEN_NOTE)
@lowers("CumMax", NUMERIC, reason=SIXTEEN_NOTE)
def lower_scan(node, ins, ctx) -> Step:
    dt = node.shape.dtype
    ax = node.attrs.axis % ins[0].rank
    outer, k, inner = split3(ins[0].dims, ax, ax + 1)
    acc = acc_np(dt)
    is_float = acc == "np.float64"
    if node.kind == "CumMax":           # NaN never wins (f32::max), ints start at their min
        combine = "_fmax(a, -math.inf if v != v else v)" if is_float else "max(a, v)"
        init = _init("Max", dt)
    else:
        combine = _SCAN_COMBINE[node.kind]
        init = _init("Sum" if node.kind == "Cumsum" else "Prod", dt)
    name, source = _render(_SCAN, "scan", acc=acc, init=init, combine=combine,
                           read=read_expr(dt, "x[base + k * inner]"), store=store_expr(dt, "a"))
    arr = array_type(device_dtype(dt))
    i64 = int_type()
    from numba import types

    launch = Launch(compile_kernel(name, source), (arr, arr, i64, i64, types.boolean))
    lines = outer * inner
    exclusive = bool(node.attrs.exclusive)

    def run(out, x):
        if lines and k:
            blocks, t = launch_shape(lines)
            launch(blocks, t, out, x, k, inner, exclusive)
    return Step(run, [launch])
