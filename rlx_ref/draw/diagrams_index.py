"""Index-mapping diagrams for Gather, GatherElements, ScatterAdd and ScatterElements: two
small grids and one arrow per element moved, each arrow found by running the op on the
oracle (distinct source values for gathers, one-hot updates for scatters)."""
from __future__ import annotations

import numpy as np

from .diagrams import CELL, F, run_op
from .svg import PALETTE, Svg


def gather_map(kind: str, attrs, table: tuple, indices: np.ndarray) -> list:
    """``(source cell, output cell)`` pairs: the table holds 1..n, so each output value
    names the table cell it came from."""
    src = np.arange(1, int(np.prod(table)) + 1, dtype=F).reshape(table)
    out = run_op(kind, attrs, src, indices)
    return [(np.unravel_index(int(v) - 1, table), o) for o, v in np.ndenumerate(out)]


def scatter_map(kind: str, attrs, out_dims: tuple, indices: np.ndarray, upd_dims: tuple,
                data: bool) -> list:
    """``(update cell, output cell)`` pairs: each update alone set to 1 over zeros, the
    output cells it reaches."""
    pairs = []
    for u in np.ndindex(*upd_dims):
        upd = np.zeros(upd_dims, F)
        upd[u] = 1
        args = (np.zeros(out_dims, F), indices, upd) if data else (upd, indices)
        out = run_op(kind, attrs, *args, out=None if data else _shape(out_dims))
        pairs += [(u, o) for o in zip(*np.nonzero(out))]
    return pairs


def _shape(dims):
    from ..ir.dtype import DType
    from ..ir.shape import Shape

    return Shape(dims, DType.F32)


def _as2d(dims) -> tuple:
    return (1, dims[0]) if len(dims) == 1 else tuple(dims)


def _cell(dims, idx) -> tuple:
    idx = tuple(int(i) for i in idx)
    return (0, idx[0]) if len(dims) == 1 else idx


def mapping_svg(title: str, left: tuple, right: tuple, pairs: list, note: str,
                names=("table", "output")) -> str:
    """Two grids (``left`` and ``right`` dims, rank 1 or 2) joined by one arrow per pair."""
    lr, lc = _as2d(left)
    rr, rc = _as2d(right)
    gap = 120
    x0, y0 = 20, 48
    x1 = x0 + lc * CELL + gap
    width = max(x1 + rc * CELL + 20, 360)
    height = y0 + max(lr, rr) * CELL + 40
    s = Svg(width, height, title)
    s.text(10, 16, title, size=11, anchor="start", weight="bold")
    for (x, r, c, name) in ((x0, lr, lc, names[0]), (x1, rr, rc, names[1])):
        s.text(x + c * CELL / 2, y0 - 6, name, size=9)
        for i in range(r):
            for j in range(c):
                s.rect(x + j * CELL, y0 + i * CELL, CELL, CELL, fill="#ffffff",
                       stroke="#495057", width=0.8)
    hits: dict = {}
    for a, b in pairs:
        ra, ca = _cell(left, a)
        rb, cb = _cell(right, b)
        color = PALETTE[ra % len(PALETTE)] if lr > 1 else PALETTE[ca % len(PALETTE)]
        s.rect(x0 + ca * CELL + 3, y0 + ra * CELL + 3, CELL - 6, CELL - 6, fill=color,
               stroke="none")
        k = hits[(rb, cb)] = hits.get((rb, cb), -1) + 1     # a second arrival: a corner
        inset, side = (3, CELL - 6) if k == 0 else (CELL / 2, CELL / 2 - 3)
        s.rect(x1 + cb * CELL + inset, y0 + rb * CELL + inset, side, side, fill=color,
               stroke="#ffffff" if k else "none")
        s.line(x0 + (ca + 0.5) * CELL, y0 + (ra + 0.5) * CELL, x1 + (cb + 0.5) * CELL,
               y0 + (rb + 0.5) * CELL, stroke=color, width=0.9, arrow=True)
    s.text(10, height - 12, note, size=8, anchor="start", fill="#495057")
    return s.text_doc()


def gather() -> str:
    from ..ops.indexing import GatherAttrs

    idx = np.array([2, 0, 2], F)
    pairs = gather_map("Gather", GatherAttrs(0), (4, 2), idx)
    return mapping_svg("Gather axis 0: output row i is table row indices[i]", (4, 2),
                       (3, 2), pairs, "indices = [2, 0, 2]; a row may be read twice")


def gather_elements() -> str:
    from ..ops.indexing import GatherElementsAttrs

    idx = np.array([[2, 0, 1], [0, 0, 2]], F)
    pairs = gather_map("GatherElements", GatherElementsAttrs(0), (3, 3), idx)
    return mapping_svg("GatherElements axis 0: out[i, j] = data[indices[i, j], j]", (3, 3),
                       (2, 3), pairs, "indices = [[2, 0, 1], [0, 0, 2]]",
                       names=("data", "output"))


def scatter_add() -> str:
    idx = np.array([2, 0, 2], F)
    pairs = scatter_map("ScatterAdd", None, (4, 2), idx, (3, 2), data=False)
    return mapping_svg("ScatterAdd: update row i is added into output row indices[i]",
                       (3, 2), (4, 2), pairs,
                       "indices = [2, 0, 2]; rows 0 and 2 both land on row 2 and add up",
                       names=("updates", "output"))


def scatter_elements() -> str:
    from ..ops._indexing_scatter import ScatterElementsAttrs

    idx = np.array([[1, 0, 2], [2, 2, 0]], F)
    pairs = scatter_map("ScatterElements", ScatterElementsAttrs(0, "Add"), (3, 3), idx,
                        (2, 3), data=True)
    return mapping_svg("ScatterElements axis 0: updates[i, j] → out[indices[i, j], j]",
                       (2, 3), (3, 3), pairs, "indices = [[1, 0, 2], [2, 2, 0]]; the rest "
                       "of the output keeps data", names=("updates", "output"))


__all__ = ["gather", "gather_elements", "gather_map", "mapping_svg", "scatter_add",
           "scatter_elements", "scatter_map"]
