"""Sizes at and around the kernels' own boundaries: b − 1, b and b + 1 for every tile,
vector-width, unroll, work-group and block size the backends use.

The boundaries are read from the backends' modules (conformance sits above them), so a
changed constant moves its cases with it. Sizes already in ``LENGTHS`` are left out. Each
kernel family gets the sizes along its own axis: elementwise lengths, reduced-row lengths,
reduced-column counts (the column-block kernels), scan rows, and 2-D transposes around the
OpenCL transpose tile.
"""
from __future__ import annotations

import numpy as np

from ..ir.dtype import DType
from ..ir.shape import Shape
from ..ops.opdef import get
from ._cases_chains import chain_spec
from ._cases_ew import _act_input, _binary_operands, _rng
from ._cases_red import RowOp
from ._cases_values import LENGTHS
from .cases import Spec

F32, F16 = DType.F32, DType.F16
VECTOR_WIDTHS = (4, 8, 16)           # SIMD lanes of f64 / f32 / f32-on-AVX-512 vectors
WORK_GROUPS = (64, 128, 256)         # the work-group sizes devices pick


def boundaries() -> dict:
    """Boundary name → size, from the backends' constants."""
    from ..backends.numba_cpu import _reduce_fold, _reduce_geom
    from ..backends.opencl import _move_tile, _reduce_norm, launch

    out = {f"lanes-{w}": w for w in VECTOR_WIDTHS}
    out.update({f"work-group-{w}": w for w in WORK_GROUPS})
    out.update({
        "unroll-2vw": 2 * 8,                                  # rows_cpu: 2·VW per trip
        "col-block": _reduce_norm.COL_VECTORS * 8,            # cols_cpu: 4·VW columns
        "transpose-tile": _move_tile.TILE_CPU,
        "numba-lanes": _reduce_fold.LANES,
        "opencl-local": launch.LOCAL_1D,
        "numba-col-tile": _reduce_geom.TILE,
    })
    return out


def boundary_sizes() -> tuple:
    """b − 1, b, b + 1 for every boundary, less the sizes ``LENGTHS`` already has."""
    sizes = {n for b in boundaries().values() for n in (b - 1, b, b + 1)}
    return tuple(sorted(sizes - set(LENGTHS) - {0}))


def _tags(n: int, what: str) -> tuple:
    near = sorted(k for k, b in boundaries().items() if abs(n - b) <= 1)
    return ("boundary", what, f"len-{n}") + tuple(f"near-{k}" for k in near)


def _row(name: str, seed: int, shape, axis: int, what: str, n: int, dt=F32) -> Spec:
    kind, _, sub = name.partition(".")
    op = RowOp(kind, sub or None)
    x = op.values(_rng(seed, name, "boundary", what, shape, dt), shape, dt)
    return op.spec(x, axis, _tags(n, what), "boundary")


ROW_KINDS = ("Reduce.Sum", "Reduce.Max", "Softmax", "LayerNorm", "RmsNorm", "Cumsum",
             "ArgMax")
COL_KINDS = ("Reduce.Sum", "Reduce.Mean", "Softmax", "LayerNorm")
LOWP_KINDS = ("Reduce.Sum", "Softmax", "LayerNorm")


def _elementwise(seed: int, n: int, dt) -> list[Spec]:
    x = _act_input("Exp", _rng(seed, "Activation", "Exp", "boundary", n, dt), n, dt)
    a, b = _binary_operands("Add", _rng(seed, "Binary", "Add", "boundary", n, dt), n, n, dt)
    return [Spec("Activation", get("Activation").attrs("Exp"), (x,), _tags(n, "length"),
                 source="boundary"),
            Spec("Binary", get("Binary").attrs("Add"), (a, b), _tags(n, "length"),
                 source="boundary")]


def _transposes(seed: int) -> list[Spec]:
    """2-D transposes whose sides sit around the transpose tile."""
    t = boundaries()["transpose-tile"]
    out = []
    for m in (t - 1, t, t + 1):
        for n in (t - 1, t + 1, 2 * t + 1):
            x = _rng(seed, "Transpose", "boundary", m, n).standard_normal((m, n))
            out.append(Spec("Transpose", get("Transpose").attrs((1, 0)),
                            (x.astype(np.float32),), _tags(m, "tile") + (f"cols-{n}",),
                            Shape((n, m), F32), source="boundary"))
    return out


def boundary_specs(kind: str, seed: int) -> list[Spec]:
    """The boundary-size Specs of ``kind`` (empty for kinds without any)."""
    out = []
    for n in boundary_sizes():
        if kind in ("Activation", "Binary"):
            out += [s for s in _elementwise(seed, n, F32) if s.kind == kind]
            if n <= 257:
                out += [s for s in _elementwise(seed, n, F16) if s.kind == kind]
        for name in ROW_KINDS:
            if name.partition(".")[0] == kind:
                out.append(_row(name, seed, (2, n), 1, "row", n))
                if name in LOWP_KINDS and n <= 257:
                    out.append(_row(name, seed, (2, n), 1, "row", n, F16))
        for name in COL_KINDS:
            # one work-item per column: the widest column counts only where a column tile
            # sits (numba's TILE), and only for Sum (emulated devices run items one by one)
            wide = n > 257 and (name != "Reduce.Sum" or n > boundaries()["numba-col-tile"] + 1)
            if name.partition(".")[0] == kind and not wide:
                out.append(_row(name, seed, (3, n), 0, "columns", n))
        if kind == "ElementwiseRegion":
            spec = chain_spec(seed, 3, 3, (n,), F32, name="boundary")
            spec.tags = spec.tags + _tags(n, "length")
            out.append(spec)
    if kind == "Transpose":
        out += _transposes(seed)
    return out
