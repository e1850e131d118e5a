"""``opencl``: the backend object (device, availability, declared op table, compile)."""
from __future__ import annotations

from ...ir.dtype import DType
from ...ir.graph import Graph
from ..base import TableBackend


class OpenCLBackend(TableBackend):
    """Any OpenCL device: ``OpenCLBackend(device="P:D" | vendor | None, kernels=...)``.

    ``kernels`` picks the kernel style: ``"auto"`` (work-group kernels on GPUs and Oclgrind,
    runs per work-item on CPUs), ``"gpu"`` or ``"cpu"`` on any device (spec
    ``opencl[:DEVICE]/gpu-kernels``); None reads ``RLX_REF_OPENCL_KERNELS`` (unset: auto).
    The declared op table depends on the device: f64 only with cl_khr_fp64."""

    name = "opencl"
    fork_safe = False         # OpenCL runtimes start threads: workers are spawned

    def __init__(self, device: str | None = None, kernels: str | None = None):
        from .devices import kernel_style

        self.spec = device
        self.kernels = kernel_style(kernels)
        self._dev = None
        self._why = ""

    def _device(self):
        from .devices import DeviceError, context_for

        if self._dev is None and not self._why:
            try:
                self._dev = self._styled(context_for(self.spec))
            except DeviceError as e:      # says what and why already
                self._why = str(e)
            except ImportError as e:
                self._why = f"pyopencl is not installed ({e}); pip install 'pyopencl[pocl]'"
            except Exception as e:  # noqa: BLE001 - no platform, bad spec, driver error: say which
                self._why = f"{type(e).__name__}: {e}"
        return self._dev

    def _styled(self, entry):
        """``(DeviceInfo, context, queue)`` whose info carries this backend's kernel style
        (the context and queue stay shared with every backend on the device)."""
        import dataclasses

        info, context, queue = entry
        return dataclasses.replace(info, kernels=self.kernels), context, queue

    def availability(self) -> tuple[bool, str]:
        return (True, "") if self._device() is not None else (False, self._why)

    @property
    def device(self) -> str:
        dev = self._device()
        return dev[0].label if dev else f"opencl (unavailable: {self._why})"

    @property
    def emulated(self) -> bool:
        """PoCL on a CPU stands in for GPU hardware: its results get their own column."""
        dev = self._device()
        return bool(dev and dev[0].is_cpu and "portable computing" in dev[0].platform.lower())

    @property
    def device_types(self) -> tuple:
        """("gpu",) where the lowerings render work-group kernels (a GPU, Oclgrind, or the
        style forced), else ("cpu",)."""
        from ._reduce_c import gpu_style

        if self.kernels != "auto":          # known without a device
            return (self.kernels,)
        dev = self._device()
        return ("gpu",) if dev and gpu_style(dev[0]) else ("cpu",)

    def describe(self) -> dict:
        """The base record, plus ``kernels`` where the style is forced: such results get a
        report column of their own (``conformance/report.py``)."""
        out = super().describe()
        if self.kernels != "auto":
            out["kernels"] = self.kernels
        return out

    def _table(self):
        from .lowering import TABLE

        TABLE.load()
        return TABLE

    def supported_ops(self) -> dict:
        dev = self._device()
        fp64 = bool(dev and dev[0].fp64)
        return {k: (v if fp64 else frozenset(d for d in v if d is not DType.F64))
                for k, v in self._table().supported_ops().items()}

    def promise_holds(self, when: str) -> bool:
        """``cpu_fp64``: the device has cl_khr_fp64 and the lowerings render CPU-style."""
        if when != "cpu_fp64":
            return super().promise_holds(when)
        from . import _reduce_c as rc

        dev = self._device()
        return bool(dev and dev[0].fp64 and not rc.gpu_style(dev[0]))

    def compile(self, graph: Graph, options=None):
        """Run the compile pipeline (fold, DCE, decompose, legalize, fuse), then plan."""
        from .executable import OpenCLExecutable

        info, context, queue = self._device() or self._unavailable()
        return self._compile_with(graph, options, lambda g: OpenCLExecutable(
            g, info, context, queue, options))

    def _unavailable(self):
        from ..base import BackendUnavailable

        raise BackendUnavailable(f"opencl: {self._why}")
