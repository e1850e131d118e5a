"""What every pass shares: rebuilding a graph (append-only SSA, ids remapped), recursing
into nested bodies, the backend's claim table, the pass log, and verify-after-pass."""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

from ..ir.dtype import DType
from ..ir.graph import Graph, Op
from ..ir.verify import GraphVerifyError, verify
from ..env_registry import flag

ALL = "all"      # same value as rlx_ref.backends.base.ALL


# ── rebuilding ─────────────────────────────────────────────────────────────

class Rebuilder:
    """Copies ``old`` into a fresh Graph node by node; ``ids`` maps old ids to new ones.

    A pass copies the nodes it keeps (``copy``), appends replacements with the builder
    methods of ``new`` and records them with ``map``; ``finish`` remaps the outputs.
    """

    def __init__(self, old: Graph):
        self.old = old
        self.new = Graph(old.name)
        self.ids: dict[int, int] = {}

    def inputs(self, node) -> list[int]:
        return [self.ids[i] for i in node.inputs]

    def copy(self, node, op: Op | None = None) -> int:
        """Append ``node`` (optionally with a new ``op``) reading the remapped operands."""
        nid = self.new.add_node(op or node.op, self.inputs(node), node.shape, node.name,
                                node.origin)
        self.ids[node.id] = nid
        return nid

    def map(self, old_id: int, new_id: int) -> int:
        self.ids[old_id] = new_id
        return new_id

    def finish(self) -> Graph:
        self.new.set_outputs([self.ids[o] for o in self.old.outputs])
        return self.new


def with_bodies(node, fn) -> Op:
    """``node.op`` with ``fn`` applied to every nested body Graph in its payload (the same
    Op object when no body changed)."""
    a = node.attrs
    if a is None or not dataclasses.is_dataclass(a):
        return node.op
    changes = {}
    for f in dataclasses.fields(a):
        value = getattr(a, f.name)
        if isinstance(value, Graph):
            new = fn(value)
            if new is not value:
                changes[f.name] = new
    if not changes:
        return node.op
    return Op(node.kind, dataclasses.replace(a, **changes))


def has_bodies(node) -> bool:
    a = node.attrs
    return a is not None and dataclasses.is_dataclass(a) and any(
        isinstance(getattr(a, f.name), Graph) for f in dataclasses.fields(a))


def walk_graphs(graph: Graph, path: str = ""):
    """``(graph, path)`` for ``graph`` and every nested body (path like ``@main/%3.body``)."""
    path = path or f"@{graph.name}"
    yield graph, path
    for n in graph.nodes:
        a = n.attrs
        if a is None or not dataclasses.is_dataclass(a):
            continue
        for f in dataclasses.fields(a):
            body = getattr(a, f.name)
            if isinstance(body, Graph):
                yield from walk_graphs(body, f"{path}/%{n.id}.{f.name}")


# ── what the backend claims ────────────────────────────────────────────────

class SupportTable:
    """A backend's declared op table (RLX's ``supported_ops``): ``{kind: dtypes | "all"}``.

    As in RLX's ``legalize_for_backend``, an empty or missing claim means "no claim":
    every kind is accepted.
    """

    def __init__(self, table=None, name: str = "backend"):
        self.name = name
        if table is None:
            table = {}
        if not isinstance(table, dict):
            table = {k: ALL for k in table}
        self.table = {k: (ALL if v == ALL else frozenset(_dtype(d) for d in v))
                      for k, v in table.items()}

    @classmethod
    def of(cls, backend=None, options=None) -> SupportTable:
        """The override in ``options.supported_ops`` if set, else the backend's table."""
        name = getattr(backend, "name", "backend")
        override = getattr(options, "supported_ops", None)
        if override is not None:
            return cls(override, name)
        if isinstance(backend, SupportTable):
            return backend
        if backend is None:
            return cls(None, name)
        # a kind claimed through its decomposition is not claimed natively: the decompose
        # pass rewrites it, and what it produces must be claimed natively
        paths = backend.paths() if hasattr(backend, "paths") else {}
        return cls({k: v for k, v in backend.supported_ops().items()
                    if paths.get(k) != "decomposed"}, name)

    @property
    def claims_all(self) -> bool:
        return not self.table

    @property
    def claim_count(self) -> int:
        return len(self.table)

    def claims_kind(self, kind: str) -> bool:
        return self.claims_all or kind in self.table

    def supports(self, kind: str, dtype: DType | None = None) -> bool:
        if self.claims_all:
            return True
        claimed = self.table.get(kind)
        if claimed is None:
            return False
        return claimed == ALL or dtype is None or dtype in claimed

    def supports_node(self, node) -> bool:
        return self.supports(node.kind, node.shape.dtype)

    def dtypes_text(self, kind: str) -> str:
        claimed = self.table.get(kind)
        if claimed is None:
            return "not claimed"
        if claimed == ALL:
            return "all dtypes"
        return ", ".join(sorted(str(d) for d in claimed)) or "no dtype"


def _dtype(d) -> DType:
    return d if isinstance(d, DType) else DType.parse(str(d))


# ── the log and verification ───────────────────────────────────────────────

@dataclass
class PassLog:
    """What the passes did: one line per event, plus why kinds left the graph."""

    lines: list = field(default_factory=list)
    rewritten: dict = field(default_factory=dict)      # kind -> how it left ("; "-joined)
    introduced: dict = field(default_factory=dict)     # kind -> kinds it was made from

    def note(self, pass_name: str, message: str) -> None:
        self.lines.append(f"[{pass_name}] {message}")

    def rewrote(self, kind: str, how: str) -> None:
        known = self.rewritten.get(kind)
        if known is None:
            self.rewritten[kind] = how
        elif how not in known.split("; "):
            self.rewritten[kind] = f"{known}; {how}"

    def made(self, kinds, source: str) -> None:
        for k in kinds:
            self.introduced.setdefault(k, set()).add(source)

    def format(self) -> str:
        return "\n".join(self.lines)


class PassVerifyError(GraphVerifyError):
    """The graph a pass produced fails verification (a bug in the pass)."""

    def __init__(self, pass_name: str, graph: Graph, errors: list):
        super().__init__(graph, errors)
        self.pass_name = pass_name
        self.args = (f"IR verifier failed after pass `{pass_name}`: {self.args[0]}",)


def verify_after(pass_name: str, graph: Graph) -> Graph:
    errors = verify(graph)
    if errors:
        raise PassVerifyError(pass_name, graph, errors)
    return graph


def graph_pass(name: str):
    """Mark a ``graph -> graph`` function as a pass named ``name``; when ``RLX_REF_VERIFY``
    is on, its result is verified (``PassVerifyError`` names the pass)."""
    def deco(fn):
        @functools.wraps(fn)
        def run(graph: Graph, *args, **kwargs) -> Graph:
            out = fn(graph, *args, **kwargs)
            if flag("RLX_REF_VERIFY"):
                verify_after(name, out)
            return out
        run.pass_name = name
        return run
    return deco
