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
    from ._cases_bcast import bcast_specs
    from ._cases_bounds import boundary_specs
    from ._cases_chains import chain_specs
    from ._cases_offset import offset_specs

    out = []
    if kind in _ELEMENTWISE:
        out = _ELEMENTWISE[kind](seed)
    elif kind in _REDUCTIONS:
        out = reduction_edges(kind, seed)
    if kind == "ElementwiseRegion":
        out = out + chain_specs(seed)
    return out + bcast_specs(kind, seed) + offset_specs(kind, seed) + \
        boundary_specs(kind, seed)
