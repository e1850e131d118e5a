"""Lowering of the indexing kinds: Gather, GatherElements, GatherNd and the three scatters.

Every step first decodes its index tensor in a kernel (``_index_decode``: f32-encoded or
integer indices → int64 offsets, the first non-integral or out-of-range index raised as
the oracle's error, which the plan wraps naming the node), then runs one kernel of
``_index_kernels``. Gathers move raw bits, so every non-complex dtype runs natively;
scatters combine values: f16/bf16 through f32 shadows rounded once at the end (as the
oracle), bool through uint8 with Add/Mul as or/and.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.dtype import DType
from ._index_decode import IndexDecoder
from ._index_decode import kernel as decode_kernel
from ._index_kernels import kernel
from ._index_map import bits, strides_of, uint_name
from .lower_movement import MOVE_DTYPES
from .lowering import JitCall, Step, lowers
from .variant_table import th, use, use_par

SIXTEEN = (DType.F16, DType.BF16)
SCATTER_NOTE = "f16/bf16 scatter in f32 shadows converted on the host (rounded once)"
RED = {"None": 0, "Add": 1, "Mul": 2, "Max": 3, "Min": 4}
CHUNK = 1 << 12


def _i64(values) -> np.ndarray:
    return np.array(list(values), np.int64)


def _big(node, family: str) -> bool:
    """Whether ``node``'s output is large enough for the prange kernel (recorded)."""
    size = math.prod(node.shape.dims) * node.shape.dtype.size_bytes
    return use_par(family, size >= th("move.par_bytes"))


def _pick(node, name: str, family: str) -> tuple:
    """(kernel ``name`` or its prange twin, whether it is the twin)."""
    par = _big(node, family)
    return kernel().get(name + "_par" if par else name), par


def _kernels():
    return [kernel(), decode_kernel()]


def _piece(rows: int, inner: int, par: bool) -> int:
    """Elements per parallel gather work item: whole rows when there are enough rows for
    4 items per thread, else rows cut into pieces (at least ``gather.piece`` elements)
    that make up the difference (recorded when the prange kernel runs them)."""
    import numba

    want, least = 4 * numba.get_num_threads(), th("gather.piece")
    if rows >= want or inner <= least:
        return max(inner, 1)
    if par:
        use("gather.pieces")
    per_row = -(-want // max(rows, 1))
    return max(least, -(-inner // per_row))


# ── gathers ────────────────────────────────────────────────────────────────

@lowers("Gather", MOVE_DTYPES)
def _gather(node, ins, ctx):
    table, ax = tuple(ins[0].dims), node.attrs.axis
    outer, n_axis = math.prod(table[:ax]), table[ax]
    inner = math.prod(table[ax + 1:])
    decode = IndexDecoder("Gather", "C3", [n_axis], [ax], negative_ok=False)
    fn, par = _pick(node, "take_rows", "gather.rows")
    piece = _piece(outer * math.prod(ins[1].dims), inner, par)

    def run(out, x, indices):
        idx = decode(indices)
        if out.size:
            fn(bits(out), bits(x), idx, outer, n_axis, inner, piece)
    return Step(run, _kernels(), jit=_gather_jit(node, ins, decode, fn,
                                                 (outer, n_axis, inner, piece)))


def _gather_jit(node, ins, decode, fn, extra: tuple):
    """A gather as compiled calls: decode (and check) the indices into a scratch buffer,
    then ``fn(out bits, table bits, decoded, *extra)``; None when the host must convert
    16-bit float indices or there is nothing to move."""
    dec = decode.jit(ins[1])
    if dec is None or not math.prod(node.shape.dims):
        return None
    call, decoded = dec
    u = uint_name(node.shape.dtype.size_bytes)
    return call, JitCall(fn, (f"{{out}}.reshape(-1).view({u})", f"{{0}}.reshape(-1).view({u})"),
                         (decoded, *extra))


@lowers("GatherElements", MOVE_DTYPES)
def _gather_elements(node, ins, ctx):
    data = tuple(ins[0].dims)
    ax = node.attrs.axis % len(data)
    decode = IndexDecoder("GatherElements", "C4", [data[ax]], [ax], negative_ok=True)
    idims, dstrides = _i64(ins[1].dims), _i64(strides_of(data))
    fn, _ = _pick(node, "take_elements", "gather.elements")

    def run(out, x, indices):
        idx = decode(indices)
        if out.size:
            fn(bits(out), bits(x), idx, idims, dstrides, ax)
    return Step(run, _kernels(), jit=_gather_jit(node, ins, decode, fn, (idims, dstrides, ax)))


@lowers("GatherNd", MOVE_DTYPES)
def _gather_nd(node, ins, ctx):
    data, idims = tuple(ins[0].dims), tuple(ins[1].dims)
    b, k = node.attrs.batch_dims, idims[-1]
    decode = IndexDecoder("GatherNd", "C4", data[b:b + k], range(b, b + k), negative_ok=True)
    per_batch = max(1, math.prod(idims[b:-1]))
    batch_stride = math.prod(data[b:]) if b else 0
    dstrides = _i64(strides_of(data)[b:b + k])
    inner = math.prod(data[b + k:])
    fn, par = _pick(node, "take_nd", "gather.nd")
    piece = _piece(math.prod(idims[:-1]), inner, par)

    def run(out, x, indices):
        idx = decode(indices)
        if out.size:
            fn(bits(out), bits(x), idx, k, per_batch, batch_stride, dstrides, inner, piece)
    return Step(run, _kernels(), jit=_gather_jit(node, ins, decode, fn, (
        k, per_batch, batch_stride, dstrides, inner, piece)))


# ── scatters ───────────────────────────────────────────────────────────────

def _values(a: np.ndarray) -> np.ndarray:
    """A flat array the scatter kernels can do arithmetic on."""
    if a.dtype.itemsize == 2 and a.dtype.kind in "fV":
        return a.reshape(-1).astype(np.float32)
    if a.dtype.kind == "b":
        return a.reshape(-1).view(np.uint8)
    return a.reshape(-1)


def _reduction(name: str, dt: DType) -> int:
    if dt is DType.BOOL:            # on 0/1 bytes: or = max, and = min (as numpy's bool ufuncs)
        name = {"Add": "Max", "Mul": "Min"}.get(name, name)
    return RED[name]


def _scatter_run(node, launch):
    """``launch(work, *values)`` writes ``work``; 16-bit outputs go through an f32 shadow."""
    shadow = node.shape.dtype in SIXTEEN

    def run(out, *xs):
        if out.size == 0:
            launch(None, *xs)           # still decodes (and checks) the indices
            return
        work = np.empty(out.size, np.float32) if shadow else _values(out)
        launch(work, *xs)
        if shadow:
            out.reshape(-1)[:] = work.astype(out.dtype)
    return run


@lowers("ScatterAdd", MOVE_DTYPES, reason=SCATTER_NOTE)
def _scatter_add(node, ins, ctx):
    dims = tuple(node.shape.dims)
    inner = math.prod(dims[1:])
    decode = IndexDecoder("ScatterAdd", "C4", [dims[0]], [0], negative_ok=False)
    red, dstrides = _reduction("Add", node.shape.dtype), _i64([inner])
    par = _big(node, "scatter")
    k = kernel()

    def launch(work, updates, indices):
        idx = decode(indices)
        if work is None:
            return
        if par:
            k.get("scatter_nd_par")(work, work, True, _values(updates), idx, 1, dstrides,
                                    inner, red, CHUNK)
        else:
            k.get("scatter_nd")(work, work, True, _values(updates), idx, 1, dstrides,
                                inner, red)
    return Step(_scatter_run(node, launch), _kernels())


@lowers("ScatterElements", MOVE_DTYPES, reason=SCATTER_NOTE)
def _scatter_elements(node, ins, ctx):
    data = tuple(ins[0].dims)
    ax = node.attrs.axis % len(data)
    decode = IndexDecoder("ScatterElements", "C5", [data[ax]], [ax], negative_ok=True)
    idims, dstrides = _i64(ins[1].dims), _i64(strides_of(data))
    red = _reduction(node.attrs.reduction, node.shape.dtype)
    fn = kernel().get("scatter_elements")

    def launch(work, x, indices, updates):
        idx = decode(indices)
        if work is not None:
            fn(work, _values(x), _values(updates), idx, idims, dstrides, ax, red)
    return Step(_scatter_run(node, launch), _kernels())


@lowers("ScatterNd", MOVE_DTYPES, reason=SCATTER_NOTE)
def _scatter_nd(node, ins, ctx):
    data, kk = tuple(ins[0].dims), ins[1].dims[-1]
    decode = IndexDecoder("ScatterNd", "C4", data[:kk], range(kk), negative_ok=True)
    dstrides, inner = _i64(strides_of(data)[:kk]), math.prod(data[kk:])
    red = _reduction(node.attrs.reduction, node.shape.dtype)
    par = _big(node, "scatter")
    k = kernel()

    def launch(work, x, indices, updates):
        idx = decode(indices)
        if work is None:
            return
        if par:
            k.get("scatter_nd_par")(work, _values(x), False, _values(updates), idx, kk,
                                    dstrides, inner, red, CHUNK)
        else:
            k.get("scatter_nd")(work, _values(x), False, _values(updates), idx, kk,
                                dstrides, inner, red)
    return Step(_scatter_run(node, launch), _kernels())
