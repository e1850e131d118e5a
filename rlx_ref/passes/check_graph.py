"""``check_graph``: RLX's static graph checker (``rlx check``) over rlx_ref's passes.

Four axes, none of which runs the graph, each with RLX's severity:

* ``shape`` (error) — the verifier's findings: the graph computes a different function;
* ``unsupported-op`` (error) / ``decomposed`` (note) — against ``backend``: nodes it cannot
  run after control-flow lowering, Scan unrolling and decomposition as ``options`` set them
  (with legalization's fix hint), and kinds it runs only through a rewrite;
* ``missed-fusion`` (warning) — elementwise chains MarkElementwiseRegions would fuse, left
  as separate kernels because ``backend`` does not claim ElementwiseRegion for them;
* ``numeric`` (warning) — ``lint_numerics``: provable NaN/inf constants and folds.

The dispatch and fusion axes need a ``backend`` (a Backend, a registered name, or None for
none); a graph that fails verification reports only its shape errors, since the other
axes would be reasoning about a graph that is not well formed.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from ..ir.graph import Graph
from ..ir.verify import verify
from ..runtime.options import CompileOptions, FusionOptions
from ._rewrite import PassLog, SupportTable
from .decompose import decompose
from .fuse_elementwise import find_chains
from .legalize import find_unsupported
from .lower_control_flow import lower_control_flow
from .numeric_lint import lint_numerics
from .unroll_scans import unroll_scans

SEVERITIES = ("error", "warning", "note")


@dataclass(frozen=True)
class Diagnostic:
    """One finding (RLX's ``Diagnostic``): ``code`` is a stable kebab-case slug."""

    severity: str
    code: str
    message: str
    node: int | None = None
    context: str | None = None
    hint: str | None = None
    backend: str | None = None


@dataclass
class CheckReport:
    """Every finding about one graph (RLX's ``CheckReport``)."""

    graph: str
    nodes: int
    diagnostics: list = field(default_factory=list)

    def count(self, severity: str) -> int:
        return sum(d.severity == severity for d in self.diagnostics)

    def errors(self) -> int:
        return self.count("error")

    def warnings(self) -> int:
        return self.count("warning")

    def has_errors(self) -> bool:
        return self.errors() > 0

    def codes(self) -> list:
        return [d.code for d in self.diagnostics]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    def render(self) -> str:
        """RLX's rustc-style text: findings most severe first, with ``-->`` and ``help``."""
        s = "" if self.nodes == 1 else "s"
        lines = [f"rlx check — graph \"{self.graph}\" ({self.nodes} node{s})", ""]
        if not self.diagnostics:
            lines.append("  no findings.")
        for d in sorted(self.diagnostics, key=lambda d: SEVERITIES.index(d.severity)):
            on = f" on {d.backend}" if d.backend else ""
            lines.append(f"{d.severity}[{d.code}]{on}: {d.message}")
            if d.node is not None:
                ctx = d.context if d.context and d.context != f"%{d.node}" else None
                lines.append(f"  --> %{d.node}" + (f" ({ctx})" if ctx else ""))
            if d.hint:
                lines.append(f"  = help: {d.hint}")
        return "\n".join(lines)

    __str__ = render


def _backend(backend):
    if isinstance(backend, str):
        from ..backends.registry import get_backend

        return get_backend(backend)
    return backend


def _dispatch(graph: Graph, table: SupportTable, options: CompileOptions, out: list) -> Graph:
    log = PassLog()
    g = lower_control_flow(graph, table, options.lower_control_flow, log=log)
    g = unroll_scans(g, options.scan_unroll_max_length, options.scan_unroll_budget, table,
                     log=log)
    g = decompose(g, table, log=log)
    for o in find_unsupported(g, table, log):
        out.append(Diagnostic("error", "unsupported-op", f"{o.kind} ({o.shape}) in {o.graph} "
                              "cannot run", o.node, None, o.hint, table.name))
    for kind, how in sorted(log.rewritten.items()):
        out.append(Diagnostic("note", "decomposed", f"{kind} runs as other kinds: {how}",
                              backend=table.name))
    return g


def _fusion(g: Graph, table: SupportTable, fusion: FusionOptions, out: list) -> None:
    if fusion.enable and table.claims_kind("ElementwiseRegion"):
        missed = [c for c in find_chains(g, fusion, SupportTable(None))
                  if not all(table.supports("ElementwiseRegion", g.shape(m).dtype)
                             for m in c.members)]
    else:
        missed = find_chains(g, fusion, SupportTable(None))
    for c in missed:
        ids = ", ".join(f"%{m}" for m in c.members)
        out.append(Diagnostic(
            "warning", "missed-fusion", f"{len(c.members)} elementwise ops ({ids}) could run "
            "as one ElementwiseRegion but run as separate kernels", c.members[-1], None,
            f"declare ElementwiseRegion for these dtypes in {table.name}'s supported_ops(), "
            "or enable fusion_opts", table.name))


def check_graph(graph: Graph, backend=None, options=None) -> CheckReport:
    """Every static finding about ``graph``, against ``backend`` when one is given."""
    options = CompileOptions.coerce(options)
    report = CheckReport(graph.name, len(graph))
    out = report.diagnostics
    errors = verify(graph)
    for e in errors:
        out.append(Diagnostic("error", "shape", e.message, e.node,
                              graph.nodes[e.node].name if e.node is not None
                              and e.node < len(graph) else None))
    if errors:
        return report
    backend = _backend(backend)
    if backend is not None:
        table = SupportTable.of(backend, options)
        lowered = _dispatch(graph, table, options, out)
        _fusion(lowered, table, options.fusion_opts, out)
    for lint in lint_numerics(graph):
        out.append(Diagnostic("warning", "numeric", f"{lint.kind}: {lint.reason}", lint.node,
                              lint.label, lint.fix))
    return report


__all__ = ["CheckReport", "Diagnostic", "check_graph"]
