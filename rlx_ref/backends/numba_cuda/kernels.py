"""Generated kernel source → a module of Python functions that ``cuda.jit`` compiles.

A kernel's source defines plain functions (the kernel and, from the prelude, its
``cuda.jit(device=True)`` helpers). It is written to a file named by its hash (so
tracebacks and the simulator show real lines) and imported once per process. Every launch
is described by a ``Launch``: the kernel and the Numba argument types it is compiled
for. Launches compile eagerly for exactly those types, so the PTX check
(``ptx_check.py``), which compiles the same (kernel, types) pairs for a given compute
capability without a GPU, covers precisely what runs.
"""
from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..numba_cpu.kernels import LOAD_LOCK, load_source_module
from ..numba_cpu.kernels import cache_dir as cpu_cache_dir

# The simulator supports one launch at a time: a launch configures the shared kernel object
# in place (``kernel[blocks, threads]`` sets its grid on it) and installs its fake ``cuda``
# module as the one device functions see. Launches, configuration included, take turns.
_SIM_LAUNCH = threading.Lock()

# ``math`` is the simulator's IEEE twin under NUMBA_ENABLE_CUDASIM (see sim_math)
HEADER = ("import numpy as np\nfrom numba import cuda\n"
          "from rlx_ref.backends.numba_cuda.device import kernel_math\n"
          "math = kernel_math()\n")


def cache_dir() -> Path:
    return cpu_cache_dir("numba_cuda")


class Kernel:
    """One generated kernel: its name, full source and the plain Python function."""

    def __init__(self, name: str, source: str, module):
        self.name, self.source, self.module = name, source, module
        self.pyfunc = getattr(module, name)
        self._compiled: dict = {}

    def compiled(self, argtypes: tuple):
        """The ``cuda.jit`` kernel compiled for ``argtypes`` (once per process)."""
        fn = self._compiled.get(argtypes)
        if fn is None:
            from numba import types

            from .device import import_cuda

            with LOAD_LOCK:             # two threads' first launches compile it once
                fn = self._compiled.get(argtypes)
                if fn is None:
                    fn = import_cuda().jit(types.void(*argtypes))(self.pyfunc)
                    self._compiled[argtypes] = fn
        return fn


_LOADED: dict = {}


def compile_kernel(name: str, body: str) -> Kernel:
    """Load ``body`` (defining a function called ``name``); identical sources share one."""
    source = HEADER + body.strip() + "\n"
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    key = (name, digest)
    kernel = _LOADED.get(key)
    if kernel is not None:
        return kernel
    with LOAD_LOCK:                     # one module per source, also across threads
        if key not in _LOADED:
            module = load_source_module(f"rlx_ref_cuda_{name}_{digest}", source,
                                        cache_dir(), f"cuda_{name}_{digest}.py")
            _LOADED[key] = Kernel(name, source, module)
        return _LOADED[key]


_SIM: list = []      # [simulator_active()], known once numba.cuda has been imported


def _simulated() -> bool:
    if not _SIM:
        from .device import simulator_active

        _SIM.append(simulator_active())
    return _SIM[0]


def array_type(dtype):
    """The Numba type of a flat C-contiguous device array of numpy ``dtype``."""
    from numba import from_dtype, types

    return types.Array(from_dtype(np.dtype(dtype)), 1, "C")


def int_type():
    from numba import types

    return types.int64


def float_type():
    from numba import types

    return types.float64


@dataclass(frozen=True)
class Launch:
    """A kernel and the argument types it is launched with (what the PTX check compiles)."""

    kernel: Kernel
    argtypes: tuple

    def __call__(self, blocks: int, threads: int, *args) -> None:
        fn = self.kernel.compiled(self.argtypes)
        if _simulated():
            with _SIM_LAUNCH:
                fn[blocks, threads](*args)
        else:
            fn[blocks, threads](*args)

    def key(self) -> tuple:
        return (self.kernel.name, self.kernel.source, tuple(str(t) for t in self.argtypes))
