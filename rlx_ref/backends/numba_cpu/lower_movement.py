"""Lowering of the movement kinds onto the strided-copy kernels of ``_index_map``.

Each kind only builds per-axis index maps from shapes and strides: affine
(``start + c*stride`` in input elements) for Reshape, Transpose, Narrow, Slice, Expand
and Reverse; a small table for Tile (``c % n``), ResizeNearest2x (``c // 2``) and Pad (the
mode's source position, ``-1`` = the constant). Concat puts each input's rows into its
column block of the output; Trilu copies or zeroes each row's two halves. Elements move
as raw bits, so every non-complex dtype (f16/bf16 and bool included) runs natively
through four specializations (1, 2, 4 and 8-byte elements).
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.dtype import DType
from ...ops._movement_fill import _mode_name, pad_source
from ...ops.elementwise import cast_array
from . import _index_map
from ._index_map import IndexMap, affine, bits, kernel, strides_of, table, uint_name
from .lowering import JitCall, Step, lowers
from .variant_table import th, use, use_par

MOVE_DTYPES = tuple(d for d in DType if not d.is_complex)


def gather_step(node, maps, fill=None) -> Step:
    move = IndexMap(tuple(node.shape.dims), maps, fill)
    variant = move.variant(math.prod(node.shape.dims) * node.shape.dtype.size_bytes)
    if variant:
        use(variant)
    return Step(move, [kernel()], jit=move.jit(node.shape.dtype.np))


def _parallel(node, family: str) -> bool:
    """Whether ``node``'s output is large enough for the prange kernel (recorded)."""
    return use_par(family, math.prod(node.shape.dims) * node.shape.dtype.size_bytes >=
                   th("move.par_bytes"))


# ── the kinds ──────────────────────────────────────────────────────────────

def _in_strides(ins) -> list:
    return strides_of(ins[0].dims)


@lowers("Reshape", MOVE_DTYPES)
def _reshape(node, ins, ctx):
    return gather_step(node, [affine(0, s) for s in strides_of(node.shape.dims)])


@lowers("Transpose", MOVE_DTYPES)
def _transpose(node, ins, ctx):
    st = _in_strides(ins)
    return gather_step(node, [affine(0, st[p]) for p in node.attrs.perm])


@lowers("Narrow", MOVE_DTYPES)
def _narrow(node, ins, ctx):
    a, st = node.attrs, _in_strides(ins)
    return gather_step(node, [affine(a.start * s if ax == a.axis else 0, s)
                              for ax, s in enumerate(st)])


@lowers("Slice", MOVE_DTYPES)
def _slice(node, ins, ctx):
    a, st = node.attrs, _in_strides(ins)
    return gather_step(node, [affine(a.start * s, a.step * s) if ax == a.axis else
                              affine(0, s) for ax, s in enumerate(st)])


@lowers("Expand", MOVE_DTYPES)
def _expand(node, ins, ctx):
    out, dims = tuple(node.shape.dims), tuple(ins[0].dims)
    lead = len(out) - len(dims)
    st = [0] * lead + [0 if d == 1 else s for d, s in zip(dims, strides_of(dims))]
    return gather_step(node, [affine(0, s) for s in st])


@lowers("Reverse", MOVE_DTYPES)
def _reverse(node, ins, ctx):
    flip, dims, st = set(node.attrs.axes), ins[0].dims, _in_strides(ins)
    return gather_step(node, [affine((d - 1) * s, -s) if ax in flip else affine(0, s)
                              for ax, (d, s) in enumerate(zip(dims, st))])


@lowers("Tile", MOVE_DTYPES)
def _tile(node, ins, ctx):
    dims, st = ins[0].dims, _in_strides(ins)
    return gather_step(node, [table(np.arange(d * r) % d * s) if r > 1 else affine(0, s)
                              for d, r, s in zip(dims, node.attrs.reps, st)])


@lowers("ResizeNearest2x", MOVE_DTYPES)
def _resize(node, ins, ctx):
    dims, st = ins[0].dims, _in_strides(ins)
    return gather_step(node, [affine(0, st[0]), affine(0, st[1]),
                              table(np.arange(2 * dims[2]) // 2 * st[2]),
                              table(np.arange(2 * dims[3]) // 2 * st[3])])


@lowers("Pad", MOVE_DTYPES)
def _pad(node, ins, ctx):
    a, dims, st = node.attrs, ins[0].dims, _in_strides(ins)
    mode = _mode_name(a.mode)
    fill = None
    if mode == "Constant":      # the f32 payload cast like Cast (ints truncate)
        dt = node.shape.dtype
        fill = np.asarray(cast_array(np.float32(a.mode[1]), dt), dt.np).reshape(1)
    maps = []
    for n, (before, after), s in zip(dims, a.pads, st):
        if before == after == 0:
            maps.append(affine(0, s))
            continue
        p = np.arange(-before, n + after)
        if mode == "Constant":
            maps.append(table(np.where((p >= 0) & (p < n), p * s, -1)))
        else:
            maps.append(table(pad_source(mode, p, n) * s))
    return gather_step(node, maps, fill)


@lowers("Concat", MOVE_DTYPES)
def _concat(node, ins, ctx):
    ax, out_dims = node.attrs.axis, tuple(node.shape.dims)
    rows = math.prod(out_dims[:ax])
    inner = math.prod(out_dims[ax + 1:])
    total = out_dims[ax] * inner
    offs = np.cumsum([0] + [s.dims[ax] * inner for s in ins])
    k = kernel()
    fn = k.get("put_rows_par") if _parallel(node, "concat") else k.get("put_rows")

    def run(out, *xs):
        o = bits(out)
        for x, off, end in zip(xs, offs[:-1], offs[1:]):
            if end > off and rows:
                fn(o, bits(x), rows, end - off, total, off, _index_map.CHUNK)
    u = uint_name(node.shape.dtype.size_bytes)
    jit = tuple(JitCall(fn, (f"{{out}}.reshape(-1).view({u})", f"{{{i}}}.reshape(-1).view({u})"),
                        (rows, int(end - off), total, int(off), _index_map.CHUNK))
                for i, (off, end) in enumerate(zip(offs[:-1], offs[1:])) if end > off and rows)
    return Step(run, [k], jit=jit or None)


@lowers("Trilu", MOVE_DTYPES)
def _trilu(node, ins, ctx):
    dims = tuple(node.shape.dims)
    rows, cols = dims[-2:]
    nrows = math.prod(dims[:-1])
    up, diag = bool(node.attrs.upper), int(node.attrs.diagonal)
    k = kernel()
    fn = k.get("trilu_par") if _parallel(node, "trilu") else k.get("trilu")

    def run(out, x):
        if out.size:
            fn(bits(out), bits(x), nrows, rows, cols, up, diag)
    u = uint_name(node.shape.dtype.size_bytes)
    jit = JitCall(fn, (f"{{out}}.reshape(-1).view({u})", f"{{0}}.reshape(-1).view({u})"),
                  (nrows, rows, cols, up, diag)) if math.prod(dims) else None
    return Step(run, [k], jit=jit)
