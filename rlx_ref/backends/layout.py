"""Shape arithmetic every kernel backend needs the same way: row-major strides, the
[outer, K, inner] view of an axis range, and how a reduction's axes lay in memory."""
from __future__ import annotations

import math


def strides_of(dims) -> list:
    """Row-major element strides of ``dims``."""
    out, s = [], 1
    for d in reversed(tuple(dims)):
        out.append(s)
        s *= d
    return out[::-1]


def split3(dims, lo: int, hi: int) -> tuple[int, int, int]:
    """(outer, K, inner) for the axes ``lo..hi-1`` of ``dims`` (a contiguous range)."""
    dims = [int(d) for d in dims]
    return math.prod(dims[:lo]), math.prod(dims[lo:hi]), math.prod(dims[hi:])


def reduce_layout(dims, axes) -> tuple[tuple | None, tuple[int, int, int]]:
    """How to view ``dims`` reduced over ``axes``: (permutation or None, (outer, K, inner)).

    Size-1 axes are dropped first (they do not move memory). When the remaining reduced
    axes are adjacent, the input is read in place as [outer, K, inner]; otherwise the
    permutation (kept axes, then reduced axes) must be applied with one copy and the
    result is [outer, K, 1].
    """
    dims = [int(d) for d in dims]
    red = set(axes)
    live = [i for i, d in enumerate(dims) if d != 1]
    pos = [j for j, i in enumerate(live) if i in red]
    if not pos:
        return None, (math.prod(dims), 1, 1)
    if pos[-1] - pos[0] + 1 == len(pos):
        return None, split3(dims, live[pos[0]], live[pos[-1]] + 1)
    kept = [i for i in range(len(dims)) if i not in red]
    perm = tuple(kept + sorted(red))
    return perm, (math.prod(dims[i] for i in kept), math.prod(dims[i] for i in red), 1)
