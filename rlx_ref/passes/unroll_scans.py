"""Scan unrolling (RLX's ``maybe_unroll_scans`` + ``maybe_unroll_scans_budget`` + ``LowerScan``).

A Scan is replaced by ``length`` inlined copies of its body when it is short,
``length <= max_length`` (``CompileOptions.scan_unroll_max_length``; 0 turns this rule off),
or small, ``length × body nodes <= budget`` (``scan_unroll_budget``, RLX's fixed 4096; 0 off).
A backend that does not claim Scan gets every Scan unrolled (RLX's ``LowerScan``), since it
could not run one otherwise. In every case the Scan must keep a full trajectory or none
(``num_checkpoints`` 0 or ``length``: partial checkpoints need the loop), have
``length >= 1`` and static per-step shapes; any other Scan stays for legalization to judge.

Step t binds ``[carry, bcasts..., Reshape(Narrow(x, 0, t, 1)) for each xs]`` to the body's
Inputs; its output is the next carry. With ``save_trajectory`` the carries become
``Reshape([1, *carry])`` rows joined by one ``Concat`` on axis 0, as RLX emits them. The ops
are the body's own, so the result is the Scan's, bit for bit.
"""
from __future__ import annotations

from ..ir.graph import Graph
from ._inline import inline_body
from ._rewrite import PassLog, Rebuilder, SupportTable, graph_pass, with_bodies

DEFAULT_MAX_LENGTH = 64         # RLX CompileOptions::scan_unroll_max_length default
DEFAULT_BUDGET = 4096           # RLX maybe_unroll_scans_budget(g, 4096)


def unrollable(node, graph: Graph) -> bool:
    """Full or no trajectory, at least one step, static operand shapes."""
    a = node.attrs
    return (a.length >= 1 and a.num_checkpoints in (0, a.length)
            and all(graph.shape(i).is_static for i in node.inputs))


def wanted(node, max_length: int, budget: int) -> bool:
    """RLX's two rules: short (``length <= max_length``) or small (``length × body nodes
    <= budget``)."""
    n = node.attrs.length
    return (max_length > 0 and n <= max_length) or \
        (budget > 0 and n * len(node.attrs.body.nodes) <= budget)


def unroll_one(g: Graph, a, ins: list) -> int:
    """Append the unrolled steps of a Scan with payload ``a`` and operands ``ins``."""
    init, nb = ins[0], a.num_bcast
    bcasts, xs = ins[1:1 + nb], ins[1 + nb:]
    carry, rows = init, []
    for t in range(a.length):
        steps = [g.reshape(g.op("Narrow", (x,), axis=0, start=t, len=1),
                           g.shape(x).dims[1:]) for x in xs]
        carry = inline_body(g, a.body, [carry, *bcasts, *steps])[0]
        if a.save_trajectory:
            rows.append(carry)
    if not a.save_trajectory:
        return carry
    row = (1, *g.shape(init).dims)
    return g.concat([g.reshape(r, row) for r in rows], 0)


def _unroll(graph: Graph, max_length: int, budget: int, force: bool, log) -> Graph:
    rb = Rebuilder(graph)
    changed = False
    for node in graph.nodes:
        op = with_bodies(node, lambda b: _unroll(b, max_length, budget, force, log))
        changed |= op is not node.op
        if node.kind == "Scan" and unrollable(node, graph) and \
                (force or wanted(node, max_length, budget)):
            start = len(rb.new.nodes)
            out = unroll_one(rb.new, op.attrs, rb.inputs(node))
            rb.new.nodes[out].name = node.name
            rb.map(node.id, out)
            changed = True
            if log is not None:
                made = sorted({n.kind for n in rb.new.nodes[start:]})
                log.rewrote("Scan", "unrolled into its body's ops")
                log.made(made, "Scan")
                log.note("unroll_scans", f"@{graph.name} %{node.id} Scan length "
                                         f"{node.attrs.length} -> {len(rb.new.nodes) - start} "
                                         "ops")
            continue
        rb.copy(node, op)
    return rb.finish() if changed else graph


@graph_pass("unroll_scans")
def unroll_scans(graph: Graph, max_length: int = DEFAULT_MAX_LENGTH,
                 budget: int = DEFAULT_BUDGET, supported: SupportTable | None = None,
                 log: PassLog | None = None) -> Graph:
    """``graph`` with every eligible Scan unrolled (every unrollable one when ``supported``
    is given and does not claim Scan)."""
    force = supported is not None and not supported.claims_kind("Scan")
    return _unroll(graph, max_length, budget, force, log)


__all__ = ["DEFAULT_BUDGET", "DEFAULT_MAX_LENGTH", "unroll_one", "unroll_scans",
           "unrollable", "wanted"]
