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

    def compile(self, graph: Graph, options=None):
        from ...ir.verify import verify_or_raise
        from .executable import NumbaExecutable

        verify_or_raise(graph)
        self.check_supported(graph)
        return NumbaExecutable(graph, options)
