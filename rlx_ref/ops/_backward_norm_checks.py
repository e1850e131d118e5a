"""Verifier rules of the normalization backward kinds (``backward_norm``): the constraint
numbers (C1..C5) are the ones each kind's OpDef documents."""
from __future__ import annotations

from ..ir.shape import Dyn, Shape
from .normalization import _check_vector
from .opdef import want


def groups_divide(c, groups: int) -> None:
    """num_groups divides C; capped at max(C, 1), as the forward GroupNorm."""
    want(0 < groups <= max(c, 1) and c % groups == 0,
         f"(C4) num_groups ({groups}) must divide the channel count C ({c}) and lie in "
         f"1..{max(c, 1)}")


def _floats(shapes, kind: str, names: tuple):
    for s, n in zip(shapes, names):
        want(s.dtype.is_float, f"(C1) {kind} operand `{n}` must be a float tensor, got "
                               f"{s.dtype}")


def _like_x(dy: Shape, x: Shape, kind: str, cid: str):
    same = dy.rank == x.rank and all(a == b or isinstance(a, Dyn) or isinstance(b, Dyn)
                                     for a, b in zip(x.dims, dy.dims))
    want(same and dy.dtype == x.dtype,
         f"({cid}) {kind} `dy` must have x's shape and dtype {x}, got {dy}")


def _declared(out: Shape, x: Shape, feat, kind: str, cid: str):
    """A gradient of a [C] vector: a float tensor of C elements (RLX takes the shape from
    the caller: gamma's, usually [C], in gamma's dtype)."""
    want(out.dtype.is_float, f"(C1) {kind} output must be a float tensor, got {out.dtype}")
    _check_vector(out, feat, kind, "output", cid)


def _axis(x: Shape, axis: int) -> int:
    want(-x.rank <= axis < x.rank,
         f"(C2) axis {axis} is out of range for rank {x.rank} (expected {-x.rank}.."
         f"{x.rank - 1})")
    return axis % x.rank


def check_axis_kind(kind: str, names: tuple, vectors: tuple, declared: bool):
    """Checks of a LayerNorm/RmsNorm gradient: ``vectors`` name the [C] operands."""
    def check(shapes, a, out):
        _floats(shapes, kind, names)
        x = shapes[0]
        feat = x.dims[_axis(x, a.axis)]
        for i in vectors:
            _check_vector(shapes[i], feat, kind, names[i], "C3")
        if declared:
            _declared(out, x, feat, kind, "C3")
        _like_x(shapes[-1], x, kind, "C4")
    return check


def check_group_kind(kind: str, names: tuple, declared: bool):
    def check(shapes, a, out):
        _floats(shapes, kind, names)
        x = shapes[0]
        want(x.rank >= 2, f"(C2) {kind} needs x of shape [N, C, *spatial] (rank >= 2), got "
                          f"rank {x.rank}")
        c = x.dims[1]
        for i in range(1, len(shapes) - 1):
            _check_vector(shapes[i], c, kind, names[i], "C3")
        if declared:
            _declared(out, x, c, kind, "C3")
        want(a.num_groups > 0, f"(C4) {kind} num_groups must be positive, got 0")
        if not isinstance(c, Dyn):
            groups_divide(c, a.num_groups)
        _like_x(shapes[-1], x, kind, "C5")
    return check


def check_bn_kind(kind: str, names: tuple, declared: bool):
    def check(shapes, a, out):
        _floats(shapes, kind, names)
        x = shapes[0]
        want(x.rank >= 1, f"(C2) {kind} needs x of rank >= 1 (channels on the last axis), "
                          f"got a 0-d tensor")
        for i in range(1, len(shapes) - 1):
            _check_vector(shapes[i], x.dims[-1], kind, names[i], "C3")
        if declared:
            _declared(out, x, x.dims[-1], kind, "C3")
        if len(shapes) > 1:
            _like_x(shapes[-1], x, kind, "C4")
    return check
