"""Binding a kernel to a node's buffers and enqueueing it: the work-group size comes from
the device, global sizes are rounded up to it, and kernels guard their tail."""
from __future__ import annotations

import numpy as np

LOCAL_1D = 256


def local_size(device, want: int = LOCAL_1D) -> int:
    return max(1, min(want, device.max_work_group))


def round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def scalar(v, ctype: str = "long"):
    """A kernel scalar argument of C type ``ctype``."""
    return {"long": np.int64, "int": np.int32, "uint": np.uint32, "ulong": np.uint64,
            "float": np.float32, "double": np.float64}[ctype](v)


def bind_1d(ref, device, queue, n: int, args: list, local: int | None = None):
    """A launcher of ``ref`` over ``n`` work-items (nothing when n is 0), args set once."""
    if n == 0:
        return _nothing
    import pyopencl as cl

    kern = ref.make()
    kern.set_args(*args)
    lsz = local_size(device, local or LOCAL_1D)
    gsz = (round_up(n, lsz),)
    enqueue = cl.enqueue_nd_range_kernel

    def launch():
        enqueue(queue, kern, gsz, (lsz,))
    return launch


def bind_nd(ref, queue, gsize: tuple, lsize: tuple | None, args: list):
    """A launcher of ``ref`` over an explicit N-d range (sizes already rounded)."""
    if any(g == 0 for g in gsize):
        return _nothing
    import pyopencl as cl

    kern = ref.make()
    kern.set_args(*args)
    enqueue = cl.enqueue_nd_range_kernel

    def launch():
        enqueue(queue, kern, gsize, lsize)
    return launch


def _nothing():
    return None
