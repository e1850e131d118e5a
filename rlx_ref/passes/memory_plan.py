"""The memory plan: every intermediate of a compiled graph gets an offset in one arena.

An analysis, not a rewrite: ``plan_memory`` reads the nodes in run order and returns a
``MemoryPlan`` that an executable allocates once and slices.

- Liveness: a value lives from the step that writes it to its last reader. A view's
  readers keep its source alive (the view reads the source's bytes).
- Placement (greedy by size, as TFLite's arena planner): the largest tensors are placed
  first, each at the lowest offset that overlaps no tensor whose lifetime overlaps its
  own, so a buffer is reused once its last reader has run. A node's inputs are live at
  its own step, so a kernel never writes over what it reads.
- Offsets and sizes are multiples of ``alignment`` (RLX's ``arena_alignment``, 64 bytes).
- Views take no slot and no copy: Reshape, Cast to the same dtype, and Narrow on axis 0,
  when the input's layout is known to be C-contiguous (a leaf, a slot or another view;
  not a step that returns an array of its own making). The executable reshapes or slices
  the source instead of running a kernel.
- Outputs never live in the arena (the next run writes it again) and are never views, so
  no output aliases a caller's array, the arena or another output.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.graph import Graph

_LEAVES = ("Input", "Param", "Constant")


@dataclass(frozen=True)
class Slot:
    """One arena tensor: its byte range and lifetime (step indices, both inclusive)."""

    node: int
    offset: int
    nbytes: int
    first: int
    last: int


@dataclass(frozen=True)
class View:
    """A node whose value is its source's bytes: ``how`` is reshape, same or rows."""

    node: int
    source: int
    how: str
    start: int = 0          # rows: the first row (axis-0 index) kept
    length: int = 0         # rows: how many rows


@dataclass
class MemoryPlan:
    """Where each intermediate lives: ``slots`` in one arena, ``views`` of other values."""

    alignment: int
    arena_bytes: int = 0
    slots: dict = field(default_factory=dict)       # node id -> Slot
    views: dict = field(default_factory=dict)       # node id -> View
    outside: list = field(default_factory=list)     # planned elsewhere (outputs, returns)
    intermediate_bytes: int = 0                     # sum over slots and views, unaligned

    @property
    def reused(self) -> int:
        """Slots placed (partly) over bytes that a tensor dead before them used."""
        slots = list(self.slots.values())
        return sum(1 for s in slots if s.nbytes and any(
            t.last < s.first and t.offset < s.offset + s.nbytes and s.offset < t.offset +
            t.nbytes for t in slots))

    def to_dict(self) -> dict:
        """The report as numbers (what ``report`` prints)."""
        total = self.intermediate_bytes
        return {"arena_bytes": self.arena_bytes, "intermediate_bytes": total,
                "saved_bytes": total - self.arena_bytes,
                "ratio": round(self.arena_bytes / total, 4) if total else 0.0,
                "slots": len(self.slots), "reused": self.reused, "views": len(self.views),
                "outside": len(self.outside), "alignment": self.alignment}

    def report(self) -> str:
        """Peak arena bytes against the sum of the intermediates, reuse and views."""
        d = self.to_dict()
        return (f"memory plan: arena {d['arena_bytes']} B for {d['intermediate_bytes']} B of "
                f"intermediates (ratio {d['ratio']:.3f}, {d['saved_bytes']} B saved); "
                f"{d['slots']} slots, {d['reused']} reuse a dead tensor's bytes, "
                f"{d['views']} views, {d['outside']} outside the arena (outputs, host "
                f"results); {d['alignment']}-byte alignment")


def _align(n: int, a: int) -> int:
    return -(-n // a) * a


def view_of(node, graph: Graph) -> View | None:
    """The View ``node`` can be (ignoring layout), or None."""
    src = graph.nodes[node.inputs[0]] if node.inputs else None
    if node.kind == "Reshape":
        return View(node.id, src.id, "reshape")
    if node.kind == "Cast" and src.shape.dtype == node.shape.dtype:
        return View(node.id, src.id, "same")
    if node.kind == "Narrow" and node.attrs.axis == 0:
        return View(node.id, src.id, "rows", node.attrs.start, node.attrs.len)
    return None


def plan_memory(graph: Graph, steps: list, outside: set = frozenset(),
                alignment: int = 64, views: bool = True) -> MemoryPlan:
    """The plan for ``steps`` (the computed nodes, in run order). Nodes in ``outside``
    (steps that return arrays of their own) get no slot and their results are not taken
    as contiguous; graph outputs get no slot either."""
    plan = MemoryPlan(alignment)
    outs = set(graph.outputs)
    layout_known = {n.id for n in graph.nodes if n.kind in _LEAVES}
    root: dict = {}                     # view id -> the slot or value whose bytes it reads
    first: dict = {}
    for k, node in enumerate(steps):
        if node.id in outs or node.id in outside:
            plan.outside.append(node.id)
            if node.id not in outside:          # an output: a fresh C-contiguous array
                layout_known.add(node.id)
            continue
        v = view_of(node, graph) if views else None
        if v is not None and v.source in layout_known:
            plan.views[node.id] = v
            root[node.id] = root.get(v.source, v.source)
        else:
            first[node.id] = k
        layout_known.add(node.id)
        plan.intermediate_bytes += node.shape.size_bytes
    last = dict(first)
    for k, node in enumerate(steps):
        for i in node.inputs:
            r = root.get(i, i)
            if r in last:
                last[r] = max(last[r], k)
    placed: list = []
    nodes = graph.nodes
    order = sorted(first, key=lambda i: (-nodes[i].shape.size_bytes, first[i], i))
    for i in order:
        size = _align(nodes[i].shape.size_bytes, alignment)
        off = 0
        if size:
            busy = sorted((s.offset, s.offset + _align(s.nbytes, alignment)) for s in placed
                          if s.first <= last[i] and first[i] <= s.last and s.nbytes)
            for lo, hi in busy:
                if off + size <= lo:
                    break
                off = max(off, hi)
        slot = Slot(i, off, nodes[i].shape.size_bytes, first[i], last[i])
        placed.append(slot)
        plan.arena_bytes = max(plan.arena_bytes, off + size)
    plan.slots = {s.node: s for s in sorted(placed, key=lambda s: first[s.node])}
    return plan


__all__ = ["MemoryPlan", "Slot", "View", "plan_memory", "view_of"]
