"""The oracle as a backend: every registered kind and dtype, run by the interpreter."""
from __future__ import annotations

from ..ir.graph import Graph
from ..ops.opdef import kinds
from ..runtime.session import CompiledGraph
from .base import ALL, Backend, Executable


class ReferenceExecutable(CompiledGraph, Executable):
    """A CompiledGraph (name-, shape- and dtype-checked I/O) on the numpy oracle."""

    def kernel_sources(self) -> dict:
        return {}


class ReferenceBackend(Backend):
    name = "reference"
    device = "numpy oracle (CPU)"

    def supported_ops(self) -> dict:
        return {k: ALL for k in kinds()}

    def compile(self, graph: Graph, options=None) -> ReferenceExecutable:
        from ..ir.verify import verify_or_raise

        verify_or_raise(graph)
        self.check_supported(graph)
        return ReferenceExecutable(graph)
