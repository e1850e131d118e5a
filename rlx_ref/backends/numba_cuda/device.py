"""The CUDA side of the backend: importing numba.cuda, launch shapes, transfers.

Everything that touches the driver goes through here, so the rest of the backend can
render and lower kernels on a machine without a GPU (the PTX check does exactly that).
Under the simulator (``NUMBA_ENABLE_CUDASIM=1``, read when numba.cuda is first imported)
every CUDA thread is a Python thread, so launches use one warp and at most two blocks:
grid-stride loops make every kernel correct for any launch shape.
"""
from __future__ import annotations

import contextlib
import math

import numpy as np

from ...ir.dtype import DType
from ...env_registry import flag

# 16-bit floats live on the device as their raw bits: numba has no bf16 arrays, and
# one representation for both keeps the kernels' conversion helpers identical.
BITS16 = (DType.F16, DType.BF16)
THREADS = 256                 # threads per block on hardware (8 warps)
MAX_BLOCKS = 65535 * 4        # grid-stride loops cover the rest
SIM_THREADS = 32
SIM_MAX_BLOCKS = 2
ERR_CLEAR = 2**31 - 1         # the error word's "no error" value (atomic.min keeps the first)


def simulator_requested() -> bool:
    return flag("NUMBA_ENABLE_CUDASIM")


def import_cuda():
    """``numba.cuda`` (ImportError with the install hint when numba-cuda is missing)."""
    try:
        from numba import cuda
    except ImportError as e:
        raise ImportError(f"numba-cuda is not installed ({e}); pip install "
                          "'numba-cuda[cu13]'") from None
    if not hasattr(cuda, "jit"):
        raise ImportError("numba.cuda has no jit: install numba-cuda (pip install "
                          "'numba-cuda[cu13]')")
    return cuda


def simulator_active() -> bool:
    """True when numba.cuda is the simulator (decided at its first import)."""
    try:
        cuda = import_cuda()
    except ImportError:
        return False
    del cuda
    from numba.cuda import config

    return bool(getattr(config, "ENABLE_CUDASIM", False))


def kernel_math():
    """The ``math`` module kernels see: the real one, or the simulator's IEEE shim."""
    if simulator_active():
        from . import sim_math

        return sim_math
    return math


def launch_shape(n: int, threads: int | None = None) -> tuple[int, int]:
    """(blocks, threads per block) for a grid-stride loop over ``n`` items."""
    if simulator_active():
        t = SIM_THREADS if threads is None else min(threads, SIM_THREADS)
        return max(1, min(-(-n // t), SIM_MAX_BLOCKS)), t
    t = THREADS if threads is None else threads
    return max(1, min(-(-n // t), MAX_BLOCKS)), t


def rows_shape(rows: int, threads: int) -> tuple[int, int]:
    """(blocks, threads) for kernels that give each row one block (a block-stride loop)."""
    if simulator_active():
        return max(1, min(rows, SIM_MAX_BLOCKS)), min(threads, SIM_THREADS)
    return max(1, min(rows, MAX_BLOCKS)), threads


def block_threads() -> int:
    """Threads of a per-row block (a power of two: the tree reductions halve it)."""
    return SIM_THREADS if simulator_active() else THREADS


def device_dtype(dt: DType) -> np.dtype:
    """The numpy dtype of ``dt``'s device buffer (16-bit floats as uint16 bits)."""
    return np.dtype(np.uint16) if dt in BITS16 else dt.np


def host_to_device_layout(x: np.ndarray, dt: DType) -> np.ndarray:
    """``x`` flat and C-contiguous, 16-bit floats viewed as their bits."""
    x = np.ascontiguousarray(x, dt.np).reshape(-1)
    return x.view(np.uint16) if dt in BITS16 else x


def device_to_host_layout(flat: np.ndarray, dt: DType, dims) -> np.ndarray:
    """The inverse of ``host_to_device_layout``: the array in its dtype and shape."""
    if dt in BITS16:
        flat = flat.view(dt.np)
    return flat.reshape(tuple(dims))


class Device:
    """One CUDA device (or the simulator): allocation and transfers, all flat 1-D."""

    def __init__(self, index: int = 0):
        self.cuda = import_cuda()
        self.index = index
        self.sim = simulator_active()
        if not self.sim:
            self.cuda.select_device(index)

    def empty(self, n: int, dt: DType):
        return self.cuda.device_array(max(n, 0), device_dtype(dt))

    def upload(self, x: np.ndarray, dt: DType):
        return self.cuda.to_device(host_to_device_layout(x, dt))

    def download(self, d, dt: DType, dims) -> np.ndarray:
        """A new host array of ``dims`` (it owns its memory: no view to copy again)."""
        host = np.empty(tuple(dims), dt.np)
        if host.size:
            d.copy_to_host(host.reshape(-1).view(device_dtype(dt)))
        return host

    def active(self):
        """A context in which this thread's CUDA calls go to this device: numba keeps the
        current context per thread, and a thread other than the compiling one would
        otherwise get device 0's."""
        if self.sim:
            return contextlib.nullcontext()
        return self.cuda.gpus[self.index]

    def error_word(self):
        return self.cuda.to_device(np.array([ERR_CLEAR], np.int32))

    def sync(self) -> None:
        self.cuda.synchronize()


class DeviceConst:
    """A small host array (dims, strides, tables) copied to the device on first use, so
    lowering never needs a device (the PTX check lowers without one)."""

    def __init__(self, host: np.ndarray):
        self.host = np.ascontiguousarray(host)
        self._dev = None

    def get(self):
        if self._dev is None:
            self._dev = import_cuda().to_device(self.host.reshape(-1))
        return self._dev


def copy_device(d):
    """A new device array holding ``d``'s elements (device to device)."""
    out = import_cuda().device_array(d.shape, d.dtype)
    if d.size:
        out.copy_to_device(d)
    return out


def numel(dims) -> int:
    return int(math.prod(int(d) for d in dims))
