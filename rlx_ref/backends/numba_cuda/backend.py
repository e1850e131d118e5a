"""``cuda``: the backend object (availability, declared op table, compile).

``NumbaCudaBackend(device="N")`` runs on GPU N (``cuda:N`` in the registry). With
``NUMBA_ENABLE_CUDASIM=1`` in the environment before numba.cuda is first imported, the
same kernels run in numba's CUDA simulator: the backend is then available everywhere but
``emulated`` (its conformance results go to their own report column).
"""
from __future__ import annotations

from ...ir.graph import Graph
from ..base import TableBackend


class NumbaCudaBackend(TableBackend):
    name = "cuda"
    device_types = ("gpu",)

    def __init__(self, device=None):
        try:
            self.index = int(device) if device not in (None, "") else 0
        except ValueError:
            raise ValueError(f"cuda device must be a GPU number (cuda:0, cuda:1, ...), got "
                             f"{device!r}") from None
        self._gpu = None

    @property
    def emulated(self) -> bool:
        from .device import simulator_active

        return simulator_active()

    @property
    def device(self) -> str:
        ok, _ = self.availability()
        if not ok:
            return f"CUDA GPU {self.index} (unavailable)"
        if self.emulated:
            return "numba CUDA simulator"
        from .device import import_cuda

        dev = import_cuda().gpus[self.index]
        cc = ".".join(map(str, dev.compute_capability))
        return f"{dev.name.decode() if isinstance(dev.name, bytes) else dev.name} (cc {cc})"

    def availability(self) -> tuple[bool, str]:
        from .device import import_cuda, simulator_active

        try:
            cuda = import_cuda()
        except ImportError as e:
            return False, str(e)
        if simulator_active():
            return True, ""
        try:
            if not cuda.is_available():
                return False, _no_gpu_reason(cuda)
            count = len(cuda.gpus)
        except Exception as e:  # noqa: BLE001 - any driver failure means "not here"
            return False, f"the CUDA driver failed to start: {str(e).strip()}"
        if self.index >= count:
            return False, f"there is no CUDA GPU {self.index} ({count} GPU(s) found)"
        return True, ""

    def _table(self):
        from .lowering import TABLE

        return TABLE

    def gpu(self):
        """The Device (selected on first use)."""
        if self._gpu is None:
            from .device import Device

            self._gpu = Device(self.index)
        return self._gpu

    def compile(self, graph: Graph, options=None):
        """Run the compile pipeline (fold, DCE, decompose, legalize, fuse), then plan."""
        from .executable import CudaExecutable

        return self._compile_with(graph, options,
                                  lambda g: CudaExecutable(g, self.gpu(), options, self.name))

    def ptx_check(self, graph: Graph, cc=(9, 0), options=None) -> dict:
        """Compile every kernel ``graph`` would launch to PTX for ``cc``; no GPU needed.

        Returns ``{"kernels": n, "cached": m}``; raises naming the kernel that fails."""
        from .ptx_check import ptx_check

        return ptx_check(self, graph, cc, options)


def _no_gpu_reason(cuda) -> str:
    from numba.cuda.cudadrv.driver import driver

    try:
        count = driver.get_device_count()
    except Exception as e:  # noqa: BLE001 - the driver's own words are the reason
        return f"no usable CUDA driver: {' '.join(str(e).split())}"
    if not count:
        return "the CUDA driver sees no GPU"
    return "no usable CUDA GPU (numba.cuda.is_available() is False)"
