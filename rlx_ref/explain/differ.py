"""Diff a backend against the oracle node by node and name the first node that departs.

The backend compiles a copy of the graph whose outputs are every non-leaf node, so each
intermediate comes back. Each node is then judged on its own: the oracle runs the node's
op alone on the very inputs the backend fed it (float64 and case dtype, as conformance
does) and the backend's value must meet the op's accuracy contract. The first node (in
node order, which is topological) that fails is the departure; its op and inputs are a
one-op conformance case, saved as a standalone repro.

Exposing every node keeps the backend from fusing them, so two more paths exist. When the
exposed graph cannot compile or run, or runs clean while the plain graph's outputs depart
(a fused kernel's fault), the diff bisects over prefixes: nodes ``0..k`` with ``k`` as the
only output (fusion free to happen), judged against the oracle run end to end under the
prefix's composite contract. Bisection assumes a departure persists downstream.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..interpret import Interpreter
from ..ir.graph import Graph
from .judge import (LEAVES, NodeDiff, chain_judge, judge_node, one_op_case, only_needed,
                    prefix_case, prefix_graph)
from .tracing import TraceInputError, missing_feeds


class DiffError(RuntimeError):
    """The diff cannot be made (the oracle fails, or the backend refuses the graph)."""


@dataclass
class DiffReport:
    """Every judged node in order, the first departure (None when all agree), the one-op
    case that reproduces it, where its repro was written, and how the values were got."""

    backend: str
    graph: Graph
    mode: str                                  # exposed | bisect
    nodes: list = field(default_factory=list)
    first: NodeDiff | None = None
    case: object = None
    repro: str | None = None
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.first is None

    def lines(self) -> list[str]:
        """The report as text lines: one per judged node, then the verdict."""
        out = [f"diff of @{self.graph.name} on {self.backend} against the oracle "
               f"({self.mode}: {len(self.nodes)} node(s) judged)"]
        if self.note:
            out.append(f"note: {self.note}")
        for d in self.nodes:
            ratio = "" if d.budget_ratio is None else f"  error/budget {d.budget_ratio:.3g}"
            mark = "ok " if d.ok else "!! "
            out.append(f"{mark}%{d.node_id:<4} {d.kind:<18} {d.status:<8}{ratio}")
        if self.first is None:
            out.append(f"every node agrees with the oracle on {self.backend}")
            return out
        f = self.first
        out += [f"first departure: %{f.node_id} {f.kind} ({f.status}, judged {f.how})",
                f"  {f.text[:160]}", f"  {f.message.splitlines()[0] if f.message else ''}"]
        if f.contract:
            out.append(f"  contract: {f.contract}")
        if self.repro:
            out.append(f"  repro: python {self.repro}/repro.py")
        return out


def _backend(backend):
    from ..backends.registry import get_backend

    return (get_backend(backend), backend) if isinstance(backend, str) else \
        (backend, backend.name)


def _run(be, graph: Graph, outputs: list, inputs: dict, params: dict, options=None) -> list:
    g = graph.copy()
    g.outputs = list(outputs)
    exe = be.compile(g, options)
    for k, v in params.items():
        exe.set_param(k, v)
    return [np.array(o, copy=True) for o in exe.run(inputs)]


def _oracle_all(graph: Graph, inputs: dict, params: dict, float64: bool) -> list:
    g = graph.copy()
    g.outputs = list(range(len(graph)))
    try:
        return Interpreter(g, float64).run(inputs, params)
    except Exception as e:  # noqa: BLE001 - the graph or its inputs are wrong, not a backend
        raise DiffError(f"the oracle itself fails on these inputs: {e}") from e


def _feed_values(graph: Graph, inputs: dict, params: dict) -> dict:
    return {n.id: (inputs if n.kind == "Input" else params)[n.attrs.name]
            for n in graph.nodes if n.kind in LEAVES}


def _run_prefix(be, graph, nid, outputs, inputs, params, options) -> list:
    g = prefix_graph(graph, nid)
    return _run(be, g, outputs, only_needed(g, inputs, "Input"),
                only_needed(g, params, "Param"), options)


def _bisect(report, be, graph, feeds, o64, oc, exposed, promises, options) -> None:
    """Find the first node ``k`` whose prefix graph (``k`` its only output) departs from
    the oracle run end to end, or fails; then judge ``k`` alone on the backend's inputs."""
    from .._readers import one_line

    inputs, params = feeds
    probes = {}

    def departs(i: int) -> bool:
        nid = exposed[i]
        node = graph.nodes[nid]
        try:
            got = _run_prefix(be, graph, nid, [nid], inputs, params, options)[0]
            d = chain_judge(graph, nid, got, o64, oc)
        except Exception as e:  # noqa: BLE001 - a failing prefix is a departure
            d = NodeDiff(nid, node.kind, str(node), "error",
                         f"{type(e).__name__}: {one_line(e)}", how="prefix run")
        probes[nid] = d
        return not d.ok

    if not exposed or not departs(len(exposed) - 1):
        report.note += "; no prefix departs from the oracle" if exposed else ""
        report.nodes = [probes[k] for k in sorted(probes)]
        return
    lo, hi = 0, len(exposed) - 1            # invariant: the prefix ending at hi departs
    while lo < hi:
        mid = (lo + hi) // 2
        if departs(mid):
            hi = mid
        else:
            lo = mid + 1
    nid = exposed[hi]
    node, first = graph.nodes[nid], probes[nid]
    report.nodes = [probes[k] for k in sorted(probes)]
    values = _feed_values(graph, inputs, params)
    inner = [i for i in dict.fromkeys(node.inputs) if i not in values]
    try:
        got = _run_prefix(be, graph, nid, inner + [nid], inputs, params, options)
        values.update(zip(inner + [nid], got))
        local, case = judge_node(node, [values[i] for i in node.inputs], values[nid],
                                 np.shape(oc[nid]), promises)
        if local.ok:            # right alone, wrong in the prefix: repro the whole prefix
            case = prefix_case(graph, nid, inputs, params)
        else:
            first = local
    except Exception:  # noqa: BLE001 - the node fails outright: repro on the oracle's inputs
        case = one_op_case(node, [oc[i] for i in node.inputs], np.shape(oc[nid]))
    report.first, report.case = first, case


def _write_repro(report, repro_dir) -> None:
    from ..conformance.model import CaseResult
    from ..conformance.repro import write_repro

    if report.case is None or repro_dir is None:
        return
    c, f = report.case, report.first
    res = CaseResult(c.id, c.op, c.dtype, c.tags, report.backend, f.status,
                     f"{f.message} (first departure of @{report.graph.name} at %{f.node_id})")
    report.repro = write_repro(repro_dir, report.backend, c, res)


def diff(graph: Graph, inputs: dict | None = None, params: dict | None = None,
         backend="numba-cpu", *, repro_dir=None, options=None,
         all_nodes: bool = False) -> DiffReport:
    """Run ``graph`` on ``backend`` (a name, or a Backend) and on the oracle; name the first
    node whose value departs from the oracle under its op's accuracy contract.

    Returns a ``DiffReport``: ``first`` is the departing node's ``NodeDiff`` (None when
    every node agrees), ``case`` its one-op conformance case on the inputs the backend fed
    it; with ``repro_dir`` the case is written there as a standalone repro (``repro``).
    Judging stops at the first departure unless ``all_nodes``. Missing inputs raise
    ``TraceInputError``, a graph that does not verify ``GraphVerifyError``; an oracle failure
    or a backend refusing the graph ``DiffError``.
    """
    from .._readers import one_line
    from ..backends.base import UnsupportedOp
    from ..ir.verify import verify_or_raise

    verify_or_raise(graph)
    inputs, params = dict(inputs or {}), dict(params or {})
    missing = missing_feeds(graph, inputs, params)
    if missing:
        raise TraceInputError(f"graph @{graph.name} needs {', '.join(missing)}")
    be, spec = _backend(backend)
    o64, oc = (_oracle_all(graph, inputs, params, f) for f in (True, False))
    promises = be.accumulation() if hasattr(be, "accumulation") else ()
    exposed = [n.id for n in graph.nodes if n.kind not in LEAVES]
    report = DiffReport(spec, graph, "exposed")
    feeds = (inputs, params)
    try:
        vals = _run(be, graph, exposed, inputs, params, options) if exposed else []
    except UnsupportedOp as e:
        raise DiffError(f"{spec} refuses @{graph.name}: {one_line(e)}") from e
    except Exception as e:  # noqa: BLE001 - any failure: fall back to prefixes
        report.mode = "bisect"
        report.note = (f"the graph with every node exposed fails on {spec} "
                       f"({type(e).__name__}: {one_line(e)[:200]}); bisected over prefixes")
        _bisect(report, be, graph, feeds, o64, oc, exposed, promises, options)
        _write_repro(report, repro_dir)
        return report
    values = _feed_values(graph, inputs, params)
    values.update(zip(exposed, vals))
    for nid in exposed:
        node = graph.nodes[nid]
        d, case = judge_node(node, [values[i] for i in node.inputs], values[nid],
                             np.shape(oc[nid]), promises)
        report.nodes.append(d)
        if not d.ok and report.first is None:
            report.first, report.case = d, case
            if not all_nodes:
                break
    if report.first is None and _plain_departs(be, graph, feeds, o64, oc, options):
        report.mode = "bisect"
        report.note = ("every exposed node agrees, but the plain graph's outputs depart "
                       "(a fault where nodes are fused?); bisected over prefixes")
        _bisect(report, be, graph, feeds, o64, oc, exposed, promises, options)
    _write_repro(report, repro_dir)
    return report


def _plain_departs(be, graph, feeds, o64, oc, options) -> bool:
    """Whether the graph as written (fusion free) fails or departs at an output."""
    outs = [o for o in graph.outputs if graph.nodes[o].kind not in LEAVES]
    if not outs:
        return False
    try:
        got = _run(be, graph, outs, *feeds, options)
    except Exception:  # noqa: BLE001 - a failing plain run departs
        return True
    return any(not chain_judge(graph, o, v, o64, oc).ok for o, v in zip(outs, got))
