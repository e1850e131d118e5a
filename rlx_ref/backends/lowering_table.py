"""The lowering table a kernel backend declares: op kind → lowering function + dtypes.

Each backend owns one ``LoweringTable``; its family files register
``@table.lowers("Kind", dtypes=..., path=..., reason=...)`` functions. The backend's
declared op table (RLX's ``SUPPORTED_OPS``), its per-kind path (native / host / decomposed /
rewritten) and the reasons shown in the dispatch and coverage reports all come from it, so
what a backend claims is exactly what it registered.

A lowering may also promise more accuracy than its op's generic contract:
``@table.accumulates("Cumsum", dtypes=..., in_="f64")`` stacked on its ``@lowers`` says
the kernel accumulates those dtypes in f64 and rounds once (``when``: only on devices
where the backend's ``promise_holds`` says so). The conformance comparator holds the kind
to the tighter bound (``accuracy.promised``).
"""
from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass
from typing import Callable

from ..ir.dtype import DType


@dataclass
class Lowering:
    kind: str
    fn: Callable
    dtypes: frozenset
    path: str = "native"        # native | host | decomposed | rewritten
    reason: str = ""


@dataclass(frozen=True)
class Accumulation:
    """A promise: ``kind`` (its ``ops`` sub-ops, or all) on ``dtypes`` accumulates in
    ``in_`` and rounds once to the output dtype."""
    kind: str
    dtypes: frozenset
    in_: str = "f64"
    ops: tuple = ()
    when: str = ""              # a device condition the backend checks; "" always
    reason: str = ""

    def covers(self, kind: str, op: str | None, dtype) -> bool:
        """Whether this promise applies to a node of ``kind`` (sub-op ``op``) on ``dtype``."""
        return kind == self.kind and dtype in self.dtypes and (
            not self.ops or op in self.ops)

    def to_json(self) -> dict:
        """What a results file records (``rlx-ref conformance --out``)."""
        return {"kind": self.kind, "ops": list(self.ops), "in": self.in_,
                "dtypes": sorted(str(d) for d in self.dtypes), "text": self.describe()}

    def describe(self) -> str:
        """``Reduce Sum/Mean accumulates in f64 (where cpu_fp64)``."""
        ops = f" {'/'.join(self.ops)}" if self.ops else ""
        when = f" (where {self.when})" if self.when else ""
        return f"{self.kind}{ops} accumulates in {self.in_}{when}"


ACC_DTYPES = ("f64",)           # accumulator precisions a promise may name


class LoweringTable:
    """Kind → Lowering for one backend; family modules are imported on first use."""

    def __init__(self, backend: str, package: str, families: tuple):
        self.backend, self.package, self.families = backend, package, families
        self.entries: dict[str, Lowering] = {}
        self.promises: list[Accumulation] = []
        self._loaded = False            # True once every family file is imported
        self._loading = threading.RLock()

    def lowers(self, kind: str, dtypes, path: str = "native", reason: str = ""):
        """Register the lowering of ``kind`` for node output dtypes ``dtypes``."""
        def deco(fn):
            if kind in self.entries:
                raise ValueError(f"{self.backend}: {kind} is lowered twice")
            self.entries[kind] = Lowering(kind, fn, frozenset(dtypes), path, reason)
            return fn
        return deco

    def decomposed(self, kinds, dtypes, reason: str):
        """Claim ``kinds`` through their registered decompositions (``passes/decompose*``):
        the compile pipeline rewrites them into kinds this table lowers natively, and the
        coverage and dispatch reports show the path with ``reason``."""
        for kind in kinds:
            self.lowers(kind, dtypes, path="decomposed", reason=reason)(None)

    def accumulates(self, kind: str, dtypes, in_: str = "f64", ops=(), when: str = "",
                    reason: str = ""):
        """Declare that the lowering of ``kind`` accumulates ``dtypes`` in ``in_`` (see the
        module docstring); stacks above (or below) that kind's ``@lowers``."""
        if in_ not in ACC_DTYPES:
            raise ValueError(f"{self.backend}: {kind} accumulates in {in_!r}; expected one "
                             f"of {ACC_DTYPES}")

        def deco(fn):
            self.promises.append(Accumulation(kind, frozenset(dtypes), in_, tuple(ops),
                                              when, reason))
            return fn
        return deco

    def load(self) -> dict:
        """Import every family file once; returns the entries. Another thread asking
        meanwhile waits for the whole table (a half-filled one would refuse kinds)."""
        if not self._loaded:
            with self._loading:         # re-entered by a family file asking for the table
                if not self._loaded:
                    for fam in self.families:
                        importlib.import_module(f"{self.package}.{fam}")
                    self._loaded = True
        return self.entries

    def __getitem__(self, kind: str) -> Lowering:
        return self.entries[kind]

    # what Backend's declaration methods return
    def supported_ops(self) -> dict:
        return {k: low.dtypes for k, low in self.load().items()}

    def paths(self) -> dict:
        return {k: low.path for k, low in self.load().items()}

    def path_reasons(self) -> dict:
        return {k: low.reason for k, low in self.load().items() if low.reason}

    def accumulation(self) -> list:
        """Every declared promise; one for a kind this table does not lower is an error."""
        entries = self.load()
        stray = sorted({p.kind for p in self.promises} - set(entries))
        if stray:
            raise ValueError(f"{self.backend}: accumulation promised for {stray}, which it "
                             f"does not lower; declare @accumulates beside the @lowers")
        return list(self.promises)


def register_leaves(table: LoweringTable) -> None:
    """Input/Param/Constant are bound by the plan, never lowered; declare them for all."""
    def leaf(node, ins, ctx):
        raise AssertionError("leaves are bound by the plan, not lowered")

    for kind in ("Input", "Param", "Constant"):
        table.lowers(kind, tuple(DType))(leaf)
