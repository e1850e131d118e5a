"""ScatterAdd, ScatterElements and ScatterNd as CUDA kernels.

The output starts as a copy of ``data`` (zeros for ScatterAdd); then one thread per
update element finds its target (its index checked as the gathers do: a bad index sets
the plan's error word, naming the node, and the update is dropped) and combines:

- Add, Max, Min: atomics (``atomic.add``; ``atomic.nanmax``/``nanmin`` are the oracle's
  NaN-ignoring fmax/fmin), so duplicate targets all apply.
- Mul: a compare-and-swap loop on the target's bits (CUDA has no atomic multiply).
- Float Add and Mul instead combine in update order, so a run repeats bit for bit (atomics
  would add duplicates in whatever order the threads arrive): a first pass writes each
  update's checked target, the host sorts the update positions by target (stable, so
  row-major within a target, the oracle's order), and one thread per target folds its
  updates in that order. The price is one round trip of U target positions per run.
- None: the last update in row-major order wins, as the oracle: a first pass records
  the largest update position per target (``atomic.max``), a second writes only those.

Atomics need 32- or 64-bit words: f32, f64, i32, i64 and u32 scatter into the output
itself; f16/bf16 scatter into an f32 copy (the oracle computes them in f32 and rounds
once) and the 8/16-bit integers and bool into an i64 copy (sums and products wrap to the
same values; bool Add/Mul/Max/Min are or/and/or/and of 0/1), narrowed at the end.
"""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType
from .device import DeviceConst, device_dtype, import_cuda, launch_shape
from .geometry import NP_NAME, read_expr, store_expr
from .kernels import Launch, array_type, compile_kernel, int_type
from .lower_index import GATHER_DTYPES, check_index, nd_tables
from .lower_reduce import _render
from .lowering import Step, lowers

_NATIVE = {DType.F32: np.float32, DType.F64: np.float64, DType.I32: np.int32,
           DType.I64: np.int64, DType.U32: np.uint32}
_BITS = {np.dtype(np.float32): np.int32, np.dtype(np.float64): np.int64}

_INIT = '''
def {name}(w, data, winner):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < w.size:
        w[i] = {first}
        if winner.size == w.size:
            winner[i] = -1
        i += step
'''
_ORDERED = '''
def {name}(w, upd, order, offs):
    t = cuda.grid(1)
    step = cuda.gridsize(1)
    while t < w.size:
        acc = w[t]
        for j in range(offs[t], offs[t + 1]):
            e = order[j]
            acc = acc {op} {wt}({read})
        w[t] = acc
        t += step
'''
_FINISH = '''
def {name}(out, w):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < out.size:
        out[i] = {store}
        i += step
'''
_UPDATE = '''
def {name}(w, upd, idx, ga, gb, p0, p1, neg, winner, err, tag):
    e = cuda.grid(1)
    step = cuda.gridsize(1)
    while e < upd.size:
        ok = True
        tgt = 0
{target}
        if ok:
            val = {wt}({read})
{combine}
        e += step
'''
# tuple indexing (ScatterAdd, ScatterNd): ga = axis sizes, gb = strides, p0 = slice size
_TARGET_ND = '''
u = e // p0
for t in range(ga.size):
    size = ga[t]
{check}
    ok = ok and not bad
    tgt += k * gb[t]
tgt = tgt * p0 + e - u * p0
'''
# element indexing (ScatterElements): ga = index dims, gb = data strides, p0 = axis,
# p1 = the axis size
_TARGET_ELEMENTS = '''
size = p1
{check}
ok = not bad
rem = e
for ax in range(ga.size - 1, -1, -1):
    c = rem % ga[ax]
    rem //= ga[ax]
    tgt += (k if ax == p0 else c) * gb[ax]
'''
_COMBINE = {
    "Add": "cuda.atomic.add(w, tgt, val)",
    "Max": "cuda.atomic.{nan}max(w, tgt, val)",
    "Min": "cuda.atomic.{nan}min(w, tgt, val)",
    "Claim": "cuda.atomic.max(winner, tgt, e)",
    "Target": "winner[e] = tgt",
    "Put": "if winner[tgt] == e:\n    w[tgt] = val",
    "Mul": '''old = w[tgt]
while True:
    got = cuda.atomic.cas(w, tgt, old, {new})
    if got == old:
        break
    old = got''',
}


def _work(dt: DType):
    """The numpy dtype the scatter combines in, and whether it is a scratch copy."""
    if dt in _NATIVE:
        return np.dtype(_NATIVE[dt]), False
    return np.dtype(np.float32 if dt in (DType.F16, DType.BF16) else np.int64), True


def _indent(code: str, n: int) -> str:
    return "\n".join(" " * n + ln for ln in code.strip().splitlines())


def _update_launch(mode: str, wt: np.dtype, upd_dt: DType, idx_dt: DType,
                   elements: bool) -> Launch:
    wname = NP_NAME[wt]
    w_arr = wt
    combine = _COMBINE[mode].replace("{nan}", "nan" if wt.kind == "f" else "")
    if mode == "Mul":
        if wt.kind == "f":      # the CAS runs on the bits: w is their integer view
            w_arr = np.dtype(_BITS[wt])
            bits = NP_NAME[w_arr]
            new = f"{wname}({bits}(old).view({wname}) * val).view({bits})"
        else:
            new = f"{wname}(old * val)"
        combine = combine.replace("{new}", new)
    check = check_index(idx_dt, "idx[e]" if elements else "idx[u * ga.size + t]", "size",
                        "neg", 0)
    target = (_TARGET_ELEMENTS if elements else _TARGET_ND).replace(
        "{check}", _indent(check, 0 if elements else 4))
    name, source = _render(_UPDATE, "scatter", target=_indent(target, 8), wt=wname,
                           read=read_expr(upd_dt, "upd[e]"), combine=_indent(combine, 12))
    from numba import types

    tab, i64 = array_type(np.int64), int_type()
    return Launch(compile_kernel(name, source),
                  (array_type(w_arr), array_type(device_dtype(upd_dt)),
                   array_type(device_dtype(idx_dt)), tab, tab, i64, i64, types.boolean, tab,
                   array_type(np.int32), i64))


def _scatter(node, ctx, data_dt, upd_dt, idx_dt, reduction: str, elements: bool, geo,
             negative_ok: bool = True) -> Step:
    """The Step: init (copy or zeros), the update pass(es), then narrowing if scratch."""
    dt = node.shape.dtype
    wt, scratch = _work(dt)
    n = node.shape.numel
    ordered = wt.kind == "f" and reduction in ("Add", "Mul")
    modes = ("Claim", "Put") if reduction == "None" else ("Target",) if ordered else \
        (reduction,)
    launches = [_update_launch(m, wt, upd_dt, idx_dt, elements) for m in modes]
    if ordered:
        name, source = _render(_ORDERED, "scatord", op="+" if reduction == "Add" else "*",
                               wt=NP_NAME[wt], read=read_expr(upd_dt, "upd[e]"))
        tab = array_type(np.int64)
        fold = Launch(compile_kernel(name, source),
                      (array_type(wt), array_type(device_dtype(upd_dt)), tab, tab))
        launches_all = launches + [fold]
    else:
        launches_all = launches
    first = "0" if data_dt is None else read_expr(data_dt, "data[i]")
    name, source = _render(_INIT, "scatinit", first=f"{NP_NAME[wt]}({first})")
    out_arr = array_type(device_dtype(dt))
    init = Launch(compile_kernel(name, source), (array_type(wt), out_arr, array_type(np.int64)))
    name, source = _render(_FINISH, "scatfin", store=store_expr(dt, "np.float64(w[i])"
                                                                 if wt.kind == "f" else "w[i]"))
    finish = Launch(compile_kernel(name, source), (out_arr, array_type(wt)))
    ga, gb = DeviceConst(geo[0]), DeviceConst(geo[1])
    p0, p1 = geo[2], geo[3]
    buf: dict = {}
    err, tag = ctx.err, ctx.tag
    bits = reduction == "Mul" and wt.kind == "f" and not ordered

    def run(out, data, idx, upd):
        if not n:
            return
        if not buf:
            cuda = import_cuda()
            buf["w"] = cuda.device_array(n, wt) if scratch else None
            size = n if reduction == "None" else upd.size if ordered else 1
            buf["win"] = cuda.device_array(max(size, 1), np.int64)
        w = buf["w"] if scratch else out
        blocks, threads = launch_shape(n)
        init(blocks, threads, w, out if data is None else data, buf["win"])
        if upd.size:
            target = w.view(_BITS[wt]) if bits else w
            if ordered:
                buf["win"].copy_to_device(np.full(upd.size, -1, np.int64))
            blocks, threads = launch_shape(upd.size)
            for ln in launches:
                ln(blocks, threads, target, upd, idx, ga.get(), gb.get(), p0, p1, negative_ok,
                   buf["win"], err.get(), tag)
            if ordered:
                _fold_in_order(fold, w, upd, buf["win"], n)
        if scratch:
            blocks, threads = launch_shape(n)
            finish(blocks, threads, out, w)
    return Step(run, [init] + launches_all + ([finish] if scratch else []), fallible=True)


def _fold_in_order(fold: Launch, w, upd, targets, n: int) -> None:
    """Fold each target's updates in row-major order (a bad index's target is -1)."""
    cuda = import_cuda()
    tg = targets.copy_to_host()
    order = np.argsort(tg, kind="stable")
    counts = np.bincount(tg[tg >= 0], minlength=n)
    offs = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=offs[1:])
    order = order[int((tg < 0).sum()):]       # -1 (dropped updates) sort first
    blocks, threads = launch_shape(n)
    fold(blocks, threads, w, upd, cuda.to_device(order.astype(np.int64)),
         cuda.to_device(offs))


@lowers("ScatterAdd", GATHER_DTYPES)
def lower_scatter_add(node, ins, ctx) -> Step:
    upd, idx = ins
    dims = [int(d) for d in node.shape.dims]
    piece = int(np.prod(dims[1:], dtype=np.int64))
    geo = (np.array([dims[0]], np.int64), np.ones(1, np.int64), max(piece, 1), 0)
    step = _scatter(node, ctx, None, upd.dtype, idx.dtype, "Add", False, geo, False)
    run = step.fn
    step.fn = lambda out, u, i: run(out, None, i, u)
    return step


@lowers("ScatterElements", GATHER_DTYPES)
def lower_scatter_elements(node, ins, ctx) -> Step:
    data, idx, upd = ins
    ax = node.attrs.axis % data.rank
    dims = [int(d) for d in data.dims]
    strides = np.array([int(np.prod(dims[a + 1:], dtype=np.int64)) for a in range(len(dims))],
                       np.int64)
    geo = (np.array([int(d) for d in idx.dims], np.int64), strides, ax, dims[ax])
    return _scatter(node, ctx, data.dtype, upd.dtype, idx.dtype, node.attrs.reduction, True,
                    geo)


@lowers("ScatterNd", GATHER_DTYPES)
def lower_scatter_nd(node, ins, ctx) -> Step:
    data, idx, upd = ins
    sizes, strides, piece, _, _ = nd_tables(data.dims, idx.dims, 0)
    geo = (sizes, strides, max(piece, 1), 0)
    return _scatter(node, ctx, data.dtype, upd.dtype, idx.dtype, node.attrs.reduction, False,
                    geo)
