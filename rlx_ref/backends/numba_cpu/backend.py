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

    def _lowerings(self) -> dict:
        from .lowering import LOWERINGS, load_families

        load_families()
        return LOWERINGS

    def supported_ops(self) -> dict:
        return {k: low.dtypes for k, low in self._lowerings().items()}

    def paths(self) -> dict:
        return {k: low.path for k, low in self._lowerings().items()}

    def path_reasons(self) -> dict:
        return {k: low.reason for k, low in self._lowerings().items() if low.reason}

    def compile(self, graph: Graph, options=None):
        """Run the compile pipeline (fold, DCE, decompose, legalize, fuse), then plan."""
        from ...passes import compile_pipeline
        from .executable import NumbaExecutable

        lowered, report = compile_pipeline(graph, self, options)
        exe = NumbaExecutable(lowered, options)
        exe.dispatch_report = report
        exe.source_graph = graph
        return exe
