"""Device arrays: a buffer with a shape and dtype, moved to and from the host explicitly.

A buffer is never zero bytes (OpenCL forbids it); empty tensors get a 4-byte buffer that
no kernel touches (launchers skip zero-size work).

An arena (the memory plan's) is one buffer; each planned tensor is a sub-buffer of it at
its planned offset. OpenCL refuses a sub-buffer whose origin is not a multiple of the
device's ``CL_DEVICE_MEM_BASE_ADDR_ALIGN`` (in bits), so the plan's alignment is at least
``base_alignment`` bytes. PoCL 3.1 crashes (SIGSEGV) in ``clEnqueueCopyBufferRect`` when
either side is a sub-buffer, so the tensors that Narrow and Concat copy by rows (their
outputs and computed inputs, ``RECT_COPY_KINDS``) keep buffers of their own.
"""
from __future__ import annotations

import math

import numpy as np


RECT_COPY_KINDS = ("Narrow", "Concat")   # lower_movement copies these with rect copies


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


def base_alignment(context) -> int:
    """The sub-buffer origin alignment in bytes every device of ``context`` accepts."""
    return max(d.mem_base_addr_align // 8 for d in context.devices)


def arena(context, nbytes: int):
    """One buffer of ``nbytes`` (at least 4) for planned tensors to be sub-buffers of."""
    import pyopencl as cl

    return cl.Buffer(context, cl.mem_flags.READ_WRITE, max(nbytes, 4))


def sub(context, parent, offset: int, shape: tuple, dtype) -> DevArray:
    """The tensor at byte ``offset`` of ``parent`` (an empty one gets its own buffer)."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if not nbytes:
        return empty(context, shape, dtype)
    return DevArray(parent.get_sub_region(offset, nbytes), shape, dtype)


def plan_arena(graph, steps: list, context, max_alloc: int, alignment: int, errors: tuple):
    """(MemoryPlan, arena buffer or None, ``{node id: DevArray}``) for ``steps``: the
    planned tensors as sub-buffers of one arena, outputs and rect-copied tensors in
    buffers of their own; None when the arena would exceed ``max_alloc`` (the device's
    largest buffer)."""
    from ...passes.memory_plan import plan_memory
    from ..planning import planning

    align = max(alignment, base_alignment(context))
    computed = {n.id for n in steps}
    own = {i for n in steps if n.kind in RECT_COPY_KINDS for i in (n.id, *n.inputs)
           if i in computed}
    mp = plan_memory(graph, steps, own, alignment=align, views=False)
    if mp.arena_bytes > max_alloc:
        return None
    limit = (max_alloc, "the device's largest buffer (CL_DEVICE_MAX_MEM_ALLOC_SIZE)", errors)
    out, buf = {}, None
    for i in mp.outside:
        node = graph.nodes[i]
        with planning("opencl", node, *limit):
            out[i] = empty(context, node.shape.dims, node.shape.dtype.np)
    for i, slot in mp.slots.items():
        node = graph.nodes[i]
        with planning("opencl", node, errors=errors):      # the arena fails with its first
            if buf is None:
                buf = arena(context, mp.arena_bytes)
            out[i] = sub(context, buf, slot.offset, tuple(node.shape.dims),
                         node.shape.dtype.np)
    return mp, buf, out
