"""Device arrays: a buffer with a shape and dtype, moved to and from the host explicitly.

A buffer is never zero bytes (OpenCL forbids it); empty tensors get a 4-byte buffer that
no kernel touches (launchers skip zero-size work).
"""
from __future__ import annotations

import math

import numpy as np


class DevArray:
    """``buf`` holds ``prod(shape)`` elements of ``dtype`` (numpy dtype), C order."""

    __slots__ = ("buf", "shape", "dtype", "size")

    def __init__(self, buf, shape: tuple, dtype):
        self.buf, self.shape, self.dtype = buf, tuple(shape), np.dtype(dtype)
        self.size = math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def get(self, queue) -> np.ndarray:
        """A fresh host copy (blocking)."""
        import pyopencl as cl

        out = np.empty(self.shape, self.dtype)
        if self.size:
            cl.enqueue_copy(queue, out, self.buf)
        return out

    def set(self, queue, host: np.ndarray, blocking: bool = False) -> None:
        """Write ``host`` (same element count) into the buffer."""
        import pyopencl as cl

        host = np.ascontiguousarray(host, self.dtype)
        if host.size != self.size:
            raise ValueError(f"device array of {self.shape} cannot take {host.shape}")
        if self.size:
            cl.enqueue_copy(queue, self.buf, host, is_blocking=blocking)

    def copy_from(self, queue, src: "DevArray") -> None:
        """Device-to-device copy of ``src`` (same byte size) into this array."""
        import pyopencl as cl

        if self.nbytes:
            cl.enqueue_copy(queue, self.buf, src.buf, byte_count=self.nbytes)


def empty(context, shape: tuple, dtype) -> DevArray:
    import pyopencl as cl

    nbytes = max(math.prod(shape) * np.dtype(dtype).itemsize, 4)
    return DevArray(cl.Buffer(context, cl.mem_flags.READ_WRITE, nbytes), shape, dtype)


def upload(context, queue, host: np.ndarray) -> DevArray:
    arr = empty(context, host.shape, host.dtype)
    arr.set(queue, host, blocking=True)
    return arr
