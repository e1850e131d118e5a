"""Index tensors for the gather/scatter kernels: decoded and range-checked in a kernel.

RLX passes indices as f32 holding integral values (integer tensors are accepted too).
``decode_*`` turn them into non-negative int64 offsets in one pass and report the first
bad position; the host then raises the oracle's error (``ops/_indexing_index.py``): a
non-integral or non-finite index anywhere wins over a range error, and for index tuples
(GatherNd, ScatterNd) the range error is the first one of the lowest tuple coordinate.
"""
from __future__ import annotations

import math

import numpy as np

from ...ops.opdef import OpError
from .kernels import compile_kernel

DECODE_SRC = '''
@njit(cache=True, nogil=True)
def decode_float(idx, sizes, neg_ok, out, bad):
    # position p addresses an axis of size sizes[p % k]; bad[t]: first range error of t
    k = sizes.size
    for p in range(idx.size):
        f = np.float64(idx[p])
        if not (math.isfinite(f) and f == math.floor(f)):
            return p
        t = p % k
        n = sizes[t]
        if f >= n or f < (-n if neg_ok else 0):
            if bad[t] < 0:
                bad[t] = p
            out[p] = 0
        else:
            i = np.int64(f)
            out[p] = i + n if i < 0 else i
    return -1


@njit(cache=True, nogil=True)
def decode_int(idx, sizes, neg_ok, out, bad):
    k = sizes.size
    for p in range(idx.size):
        i = np.int64(idx[p])
        t = p % k
        n = sizes[t]
        if i >= n or i < (-n if neg_ok else 0):
            if bad[t] < 0:
                bad[t] = p
            out[p] = 0
        else:
            out[p] = i + n if i < 0 else i
    return -1


@njit(cache=True, nogil=True)
def _raise_bad(p, bad):
    # the first problem found raises (compiled code cannot format the oracle's message:
    # a loop driver replays the loop on the host, whose IndexDecoder words it)
    for t in range(bad.size):
        if bad[t] >= 0:
            raise IndexError("index out of range")
    if p >= 0:
        raise ValueError("index is not an integer")


@njit(cache=True, nogil=True)
def decode_float_checked(idx, sizes, neg_ok, out, bad):
    for t in range(bad.size):
        bad[t] = -1
    _raise_bad(decode_float(idx, sizes, neg_ok, out, bad), bad)


@njit(cache=True, nogil=True)
def decode_int_checked(idx, sizes, neg_ok, out, bad):
    for t in range(bad.size):
        bad[t] = -1
    _raise_bad(decode_int(idx, sizes, neg_ok, out, bad), bad)
'''

_KERNEL = None


def kernel():
    global _KERNEL
    if _KERNEL is None:
        _KERNEL = compile_kernel("decode_float", DECODE_SRC)
    return _KERNEL


def _where(pos: tuple) -> str:
    return f"indices[{', '.join(str(int(i)) for i in pos)}]" if pos else "indices"


class IndexDecoder:
    """Decodes one node's index tensor; errors read as the oracle's (op, cid, axis, range).

    ``sizes[t]`` and ``axes[t]`` are the size and number of the axis that coordinate t of
    an index tuple addresses (one entry unless the indices hold tuples).
    """

    def __init__(self, op: str, cid: str, sizes, axes, negative_ok: bool):
        self.op, self.cid, self.negative_ok = op, cid, negative_ok
        self.sizes = np.array(sizes, np.int64)
        self.axes = list(axes)

    def jit(self, idx):
        """(JitCall decoding the index operand ``{1}``, of static Shape ``idx``, into a
        scratch int64 buffer; that buffer), or None for 16-bit float indices (converted to
        f32 on the host). Errors raise without the oracle's wording: a loop driver replays
        its loop on the host to word them."""
        from .lowering import JitCall

        dt = idx.dtype.np
        if dt.itemsize < 4 and dt.kind not in "iub":
            return None
        k = kernel()
        fn = k.get("decode_int_checked" if dt.kind in "iub" else "decode_float_checked")
        out = np.empty(math.prod(idx.dims), np.int64)
        bad = np.full(self.sizes.size, -1, np.int64)
        return JitCall(fn, ("{1}.reshape(-1)",), (self.sizes, self.negative_ok, out, bad)), out

    def __call__(self, idx: np.ndarray) -> np.ndarray:
        flat = idx.reshape(-1)
        raw = flat
        if idx.dtype.kind == "f" and idx.dtype.itemsize < 4 or idx.dtype.kind == "V":
            flat = flat.astype(np.float32)          # f16/bf16 indices: exact in f32
        out = np.empty(flat.size, np.int64)
        bad = np.full(self.sizes.size, -1, np.int64)
        if flat.size == 0:
            return out
        k = kernel()
        fn = k.get("decode_int") if flat.dtype.kind in "iu" else k.fn
        p = fn(flat, self.sizes, self.negative_ok, out, bad)
        if p >= 0:
            self._not_integer(idx, raw, p)
        if (bad >= 0).any():
            t = int(np.argmax(bad >= 0))
            self._out_of_range(idx, raw, int(bad[t]), t)
        return out

    def _not_integer(self, idx, raw, p: int):
        pos = np.unravel_index(p, idx.shape) if idx.ndim else ()
        raise OpError(f"({self.cid}) {self.op} index {float(raw[p])} at {_where(pos)} is not "
                      f"an integer (indices are integral values encoded as {idx.dtype})")

    def _out_of_range(self, idx, raw, p: int, t: int):
        pos = np.unravel_index(p, idx.shape) if idx.ndim else ()
        v = raw[p]
        v = int(v) if idx.dtype.kind in "iu" else int(np.clip(float(v), -2.0**62, 2.0**62))
        size, axis = int(self.sizes[t]), self.axes[t]
        if size == 0:
            expect = "the axis is empty, so no index is valid"
        elif self.negative_ok:
            expect = f"expected {-size}..{size - 1}; negatives count from the end"
        else:
            expect = f"expected 0..{size - 1}; {self.op} does not wrap negative indices"
        raise OpError(f"({self.cid}) {self.op} index {v} at {_where(pos)} is out of range "
                      f"for axis {axis} of size {size} ({expect})")
