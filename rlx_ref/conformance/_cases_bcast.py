"""Generated broadcasts of rank 3 to 5 with size-1 axes in every position.

A size-1 axis in the middle (``[3, 1, 4] → [3, 2, 4]``, ``[2, 1, 3, 1, 5]``) is where a
suffix-modulus read (``gid % numel``) differs from numpy's broadcast, so every axis and every
set of axes gets a case: for Add every subset of axes on one operand and the complementary
subset on the other; for the other binary ops, Compare, Where and Fma every single axis on
either operand; lower-rank operands with an inner 1; and 16-bit dtypes for Add.
"""
from __future__ import annotations

import itertools

import numpy as np

from ..ir.dtype import DType
from ..ops.opdef import get
from ._cases_ew import _binary_operands, _rng
from .cases import Spec

F32 = DType.F32
BASES = {3: (3, 2, 4), 4: (2, 3, 2, 5), 5: (2, 2, 3, 2, 5)}
SINGLE_AXIS_OPS = ("Sub", "Mul", "Div", "Max")


def ones_at(dims: tuple, axes) -> tuple:
    """``dims`` with the axes in ``axes`` set to 1."""
    return tuple(1 if i in axes else d for i, d in enumerate(dims))


def bcast_tags(shapes, out: tuple) -> tuple:
    """bcast, rank-N, and middle-axis when an operand broadcasts an inner axis."""
    tags = ["bcast", f"rank-{len(out)}"]
    for s in shapes:
        s = (1,) * (len(out) - len(s)) + tuple(s)
        if any(s[i] == 1 != out[i] for i in range(1, len(out) - 1)):
            tags.append("middle-axis")
            break
    return tuple(tags)


def _subsets(rank: int):
    """Every non-empty set of axes."""
    for k in range(1, rank + 1):
        yield from itertools.combinations(range(rank), k)


def _pair(kind: str, op: str, seed: int, sa: tuple, sb: tuple, out: tuple,
          dt: DType = F32) -> Spec:
    r = _rng(seed, kind, op, "bcast", sa, sb, dt)
    a, b = _binary_operands(op, r, sa, sb, dt)
    return Spec(kind, get(kind).attrs(op), (a, b), bcast_tags((sa, sb), out),
                source="bcast")


def binary_bcast_specs(seed: int) -> list[Spec]:
    """Binary broadcasts: Add over every axis set (and its complement), the other ops over
    every single axis, lower-rank operands with an inner 1, Add in f16/bf16."""
    out = []
    for rank, dims in BASES.items():
        for axes in _subsets(rank):
            sa = ones_at(dims, axes)
            out.append(_pair("Binary", "Add", seed, sa, dims, dims))
            rest = tuple(i for i in range(rank) if i not in axes)
            if rest:
                out.append(_pair("Binary", "Add", seed, sa, ones_at(dims, rest), dims))
        for p in range(rank):
            one = ones_at(dims, (p,))
            for op in SINGLE_AXIS_OPS:
                out += [_pair("Binary", op, seed, one, dims, dims),
                        _pair("Binary", op, seed, dims, one, dims)]
            for dt in (DType.F16, DType.BF16):
                out.append(_pair("Binary", "Add", seed, dims, one, dims, dt))
        for k in (1, 2):                       # a lower-rank operand with an inner 1
            low = ones_at(dims[k:], (1,))
            out.append(_pair("Binary", "Mul", seed, dims, low, dims))
    return out


def compare_bcast_specs(seed: int) -> list[Spec]:
    out = []
    for dims in BASES.values():
        out += [_pair("Compare", "Gt", seed, ones_at(dims, (p,)), dims, dims)
                for p in range(len(dims))]
    return out


def where_bcast_specs(seed: int) -> list[Spec]:
    """The condition, then a value, broadcast along each axis in turn."""
    out = []
    for dims in BASES.values():
        for p in range(len(dims)):
            r = _rng(seed, "Where", "bcast", dims, p)
            one = ones_at(dims, (p,))
            cond = r.integers(0, 2, one).astype(bool)
            x = r.standard_normal(dims).astype(np.float32)
            y = r.standard_normal(ones_at(dims, ((p + 1) % len(dims),))).astype(np.float32)
            shapes = (one, dims, y.shape)
            out.append(Spec("Where", None, (cond, x, y), bcast_tags(shapes, dims),
                            source="bcast"))
    return out


def fma_bcast_specs(seed: int) -> list[Spec]:
    """a · b + c with a, b and c each broadcast along a different axis."""
    out = []
    for dims in BASES.values():
        rank = len(dims)
        for p in range(rank):
            r = _rng(seed, "Fma", "bcast", dims, p)
            shapes = [ones_at(dims, ((p + i) % rank,)) for i in range(3)]
            ins = tuple(r.standard_normal(s).astype(np.float32) for s in shapes)
            out.append(Spec("Fma", None, ins, bcast_tags(shapes, dims), source="bcast"))
    return out


BCAST = {"Binary": binary_bcast_specs, "Compare": compare_bcast_specs,
         "Where": where_bcast_specs, "Fma": fma_bcast_specs}


def bcast_specs(kind: str, seed: int) -> list[Spec]:
    """The generated rank-3..5 broadcast Specs of ``kind`` (empty for other kinds)."""
    return BCAST[kind](seed) if kind in BCAST else []
