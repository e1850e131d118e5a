"""RLX's decompositions (LowerPad, LowerSlice, LowerStructural, LowerFma, LowerDotGeneral):
kinds a backend does not claim, rewritten into other registry kinds.

Each decomposition is a small function ``fn(g, node, ins) -> id`` that appends nodes of
other kinds to ``g`` (the graph being rebuilt; ``ins`` are the node's remapped operands)
and returns the id holding the node's value. They need static shapes: a node with a
dynamic dim stays and legalization names it. Every decomposition is checked against the
op's oracle on the op's registry samples (tests/test_passes.py); where one does not
compute exactly what the op computes, ``exact`` is False and ``note`` says by how much.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..ir.dtype import DType
from ..ir.graph import Graph
from ..ir.shape import Shape
from ..ops.elementwise import cast_array, clamp_int_bounds
from ..ops.leaves import ConstantAttrs, constant_bytes
from ._rewrite import PassLog, Rebuilder, SupportTable, graph_pass, with_bodies

MAX_ROUNDS = 8      # decompositions may produce kinds that decompose again


@dataclass(frozen=True)
class Decomposition:
    """How ``kind`` is rewritten: ``fn``, the kinds it may emit, and whether it is exact."""

    kind: str
    fn: Callable
    produces: tuple
    exact: bool = True
    note: str = ""


DECOMPOSITIONS: dict[str, Decomposition] = {}


def decomposes(kind: str, produces, exact: bool = True, note: str = ""):
    """Register ``fn`` as the decomposition of ``kind``."""
    def deco(fn):
        DECOMPOSITIONS[kind] = Decomposition(kind, fn, tuple(produces), exact, note)
        return fn
    return deco


# ── node-building helpers ──────────────────────────────────────────────────

def constant(g: Graph, value, dtype: DType) -> int:
    """A Constant holding ``value`` stored as ``dtype``."""
    arr = np.asarray(value).astype(dtype.np)
    return g.op("Constant", (), ConstantAttrs(constant_bytes(arr)),
                shape=Shape(arr.shape, dtype))


def _static(g: Graph, ids) -> bool:
    return all(g.shape(i).is_static for i in ids)


def _dims_with(g: Graph, x: int, axis: int, size: int) -> tuple:
    dims = list(g.shape(x).dims)
    dims[axis] = size
    return tuple(dims)


def _narrow(g, x, axis, start, length):
    return g.op("Narrow", (x,), axis=axis, start=start, len=length)


def _reverse(g, x, axis):
    return g.op("Reverse", (x,), axes=(axis,))


def _binary(g, op, a, b):
    return g.op("Binary", (a, b), op=op)


# ── Pad, Slice, Tile (LowerPad, LowerSlice, LowerStructural) ───────────────

def _pad_block(g, cur, axis, size, at_start, mode, fill):
    """The ``size`` elements padded before (``at_start``) or after ``cur`` on ``axis``."""
    n = g.shape(cur).dims[axis]
    if mode == "Constant":
        return g.op("Expand", (fill,), target_shape=_dims_with(g, cur, axis, size))
    if mode == "Reflect":           # before: x[size] .. x[1]; after: x[n-2] .. x[n-1-size]
        return _reverse(g, _narrow(g, cur, axis, 1 if at_start else n - 1 - size, size), axis)
    if mode == "Replicate":         # the edge element, repeated
        edge = _narrow(g, cur, axis, 0 if at_start else n - 1, 1)
        return g.op("Expand", (edge,), target_shape=_dims_with(g, cur, axis, size))
    # Circular: before wraps the tail x[n-size:], after wraps the head x[:size]
    return _narrow(g, cur, axis, n - size if at_start else 0, size)


@decomposes("Pad", ("Concat", "Narrow", "Reverse", "Expand", "Constant"))
def lower_pad(g: Graph, node, ins) -> int | None:
    """Axis by axis on the progressively padded tensor: Concat(before, x, after)."""
    (x,) = ins
    if not _static(g, ins):
        return None
    mode = node.attrs.mode if isinstance(node.attrs.mode, str) else node.attrs.mode[0]
    fill, cur = None, x
    if mode == "Constant":      # the f32 payload value, converted as Cast converts it
        dt = node.shape.dtype
        fill = constant(g, cast_array(np.float32(node.attrs.mode[1]), dt), dt)
    for axis, (before, after) in enumerate(node.attrs.pads):
        if before == after == 0:
            continue
        parts = [cur]
        if before:
            parts.insert(0, _pad_block(g, cur, axis, before, True, mode, fill))
        if after:
            parts.append(_pad_block(g, cur, axis, after, False, mode, fill))
        cur = g.op("Concat", parts, axis=axis)
    return cur


@decomposes("Slice", ("Narrow", "Reverse", "Gather", "Constant"))
def lower_slice(g: Graph, node, ins) -> int | None:
    """step 1 (or one element): Narrow; step -1: Reverse(Narrow); else Gather of the
    constant i64 indices ``start + j*step``."""
    (x,) = ins
    a = node.attrs
    if a.len == 0:
        return _narrow(g, x, a.axis, 0, 0)
    if a.step == 1 or a.len == 1:
        return _narrow(g, x, a.axis, a.start, a.len)
    if a.step == -1:
        return _reverse(g, _narrow(g, x, a.axis, a.start - (a.len - 1), a.len), a.axis)
    picks = a.start + a.step * np.arange(a.len, dtype=np.int64)
    return g.op("Gather", (x, constant(g, picks, DType.I64)), axis=a.axis)


@decomposes("Tile", ("Concat", "Narrow"))
def lower_tile(g: Graph, node, ins) -> int | None:
    """Per axis, Concat ``reps`` copies of the tensor so far (a rep of 0 narrows to empty;
    RLX skips reps <= 1, which leaves a 0-rep axis unchanged)."""
    cur = ins[0]
    for axis, r in enumerate(node.attrs.reps):
        if r == 0:
            cur = _narrow(g, cur, axis, 0, 0)
        elif r > 1:
            cur = g.op("Concat", [cur] * r, axis=axis)
    return cur


# ── Trilu, Clamp, Fma (LowerStructural, LowerFma) ──────────────────────────

@decomposes("Trilu", ("Where", "Constant"),
            note="Where(mask, x, 0) rather than RLX's x * mask, so NaN and inf in the "
                 "zeroed triangle become 0 as the op defines")
def lower_trilu(g: Graph, node, ins) -> int | None:
    (x,) = ins
    dims = g.shape(x).dims
    rows, cols = dims[-2], dims[-1]
    if not isinstance(rows, int) or not isinstance(cols, int):
        return None
    offset = np.arange(cols)[None, :] - np.arange(rows)[:, None]       # j - i
    d = node.attrs.diagonal
    keep = offset >= d if node.attrs.upper else offset <= d
    dt = node.shape.dtype
    return g.op("Where", (constant(g, keep, DType.BOOL), x, constant(g, 0, dt)))


def _clamp_bounds(a, dt: DType):
    """The bounds as values of ``dt``: integers round inward and saturate, as the op does."""
    if dt.is_int:
        return clamp_int_bounds(a.min, a.max, dt.np)
    if dt is DType.F64:
        return np.float64(a.min), np.float64(a.max)
    # f32 bounds; f16/bf16 round them, which commutes with max/min (rounding is monotone)
    return np.float32(a.min), np.float32(a.max)


@decomposes("Clamp", ("Binary", "Constant"))
def lower_clamp(g: Graph, node, ins) -> int | None:
    """``Min(Max(x, lo), hi)`` with the NaN-ignoring Max/Min, so NaN clamps to lo."""
    (x,) = ins
    dt = node.shape.dtype
    lo, hi = _clamp_bounds(node.attrs, dt)
    low = _binary(g, "Max", x, constant(g, lo, dt))
    return _binary(g, "Min", low, constant(g, hi, dt))


@decomposes("Fma", ("Binary", "Cast"), exact=False,
            note="f32/f16/bf16 multiply and add in f64 and round back (exact product, two "
                 "roundings: differs from the single rounding only in rare double-rounding "
                 "ties); f64 is RLX's Mul + Add (two roundings, within the op's 1-ulp + "
                 "eps·(|a·b| + |c|) contract); integers are exact")
def lower_fma(g: Graph, node, ins) -> int | None:
    a, b, c = ins
    dt = node.shape.dtype
    if dt in (DType.F32, DType.F16, DType.BF16):
        wide = [g.op("Cast", (x,), to=DType.F64) for x in (a, b, c)]
        s = _binary(g, "Add", _binary(g, "Mul", wide[0], wide[1]), wide[2])
        return g.op("Cast", (s,), to=dt)
    return _binary(g, "Add", _binary(g, "Mul", a, b), c)


# ── DotGeneral (LowerDotGeneral) ───────────────────────────────────────────

def _transpose(g, x, perm):
    if list(perm) == list(range(len(perm))):
        return x
    return g.op("Transpose", (x,), perm=tuple(perm))


def _reshape(g, x, dims):
    if tuple(g.shape(x).dims) == tuple(dims):
        return x
    return g.op("Reshape", (x,), new_shape=tuple(dims))


@decomposes("DotGeneral", ("Transpose", "Reshape", "MatMul"))
def lower_dot_general(g: Graph, node, ins) -> int | None:
    """Lay lhs out as [batch..., M, K] and rhs as [batch..., K, N] (Transpose + Reshape),
    one batched MatMul, Reshape to [batch..., lhs free..., rhs free...]. RLX lowers only
    the plain 2-D case; this covers every batch/contracting layout."""
    lhs, rhs = ins
    if not _static(g, ins):
        return None
    a = node.attrs
    ls, rs = g.shape(lhs).dims, g.shape(rhs).dims
    lb, lc, rb, rc = map(list, (a.lhs_batch, a.lhs_contracting, a.rhs_batch,
                                a.rhs_contracting))
    lf = [i for i in range(len(ls)) if i not in lb and i not in lc]
    rf = [i for i in range(len(rs)) if i not in rb and i not in rc]
    batch = [ls[i] for i in lb]
    k = math.prod(ls[i] for i in lc)
    m, n = math.prod(ls[i] for i in lf), math.prod(rs[i] for i in rf)
    x = _reshape(g, _transpose(g, lhs, lb + lf + lc), batch + [m, k])
    y = _reshape(g, _transpose(g, rhs, rb + rc + rf), batch + [k, n])
    z = g.op("MatMul", (x, y))
    return _reshape(g, z, batch + [ls[i] for i in lf] + [rs[i] for i in rf])


@decomposes("StopGradient", ())
def lower_stop_gradient(g: Graph, node, ins) -> int | None:
    """The identity in the forward pass: the node becomes its operand."""
    return ins[0]


# ── the pass ───────────────────────────────────────────────────────────────

def _wanted(node, table: SupportTable, kinds) -> bool:
    if node.kind not in DECOMPOSITIONS:
        return False
    if kinds is not None:
        return node.kind in kinds
    return not table.supports_node(node)


def _apply(rb: Rebuilder, node, log: PassLog | None, where: str) -> bool:
    """Decompose ``node`` into ``rb.new``; False (nothing appended) when it cannot."""
    g = rb.new
    start = len(g.nodes)
    try:
        out = DECOMPOSITIONS[node.kind].fn(g, node, rb.inputs(node))
    except Exception as e:  # noqa: BLE001  (a payload the decomposition cannot express)
        out, why = None, str(e)
    else:
        why = "it needs static shapes"
    if out is None:
        del g.nodes[start:]         # nothing refers to them yet: append-only is preserved
        if log is not None:
            log.note("decompose", f"{where} %{node.id} {node.kind} kept: {why}")
        return False
    if out >= start and node.name is not None:
        g.nodes[out].name = node.name
    rb.map(node.id, out)
    if log is not None:
        made = sorted({n.kind for n in g.nodes[start:]})
        log.rewrote(node.kind, "decomposed into " + (", ".join(made) or "its operand"))
        log.made(made, node.kind)
        log.note("decompose", f"{where} %{node.id} {node.kind} -> {', '.join(made) or '-'}")
    return True


def _round(graph: Graph, table: SupportTable, kinds, log) -> Graph:
    rb = Rebuilder(graph)
    changed = False
    for node in graph.nodes:
        op = with_bodies(node, lambda body: _fixed_point(body, table, kinds, log))
        if op is node.op and _wanted(node, table, kinds) and \
                _apply(rb, node, log, f"@{graph.name}"):
            changed = True
            continue
        changed |= op is not node.op
        rb.copy(node, op)
    return rb.finish() if changed else graph


def _fixed_point(graph: Graph, table: SupportTable, kinds, log) -> Graph:
    for _ in range(MAX_ROUNDS):
        new = _round(graph, table, kinds, log)
        if new is graph:
            break
        graph = new
    return graph


@graph_pass("decompose")
def decompose(graph: Graph, supported: SupportTable | None = None, kinds=None,
              log: PassLog | None = None) -> Graph:
    """Decompose every node whose kind/dtype ``supported`` does not claim (or, with
    ``kinds``, every node of those kinds), repeatedly, bodies included."""
    table = supported if supported is not None else SupportTable(None)
    return _fixed_point(graph, table, set(kinds) if kinds is not None else None, log)


def _load_families() -> None:
    """Import every ``decompose_*`` module of this package (and ``unfuse_composites``):
    each registers the decompositions of one op family with ``decomposes``."""
    import importlib
    import pkgutil

    from . import __path__ as here

    for name in sorted(m.name for m in pkgutil.iter_modules(here)):
        if name.startswith("decompose_") or name == "unfuse_composites":
            importlib.import_module(f"{__package__}.{name}")


_load_families()

__all__ = ["DECOMPOSITIONS", "Decomposition", "constant", "decompose", "decomposes"]
