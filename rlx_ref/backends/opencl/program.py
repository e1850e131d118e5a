"""One OpenCL program per compiled graph: every kernel source its lowerings asked for,
behind the C prelude, built once.

Sources are deduplicated by kernel name (names carry a hash of their source), so a kernel
used by many nodes is compiled once. PyOpenCL keeps built binaries in its on-disk cache,
keyed by source and device, so a second process skips the compiler. Kernel handles are
resolved after the build; every bound use gets its own ``cl.Kernel`` so arguments set once
per plan stay set. ``RLX_REF_DUMP_KERNELS=DIR`` writes the program source into DIR.
"""
from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

from .cprelude import prelude


class KernelRef:
    """A kernel of a program that may not be built yet."""

    def __init__(self, builder: "ProgramBuilder", name: str):
        self.builder, self.name = builder, name

    def make(self):
        """A fresh ``cl.Kernel`` (its own argument slots) from the built program."""
        import pyopencl as cl

        return cl.Kernel(self.builder.built(), self.name)


class ProgramBuilder:
    """Collects kernel sources, then builds them as one program."""

    def __init__(self, context, device_info, options: tuple = ()):
        self.context, self.device = context, device_info
        self.options = list(options)
        self.sources: dict[str, str] = {}
        self._program = None

    def add(self, source: str, name: str) -> KernelRef:
        old = self.sources.get(name)
        if old is not None and old != source:
            raise ValueError(f"two different OpenCL kernels are both named {name!r}")
        if self._program is not None and old is None:
            raise RuntimeError(f"kernel {name!r} added after the program was built")
        self.sources[name] = source
        return KernelRef(self, name)

    def full_source(self) -> str:
        return prelude(self.device.fp64) + "\n" + "\n".join(self.sources.values())

    def built(self):
        """The built ``cl.Program`` (built on first use); build errors show the log."""
        if self._program is None:
            import pyopencl as cl

            src = self.full_source()
            dump = os.environ.get("RLX_REF_DUMP_KERNELS")
            if dump:
                Path(dump).mkdir(parents=True, exist_ok=True)
                digest = hashlib.sha256(src.encode()).hexdigest()[:16]
                (Path(dump) / f"opencl_{digest}.cl").write_text(src)
            key = (self.device.index, src, tuple(self.options))
            with _BUILD_LOCK:           # plans built by two threads share one build
                prog = _BUILT.get(key)
                if prog is None:
                    try:
                        prog = cl.Program(self.context, src).build(options=self.options)
                    except cl.RuntimeError as e:
                        raise RuntimeError(f"OpenCL build failed on {self.device.label}:"
                                           f"\n{e}") from e
                    _BUILT[key] = prog
            self._program = prog
        return self._program


# Programs built in this process, by device and source: graphs that need the same kernels
# (a model compiled twice, conformance cases of one op) share one build.
_BUILT: dict = {}
_BUILD_LOCK = threading.Lock()
