"""Lowering of the reduction family: Reduce, Softmax, Cumsum, CumProd, CumMax, ArgMax,
ArgMin and TopK.

Each node reads its input as a C-contiguous [outer, K, inner] block (``_reduce_geom``) and
runs one of a few kernels Numba specializes per dtype: ``*_rows`` when the reduced extent
is contiguous (inner == 1), ``*_cols`` tiles of columns otherwise, each with a prange twin
used from ``numba-cpu:par_elements`` elements. Reduce over non-adjacent axes is the one place that
copies: the input is transposed once to (kept axes, reduced axes) and reduced as rows.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.dtype import DType
from . import _reduce_fold, _reduce_scan, _reduce_select, _reduce_softmax
from ._reduce_geom import (
    SHADOW_NOTE,
    SIXTEEN,
    finish,
    is_parallel,
    kernel_out,
    pick,
    reduce_layout,
    row_tasks,
    shadow,
    split3,
    threads,
    tile_columns,
)
from .kernels import compile_kernel
from .lowering import JitCall, Step, accumulates, lowers
from .variant_table import th, use

INTS = (DType.I8, DType.I16, DType.I32, DType.I64, DType.U8, DType.U32)
FLOATS16 = (DType.F32, DType.F64) + SIXTEEN
NUMERIC = FLOATS16 + INTS
NARROW = (DType.F32,) + SIXTEEN       # floats for which an f64 accumulator is a promise
# The accumulator type of Sum/Mean/Prod and the scans, by input class: the promises below
# rest on the float one (a test moves it to f32 to check that conformance notices).
ACC = {"float": np.float64, "int": np.int64}


def _identity(op: str, dt: DType):
    """The accumulator's start value, which also sets its type: f64 (floats) or i64
    (integers) for Sum/Mean/Prod; the kernel's input dtype for Max/Min (exact anyway)."""
    if op in ("Max", "Min"):
        kt = np.dtype(np.float32) if dt in SIXTEEN else dt.np
        if dt.is_float:
            return kt.type(-np.inf if op == "Max" else np.inf)
        info = np.iinfo(kt)
        return kt.type(info.min if op == "Max" else info.max)
    return ACC["float" if dt.is_float else "int"](0 if op in ("Sum", "Mean") else 1)


def _kernel(mod, *args):
    name, src = mod.source(*args)
    return compile_kernel(name, src)


# ── Reduce ────────────────────────────────────────────────────────────────

@accumulates("Reduce", NARROW, "f64", ops=("Sum", "Mean"),
             reason="float sums run in f64 lanes, rounded once")
@lowers("Reduce", NUMERIC, reason=SHADOW_NOTE)
def lower_reduce(node, ins, ctx) -> Step:
    a = node.attrs
    perm, (outer, k, inner) = reduce_layout(ins[0].dims, set(a.axes))
    kernel = _kernel(_reduce_fold, a.op, ins[0].dtype.is_float)
    init = _identity(a.op, ins[0].dtype)
    total = outer * k * inner
    par = is_parallel(total)
    if inner > 1:
        ib = tile_columns(outer, inner, par)
        fn = pick(kernel, f"{kernel.name}_cols", par, "reduce.cols")
        extra = (k, inner, init, ib)
    elif par and outer < 2 * threads() and k >= 4 * th("reduce.chunk"):
        # a few long rows: split them
        use("reduce.chunks_par")
        fn, extra = kernel.get(f"{kernel.name}_chunks_par"), (k, init, th("reduce.chunk"))
    else:
        fn = pick(kernel, f"{kernel.name}_rows", par, "reduce.rows")
        extra = (k, init, row_tasks(outer, par))

    def run(out, x):
        if perm is not None:
            x = np.ascontiguousarray(x.transpose(perm))   # the one copy: non-adjacent axes
        buf, rounded = kernel_out(out)
        if buf.size:
            fn(buf, shadow(x), *extra)
        finish(out, buf, rounded)
    note = f"one transposing copy to axes {perm}" if perm is not None else ""
    return Step(run, [kernel], note=note,
                jit=_flat_call(fn, extra, node, ins) if perm is None else None)


def _flat_call(fn, extra: tuple, node, ins) -> JitCall | None:
    """The ``JitCall`` of a kernel that takes (flat output, flat input, *extra): none when
    the host has more to do (16-bit shadows) or nothing to do (an empty output)."""
    if node.shape.dtype in SIXTEEN or ins[0].dtype in SIXTEEN or \
            not math.prod(node.shape.dims):
        return None
    return JitCall(fn, ("{out}.reshape(-1)", "{0}.reshape(-1)"), extra)


# ── Softmax ───────────────────────────────────────────────────────────────

@lowers("Softmax", FLOATS16, reason=SHADOW_NOTE)
def lower_softmax(node, ins, ctx) -> Step:
    dims = ins[0].dims
    ax = node.attrs.axis % len(dims)
    outer, k, inner = split3(dims, ax, ax + 1)
    kernel = _kernel(_reduce_softmax, "f64" if ins[0].dtype is DType.F64 else "f32")
    par = is_parallel(outer * k * inner)
    if inner > 1:
        fn = pick(kernel, f"{kernel.name}_cols", par, "softmax.cols")
        extra = (k, inner, tile_columns(outer, inner, par))
    else:
        fn = pick(kernel, f"{kernel.name}_rows", par, "softmax.rows")
        extra = (k, row_tasks(outer, par))

    def run(out, x):
        buf, rounded = kernel_out(out)
        if buf.size:
            fn(buf, shadow(x), *extra)
        finish(out, buf, rounded)
    return Step(run, [kernel], jit=_flat_call(fn, extra, node, ins))


# ── Cumsum, CumProd, CumMax ───────────────────────────────────────────────

def lower_scan(node, ins, ctx) -> Step:
    dims, dt = ins[0].dims, ins[0].dtype
    ax = node.attrs.axis % len(dims)
    outer, k, inner = split3(dims, ax, ax + 1)
    kernel = _kernel(_reduce_scan, node.kind)
    init = _identity({"Cumsum": "Sum", "CumProd": "Prod", "CumMax": "Max"}[node.kind], dt)
    excl = bool(node.attrs.exclusive)
    par = is_parallel(outer * k * inner)
    if inner > 1:
        fn = pick(kernel, f"{kernel.name}_cols", par, "scan.cols")
        extra = (k, inner, init, excl, tile_columns(outer, inner, par))
    else:
        fn = pick(kernel, f"{kernel.name}_rows", par, "scan.rows")
        extra = (k, init, excl, row_tasks(outer, par))

    def run(out, x):
        buf, rounded = kernel_out(out)
        if buf.size:
            fn(buf, shadow(x), *extra)
        finish(out, buf, rounded)
    return Step(run, [kernel], jit=_flat_call(fn, extra, node, ins))


for _kind in ("Cumsum", "CumProd", "CumMax"):
    lowers(_kind, NUMERIC, reason=SHADOW_NOTE)(lower_scan)
accumulates("Cumsum", NARROW, "f64", reason="the running sum is an f64")(lower_scan)


# ── ArgMax, ArgMin, TopK ──────────────────────────────────────────────────

def lower_arg(node, ins, ctx) -> Step:
    dims = ins[0].dims
    ax = node.attrs.axis
    outer, k, inner = split3(dims, ax, ax + 1)
    kernel = _kernel(_reduce_select)
    largest = node.kind == "ArgMax"
    par = is_parallel(outer * k * inner)
    if inner > 1:
        ib = tile_columns(outer, inner, par)
        fn = pick(kernel, "arg_cols", par, "arg.cols")
        call = lambda buf, x: fn(buf, x, k, inner, largest, ib)
    else:
        fn = pick(kernel, "arg_rows", par, "arg.rows")
        call = lambda buf, x: fn(buf, x, k, largest)
    what = f"{node.kind} over an empty axis ({ax} of shape {list(dims)}) has no answer"

    def run(out, x):
        buf, rounded = kernel_out(out)
        if buf.size:
            if k == 0:
                raise ValueError(what)
            call(buf, shadow(x))
        finish(out, buf, rounded)
    return Step(run, [kernel])


for _kind in ("ArgMax", "ArgMin"):
    lowers(_kind, NUMERIC, reason=SHADOW_NOTE)(lower_arg)


@lowers("TopK", NUMERIC, reason=SHADOW_NOTE)
def lower_topk(node, ins, ctx) -> Step:
    dims = ins[0].dims
    n, k = dims[-1], node.attrs.k
    outer = math.prod(dims[:-1])
    kernel = _kernel(_reduce_select)
    fn = pick(kernel, "topk_rows", is_parallel(outer * n), "topk")
    use("topk.buffer" if k <= _reduce_select.SMALL_K else "topk.sort")

    def run(out, x):
        if k > n:           # only reachable with dynamic dims (the verifier checks C2)
            raise ValueError(f"TopK k={k} exceeds the last axis size {n}")
        buf, rounded = kernel_out(out)
        if buf.size:
            fn(buf, shadow(x), n, k)
        finish(out, buf, rounded)
    return Step(run, [kernel])
