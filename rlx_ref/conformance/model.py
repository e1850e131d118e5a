"""Data shared by the conformance pieces: a Case, a CaseResult and the status names."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..ir.graph import Graph

# RLX's statuses plus the ledger's: a case ends in exactly one of these.
OK, MISSING, MISMATCH = "ok", "MISSING", "MISMATCH"
UNSUPPORTED, XFAIL, XPASS, ERROR = "unsupported", "xfail", "xpass", "error"
# The backend killed its worker process (a signal or an exit), or overran --case-timeout.
CRASH, TIMEOUT = "crash", "timeout"
STATUSES = (OK, MISSING, MISMATCH, UNSUPPORTED, XFAIL, XPASS, ERROR, CRASH, TIMEOUT)
PASSING = (OK, UNSUPPORTED, XFAIL)          # statuses that do not fail a run


@dataclass
class Case:
    """One graph, its inputs and what it is checking.

    ``id`` is a content hash (stable across runs and machines); ``op`` is the kind under
    test (``multi:<name>`` for multi-op cases); ``dtype`` the case dtype's display name;
    ``noncontiguous`` names inputs that are fed to the backend as strided views.
    """

    id: str
    op: str
    dtype: str
    tags: tuple
    graph: Graph
    inputs: dict
    params: dict = field(default_factory=dict)
    noncontiguous: tuple = ()
    seed: int = 0
    source: str = ""          # e.g. "samples[3]", "tiling", "specials", "multi"
    accuracy: Any = None      # rlx_ref.conformance.accuracy contract (None = op default)
    expect_error: tuple = ()  # error case: phrases the raised error must mention (errors.py)

    @property
    def kinds(self) -> list[str]:
        """Every op kind the graph uses (for the declared-support check)."""
        out, stack = [], [self.graph]
        while stack:
            g = stack.pop()
            for n in g.nodes:
                out.append(n.kind)
                from ..ops.opdef import get

                stack.extend(get(n.kind).bodies(n.attrs))
        return sorted(set(out))

    def feeds(self) -> dict:
        """Backend inputs: the arrays, non-contiguous ones as equal-valued strided views."""
        out = {}
        for k, v in self.inputs.items():
            if k in self.noncontiguous and v.ndim >= 1 and v.size > 1:
                big = np.zeros(v.shape[:-1] + (2 * v.shape[-1],), v.dtype)
                big[..., ::2] = v
                out[k] = big[..., ::2]
            else:
                out[k] = v
        return out


@dataclass
class CaseResult:
    """The outcome of one case on one backend (JSON-serialisable via ``to_json``)."""

    case_id: str
    op: str
    dtype: str
    tags: tuple
    backend: str
    status: str
    message: str = ""
    max_abs: float | None = None
    max_rel: float | None = None
    max_ulp: float | None = None
    worst_index: list | None = None
    budget_ratio: float | None = None     # worst error / allowed error (<= 1 passes)
    seconds: float = 0.0
    repro: str | None = None
    emulated: bool = False
    path: str = "native"                  # native | rewritten | host | decomposed
    contract: str = ""                    # the accuracy contract judged by (describe())
    variants: list = field(default_factory=list)   # kernel variants the run used

    def to_json(self) -> dict:
        d = asdict(self)
        d["tags"] = list(self.tags)
        return d

    @staticmethod
    def from_json(d: dict) -> "CaseResult":
        d = dict(d)
        d["tags"] = tuple(d.get("tags", ()))
        return CaseResult(**d)
