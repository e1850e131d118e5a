"""``numba-cpu``: the backend object (availability, declared op table, compile)."""
from __future__ import annotations

from ...ir.graph import Graph
from ..base import TableBackend


class NumbaCpuBackend(TableBackend):
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

    def compile(self, graph: Graph, options=None):
        """Run the compile pipeline (fold, DCE, decompose, legalize, fuse), then plan."""
        from .executable import NumbaExecutable

        return self._compile_with(graph, options, lambda g: NumbaExecutable(g, options))
