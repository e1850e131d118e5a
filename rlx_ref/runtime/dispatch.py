"""The dispatch report (RLX's ``KernelDispatchReport`` / ``format_dispatch_report``):
how each op kind of a graph reaches the backend.

Per kind, one path:

- native: the backend runs it with its own kernel;
- host: the backend declares it but runs it on the host (numpy), with its reason;
- rewritten: the passes removed it (decomposed, unfused, fused, folded or dead), or the
  backend itself declares it decomposed/rewritten;
- unsupported: still in the graph and not claimed: compilation fails.

RLX's ``common-ir`` path (logical kernels lowered to primitive MIR) has no counterpart
here; rlx_ref's ``host`` path takes its place in the layout. Printed to stderr on every
compile when ``RLX_DISPATCH_REPORT=1`` or ``RLX_VERBOSE=1``.
"""
from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field

from ..ir.dtype import DType
from ..env_registry import flag

PATHS = ("native", "host", "rewritten", "unsupported")


@dataclass(frozen=True)
class KindDispatch:
    """One kind: its path, how many nodes (after the passes; before, if rewritten away)."""

    kind: str
    path: str
    count: int
    reason: str = ""
    before: int = 0

    def line(self) -> str:
        extra = f" ({self.reason})" if self.reason else ""
        return f"    - {self.kind} ×{self.count} nodes{extra}"


@dataclass(frozen=True)
class StillUnsupported:
    """A node that no pass could bring into the backend's table."""

    graph: str
    node: int
    kind: str
    dtype: DType

    def line(self) -> str:
        return f"    - node %{self.node} in {self.graph}: {self.kind} ({self.dtype})"


@dataclass
class DispatchReport:
    """Which kinds run native, on the host, rewritten, or not at all on ``backend``."""

    backend: str
    claim_count: int
    kinds: list = field(default_factory=list)
    still_unsupported: list = field(default_factory=list)

    @property
    def compile_ready(self) -> bool:
        return not self.still_unsupported

    def path_of(self, kind: str) -> str | None:
        return next((k.path for k in self.kinds if k.kind == kind), None)

    def by_path(self) -> dict:
        out = {p: [] for p in PATHS}
        for k in self.kinds:
            out[k.path].append(k)
        return out

    def format(self) -> str:
        """RLX's text layout (``format_dispatch_report``)."""
        lines = [f"rlx dispatch report — backend \"{self.backend}\", "
                 f"supported_ops claim={self.claim_count}"]
        if self.claim_count == 0:
            lines.append("  (empty claim = legalize accepts all kinds; native/host split is "
                         "advisory only)")
        for path, entries in self.by_path().items():
            if entries:
                lines.append(f"  {path}:")
                lines += [e.line() for e in entries]
        if self.still_unsupported:
            lines.append(f"  still unsupported after rewrite ({len(self.still_unsupported)} "
                         "node(s)) — compile will fail:")
            lines += [u.line() for u in self.still_unsupported]
            lines.append("  Fix: implement a lowering and add it to Backend.supported_ops(), "
                         "or add a decomposition in rlx_ref/passes/decompose.py.")
        else:
            lines.append("  compile-ready: yes")
        return "\n".join(lines) + "\n"     # a text report ends its last line

    __str__ = format

    def to_dict(self) -> dict:
        return {"backend": self.backend, "claim_count": self.claim_count,
                "compile_ready": self.compile_ready,
                "kinds": [{"kind": k.kind, "path": k.path, "count": k.count,
                           "before": k.before, "reason": k.reason} for k in self.kinds],
                "still_unsupported": [{"graph": u.graph, "node": u.node, "kind": u.kind,
                                       "dtype": str(u.dtype)} for u in self.still_unsupported]}


def count_kinds(graph) -> Counter:
    """Nodes per kind, nested bodies included."""
    from ..passes._rewrite import walk_graphs

    return Counter(n.kind for g, _ in walk_graphs(graph) for n in g.nodes)


def _backend_paths(backend) -> tuple[dict, dict]:
    paths = backend.paths() if hasattr(backend, "paths") else {}
    reasons = backend.path_reasons() if hasattr(backend, "path_reasons") else {}
    return paths, reasons


def _classify(kind, before, after, unsupported, paths, reasons, log) -> KindDispatch:
    n_before, n_after = before.get(kind, 0), after.get(kind, 0)
    if kind in unsupported:
        return KindDispatch(kind, "unsupported", n_after, "not claimed", n_before)
    if n_after == 0:
        how = (log.rewritten.get(kind) if log is not None else None) or "removed by the passes"
        return KindDispatch(kind, "rewritten", n_before, how, n_before)
    declared = paths.get(kind, "native")
    reason = reasons.get(kind, "")
    if declared == "host":
        return KindDispatch(kind, "host", n_after, reason or "runs on the host", n_before)
    if declared in ("rewritten", "decomposed"):
        why = f"{declared} by the backend" + (f": {reason}" if reason else "")
        return KindDispatch(kind, "rewritten", n_after, why, n_before)
    notes = []
    if n_before == 0:
        src = sorted(log.introduced.get(kind, ())) if log is not None else []
        notes.append("introduced by the passes" + (f" from {', '.join(src)}" if src else ""))
    elif n_before != n_after:
        notes.append(f"{n_before} before the passes")
    return KindDispatch(kind, "native", n_after, "; ".join(notes), n_before)


def dispatch_report(graph_before, graph_after, backend, *, supported=None,
                    log=None) -> DispatchReport:
    """The report for ``backend`` (a Backend, or None for "no claim") comparing the graph
    given to the pipeline with the one it produced. ``supported`` overrides the backend's
    table (a SupportTable); ``log`` (a PassLog) supplies why kinds were rewritten."""
    from ..passes._rewrite import SupportTable, walk_graphs

    table = supported if supported is not None else SupportTable.of(backend)
    before, after = count_kinds(graph_before), count_kinds(graph_after)
    still = [StillUnsupported(path, n.id, n.kind, n.shape.dtype)
             for g, path in walk_graphs(graph_after) for n in g.nodes
             if not table.supports_node(n)]
    unsupported = {u.kind for u in still}
    paths, reasons = _backend_paths(backend) if backend is not None else ({}, {})
    kinds = [_classify(k, before, after, unsupported, paths, reasons, log)
             for k in sorted(set(before) | set(after))]
    return DispatchReport(table.name, table.claim_count, kinds, still)


def maybe_print_report(report: DispatchReport, verbose: bool = False, stream=None) -> bool:
    """Print ``report`` to stderr when RLX_DISPATCH_REPORT / RLX_VERBOSE (or ``verbose``)
    is on; True when printed."""
    if not (verbose or flag("RLX_DISPATCH_REPORT") or flag("RLX_VERBOSE")):
        return False
    print(report.format(), end="", file=stream or sys.stderr)
    return True


__all__ = [
    "PATHS",
    "DispatchReport",
    "KindDispatch",
    "StillUnsupported",
    "count_kinds",
    "dispatch_report",
    "maybe_print_report",
]
