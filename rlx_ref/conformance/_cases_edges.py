"""Dispatch from an op kind to its generated edge cases (elementwise and reduction-like)."""
from __future__ import annotations

from ._cases_ew import EDGES as _ELEMENTWISE
from ._cases_red import KINDS as _REDUCTIONS
from ._cases_red import reduction_edges


def edge_kinds() -> tuple:
    """The kinds that get generated edge cases."""
    return tuple(_ELEMENTWISE) + _REDUCTIONS


def edge_specs(kind: str, seed: int) -> list:
    """The generated edge-case Specs of ``kind`` (empty for kinds without generators)."""
    if kind in _ELEMENTWISE:
        return _ELEMENTWISE[kind](seed)
    if kind in _REDUCTIONS:
        return reduction_edges(kind, seed)
    return []
