"""What RLX's pattern-fusion passes share: use counts, the match record, the gate a
fused node must pass (the backend claims its kind natively, and the kind's own shape
rule reproduces the shape of the value it replaces), and the rebuild that swaps each
match for its nodes.

A pass finds ``Match`` records in one scan (as RLX's passes do), then rebuilds the graph:
the nodes a match absorbs are dropped, and at its ``anchor`` (the pattern node RLX emits
the fused node in place of) the match's ``steps`` are appended. Operands declared after
the anchor are copied early (RLX's ``ensure_mapped``), so a late bias Param still fuses.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..ir.graph import Graph, Op
from ..ir.shape import Shape
from ..ops.opdef import get
from ._rewrite import PassLog, Rebuilder, SupportTable, graph_pass, with_bodies

# RLX's fused kernels are f32; the fused kinds here take f32 and f64 (their C2)
FUSED_DTYPES = ("f32", "f64")


@dataclass(frozen=True)
class New:
    """An operand of a step that is an earlier step of the same match."""

    index: int


@dataclass
class Match:
    """One rewrite: ``steps`` ``(op, operands, shape)`` (operands: old ids or ``New``)
    replace ``anchor`` and ``absorbed``; every reader of them reads the last step."""

    anchor: int
    absorbed: tuple
    steps: list = field(default_factory=list)

    @property
    def kind(self) -> str:
        return self.steps[-1][0].kind

    def members(self) -> set:
        return {self.anchor, *self.absorbed}


def use_counts(graph: Graph) -> Counter:
    """How often each value is read: operand slots plus graph outputs (a graph output is
    a use, so a pattern never absorbs a value the caller reads)."""
    uses = Counter(i for n in graph.nodes for i in n.inputs)
    uses.update(graph.outputs)
    return uses


def sole_reader(graph: Graph, uses: Counter, nid: int):
    """The one node that reads value ``nid``, or None when anything else reads it (another
    node or the graph's outputs: ``uses`` comes from ``use_counts``)."""
    users = graph.users(nid)
    return graph.nodes[users[0]] if uses[nid] == 1 and len(users) == 1 else None


def make_op(kind: str, **fields) -> Op:
    d = get(kind)
    return Op(kind, d.make_attrs(**fields) if (fields or d.payload != "unit") else None)


def fits(graph: Graph, op: Op, operands, want: Shape) -> bool:
    """Does ``op`` over ``operands`` pass its kind's checks and infer exactly ``want``?"""
    d = get(op.kind)
    shapes = [graph.shape(i) for i in operands]
    try:
        d.check(shapes, op.attrs, want)
        got = d.infer_shape(shapes, op.attrs)
    except Exception:  # noqa: BLE001  (any rule the candidate breaks declines the fusion)
        return False
    return got is None or got == want


def gated(graph: Graph, table: SupportTable, op: Op, operands, want: Shape) -> bool:
    """The backend claims ``op.kind`` natively for ``want``'s dtype and the node fits."""
    return (str(want.dtype) in FUSED_DTYPES and table.supports(op.kind, want.dtype)
            and fits(graph, op, operands, want))


def _ensure(rb: Rebuilder, graph: Graph, ids) -> None:
    """Copy the not-yet-copied operands (and theirs) now; an operand another match
    replaces is emitted as that match."""
    for i in ids:
        if i in rb.ids:
            continue
        m = rb.pending.get(i)
        if m is not None:
            _place(rb, graph, m)
            continue
        _ensure(rb, graph, graph.nodes[i].inputs)
        rb.copy(graph.nodes[i], _bodies(graph.nodes[i], rb))


def _bodies(node, rb):
    fn = getattr(rb, "body_fn", None)
    return with_bodies(node, fn) if fn is not None else node.op


def _place(rb: Rebuilder, graph: Graph, m: Match) -> int:
    """Append ``m``'s steps and map its members to the last one."""
    made: list = []
    for op, operands, shape in m.steps:
        _ensure(rb, graph, [i for i in operands if not isinstance(i, New)])
        ins = [made[i.index] if isinstance(i, New) else rb.ids[i] for i in operands]
        made.append(rb.new.add_node(op, ins, shape, None, graph.nodes[m.anchor].origin))
    for i in m.members():
        rb.map(i, made[-1])
    _note(rb.log, rb.pass_name, graph, m)
    return made[-1]


def _note(log: PassLog | None, name: str, graph: Graph, m: Match) -> None:
    if log is None:
        return
    kinds = sorted({graph.nodes[i].kind for i in m.members()})
    for k in kinds:
        log.made([m.kind], k)
        log.rewrote(k, f"fused into {m.kind}")
    log.note(name, f"@{graph.name} %{m.anchor} -> {m.kind} ({len(m.members())} nodes: "
                   f"{', '.join(kinds)})")


def rebuild(graph: Graph, matches: list, body_fn=None, log: PassLog | None = None,
            name: str = "") -> Graph:
    """``graph`` with every match replaced by its steps (the same object without any)."""
    by_anchor = {m.anchor: m for m in matches}
    gone = {i for m in matches for i in m.absorbed}
    rb = Rebuilder(graph)
    rb.body_fn = body_fn
    rb.pending = {i: m for m in matches for i in m.members()}
    rb.log, rb.pass_name = log, name
    changed = bool(matches)
    for node in graph.nodes:
        if node.id in rb.ids:
            continue                    # copied early as a fused node's operand
        m = by_anchor.get(node.id)
        if m is not None:
            _place(rb, graph, m)
            continue
        if node.id in gone:
            continue                    # lives inside its match's fused node
        op = _bodies(node, rb)
        changed |= op is not node.op
        rb.copy(node, op)
    return rb.finish() if changed else graph


def fusion_pass(name: str):
    """Make ``find(graph, table) -> [Match]`` a pass named ``name``: ``pass(graph,
    supported=None, log=None)``, applied to nested bodies too."""
    def deco(find):
        def run(graph: Graph, supported: SupportTable | None = None,
                log: PassLog | None = None) -> Graph:
            table = supported if supported is not None else SupportTable(None)

            def walk(g: Graph) -> Graph:
                return rebuild(g, _disjoint(find(g, table)), walk, log, name)
            return walk(graph)
        run.__name__ = find.__name__
        run.__doc__ = find.__doc__
        return graph_pass(name)(run)
    return deco


def _disjoint(matches: list) -> list:
    """Keep the first of any matches sharing a node (RLX's ``fused_away`` bookkeeping)."""
    taken: set = set()
    kept = []
    for m in matches:
        if m.members() & taken:
            continue
        taken |= m.members()
        kept.append(m)
    return kept


__all__ = ["Match", "New", "fits", "fusion_pass", "gated", "make_op", "rebuild", "use_counts"]
