"""One OpenCL program per compiled graph: every kernel source its lowerings asked for,
behind the C prelude, built once.

Sources are deduplicated by kernel name (names carry a hash of their source), so a kernel
used by many nodes is compiled once. PyOpenCL (or the driver: PoCL, whose cache rlx_ref
owns, see ``pocl_cache.py``) keeps built binaries on disk, keyed by source and device, so
a second process skips the compiler. Kernel handles are resolved after the build; every
bound use gets its own ``cl.Kernel`` so arguments set once per plan stay set. A cached
build that lacks a kernel (``INVALID_KERNEL_NAME``: a cache entry broken by a crashed
build) is rebuilt once under a fresh cache key, with a warning.
``RLX_REF_DUMP_KERNELS=DIR`` writes the program source into DIR.
"""
from __future__ import annotations

import hashlib
import threading
import warnings
from pathlib import Path

from ..._atomic import write_text
from ...env_registry import get
from ..faults import rewrite
from .cprelude import prelude
from .pocl_cache import owned_dir


class KernelRef:
    """A kernel of a program that may not be built yet."""

    def __init__(self, builder: "ProgramBuilder", name: str):
        self.builder, self.name = builder, name

    def make(self):
        """A fresh ``cl.Kernel`` (its own argument slots) from the built program."""
        import pyopencl as cl

        try:
            return cl.Kernel(self.builder.built(), self.name)
        except cl.Error as e:
            if not missing_kernel(e):
                raise
            return cl.Kernel(self.builder.rebuild(f"kernel {self.name}: {e}"), self.name)


def missing_kernel(err: Exception) -> bool:
    """Whether ``err`` says the built program has no kernel of the asked name."""
    import pyopencl as cl

    code = getattr(err, "code", None)
    return code == cl.status_code.INVALID_KERNEL_NAME or "INVALID_KERNEL_NAME" in str(err)


class ProgramBuilder:
    """Collects kernel sources, then builds them as one program."""

    def __init__(self, context, device_info, options: tuple = ()):
        self.context, self.device = context, device_info
        self.options = list(options)
        self.sources: dict[str, str] = {}
        self._program = None

    def add(self, source: str, name: str) -> KernelRef:
        source = rewrite("opencl", name, source)      # a planted fault's edit, if any
        old = self.sources.get(name)
        if old is not None and old != source:
            raise ValueError(f"two different OpenCL kernels are both named {name!r}")
        if self._program is not None and old is None:
            raise RuntimeError(f"kernel {name!r} added after the program was built")
        self.sources[name] = source
        return KernelRef(self, name)

    def full_source(self) -> str:
        head = rewrite("opencl", "prelude", prelude(self.device.fp64))
        return head + "\n" + "\n".join(self.sources.values())

    def built(self):
        """The built ``cl.Program`` (built on first use); build errors show the log."""
        if self._program is None:
            src = self.full_source()
            dump = get("RLX_REF_DUMP_KERNELS")
            if dump:
                digest = hashlib.sha256(src.encode()).hexdigest()[:16]
                write_text(Path(dump) / f"opencl_{digest}.cl", src)
            with _BUILD_LOCK:           # plans built by two threads share one build
                prog = _BUILT.get(self._key(src))
                if prog is None:
                    prog = self._build(src, self.options)
                    lacking = sorted(set(self.sources) - set(prog.kernel_names.split(";")))
                    if lacking:
                        prog = self._rebuild_with(src, f"the built program lacks {lacking[0]}")
                    _BUILT[self._key(src)] = prog
            self._program = prog
        return self._program

    def _key(self, src: str) -> tuple:
        return (self.device.index, src, tuple(self.options))

    def _build(self, src: str, options: list):
        import pyopencl as cl

        try:
            return cl.Program(self.context, src).build(options=options)
        except cl.RuntimeError as e:
            raise RuntimeError(f"OpenCL build failed on {self.device.label}:\n{e}") from e

    def rebuild(self, why: str):
        """Build the program again under a fresh cache key (its cached entry is broken)."""
        src = self.full_source()
        self._program = _BUILT[self._key(src)] = self._rebuild_with(src, why)
        return self._program

    def _rebuild_with(self, src: str, why: str):
        # a define the source never reads changes the driver's cache key, so the broken
        # entry is not read again; the fresh build lands under the new key
        if not _WARNED:
            _WARNED.append(why)
            where = owned_dir() or get("POCL_CACHE_DIR") or "the driver's cache"
            warnings.warn(f"OpenCL on {self.device.label}: a cached build was broken ({why}); "
                          f"rebuilt it uncached (clearing {where} removes the broken entry)",
                          RuntimeWarning, stacklevel=4)
        prog = self._build(src, self.options + [f"-DRLX_REF_REBUILD={len(_REBUILDS) + 1}"])
        _REBUILDS.append(why)
        lacking = sorted(set(self.sources) - set(prog.kernel_names.split(";")))
        if lacking:
            raise RuntimeError(f"OpenCL build on {self.device.label} lacks kernel "
                               f"{lacking[0]} even when rebuilt uncached ({why})")
        return prog


# Programs built in this process, by device and source: graphs that need the same kernels
# (a model compiled twice, conformance cases of one op) share one build.
_BUILT: dict = {}
_WARNED: list = []              # the first broken build's reason (warn once per process)
_REBUILDS: list = []            # every rebuild's reason, in order
_BUILD_LOCK = threading.Lock()
