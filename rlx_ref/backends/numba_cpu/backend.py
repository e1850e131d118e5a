"""``numba-cpu``: the backend object (availability, declared op table, compile)."""
from __future__ import annotations

from ...ir.graph import Graph
from ..base import Backend


class NumbaCpuBackend(Backend):
    name = "numba-cpu"
    device = "CPU (Numba njit)"

    def availability(self) -> tuple[bool, str]:
        try:
            import numba  # noqa: F401
        except ImportError as e:
            return False, f"numba is not installed ({e}); pip install numba"
        return True, ""

    def _table(self):
        from .lowering import TABLE

        return TABLE

    def supported_ops(self) -> dict:
        return self._table().supported_ops()

    def paths(self) -> dict:
        return self._table().paths()

    def path_reasons(self) -> dict:
        return self._table().path_reasons()

    def compile(self, graph: Graph, options=None):
        """Run the compile pipeline (fold, DCE, decompose, legalize, fuse), then plan."""
        from ...passes import compile_pipeline
        from .executable import NumbaExecutable

        lowered, report = compile_pipeline(graph, self, options)
        exe = NumbaExecutable(lowered, options)
        exe.dispatch_report = report
        exe.source_graph = graph
        return exe
