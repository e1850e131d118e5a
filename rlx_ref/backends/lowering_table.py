"""The lowering table a kernel backend declares: op kind → lowering function + dtypes.

Each backend owns one ``LoweringTable``; its family files register
``@table.lowers("Kind", dtypes=..., path=..., reason=...)`` functions. The backend's
declared op table (RLX's ``SUPPORTED_OPS``), its per-kind path (native / host / decomposed /
rewritten) and the reasons shown in the dispatch and coverage reports all come from it, so
what a backend claims is exactly what it registered.
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


class LoweringTable:
    """Kind → Lowering for one backend; family modules are imported on first use."""

    def __init__(self, backend: str, package: str, families: tuple):
        self.backend, self.package, self.families = backend, package, families
        self.entries: dict[str, Lowering] = {}
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


def register_leaves(table: LoweringTable) -> None:
    """Input/Param/Constant are bound by the plan, never lowered; declare them for all."""
    def leaf(node, ins, ctx):
        raise AssertionError("leaves are bound by the plan, not lowered")

    for kind in ("Input", "Param", "Constant"):
        table.lowers(kind, tuple(DType))(leaf)
