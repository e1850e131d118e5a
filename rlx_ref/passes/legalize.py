"""Legalization against the backend's declared op table (RLX's ``legalize_for_backend``
and ``format_legalize_error``).

Runs after decomposition. Every node (bodies included) whose kind, or whose output dtype,
the backend does not claim is an offender; if there is any, compilation fails with
``LegalizeError`` (an ``UnsupportedOp``) listing every one of them and how to fix it.
Nothing falls back silently. As in RLX, an empty claim accepts every kind.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..backends.base import UnsupportedOp, complex_cast_source
from ..ir.dtype import DType
from ..ir.graph import Graph
from ..ir.shape import Shape
from ._rewrite import PassLog, SupportTable, graph_pass, walk_graphs
from .decompose import DECOMPOSITIONS


@dataclass(frozen=True)
class Offender:
    """One node the backend cannot run: where it is, what it is, and how to fix it."""

    graph: str          # "@main", or "@main/%3.body" inside a body
    node: int
    kind: str
    shape: Shape
    hint: str

    @property
    def dtype(self) -> DType:
        return self.shape.dtype

    def line(self) -> str:
        return f"node %{self.node} in {self.graph}: {self.kind} ({self.shape}) — {self.hint}"

    __str__ = line


def _hint(node, table: SupportTable, log: PassLog | None) -> str:
    kind, dt = node.kind, node.shape.dtype
    name = table.name
    if table.claims_kind(kind):
        return (f"{name} claims {kind} for {table.dtypes_text(kind)} only; Cast the operands "
                f"to one of those, or declare {dt} for {kind}")
    sources = sorted((log.introduced.get(kind, set()) if log is not None else set()) - {kind})
    if sources:
        return (f"made by decomposing {', '.join(sources)}; declare {kind} in {name}'s "
                f"supported_ops(), or declare {', '.join(sources)} natively")
    if kind == "Custom":
        return ("Custom ops are registered by name (rlx_ref.register_custom), which gives "
                "them a shape rule and an oracle; to run one here, declare 'Custom' in "
                f"{name}'s supported_ops() with a kernel, or compile on 'reference'")
    d = DECOMPOSITIONS.get(kind)
    if d is not None:
        return (f"{kind} decomposes into {', '.join(d.produces) or 'its operand'} only for "
                f"static shapes; bind the dynamic dims, or declare {kind} in {name}'s "
                "supported_ops()")
    return (f"declare {kind} in {name}'s supported_ops() with a lowering, or rewrite the "
            "graph upstream to remove it")


def find_unsupported(graph: Graph, supported: SupportTable,
                     log: PassLog | None = None) -> list[Offender]:
    """Every node, in every body, whose kind/dtype ``supported`` does not claim."""
    out = []
    for g, path in walk_graphs(graph):
        for n in g.nodes:
            if not supported.supports_node(n):
                out.append(Offender(path, n.id, n.kind, n.shape, _hint(n, supported, log)))
            elif (bad := complex_cast_source(g, n, supported.supports)) is not None:
                out.append(Offender(path, n.id, n.kind, n.shape,
                                    f"a Cast from {bad} needs {supported.name} to claim Cast "
                                    f"for {bad} (its real-valued Cast kernels cannot read "
                                    "complex operands)"))
    return out


def format_legalize_error(backend_name: str, offenders: list) -> str:
    """RLX's ``format_legalize_error`` layout: a header, one line per node, the fix."""
    kinds = sorted({o.kind for o in offenders})
    lines = [f"rlx-ref: backend \"{backend_name}\" doesn't claim support for {len(offenders)} "
             f"node(s) of {len(kinds)} op kind(s) ({', '.join(kinds)}):"]
    lines += [f"  - {o.line()}" for o in offenders]
    lines.append("  Backend.supported_ops() must include each kind (and dtype), or rewrite "
                 "the graph upstream to remove them; nothing falls back silently.")
    return "\n".join(lines)


class LegalizeError(UnsupportedOp):
    """Compilation stopped: ``offenders`` lists every node the backend cannot run.

    ``report`` (set by ``compile_pipeline``) is the dispatch report; the message holds the
    legalize error and, when present, the report (as RLX's panic does).
    """

    def __init__(self, backend: str, offenders: list, report=None):
        super().__init__(backend, [o.line() for o in offenders])
        self.offenders = offenders
        self.attach_report(report)

    def attach_report(self, report) -> None:
        self.report = report
        msg = format_legalize_error(self.backend, self.offenders)
        if report is not None:
            msg += "\n" + report.format()
        self.args = (msg,)


@graph_pass("legalize")
def legalize(graph: Graph, supported: SupportTable, log: PassLog | None = None) -> Graph:
    """``graph`` unchanged when ``supported`` claims every node; else ``LegalizeError``."""
    offenders = find_unsupported(graph, supported, log)
    if offenders:
        raise LegalizeError(supported.name, offenders)
    if log is not None:
        log.note("legalize", f"every node is claimed by {supported.name}")
    return graph


__all__ = ["LegalizeError", "Offender", "find_unsupported", "format_legalize_error",
           "legalize"]
