"""What the linalg, attention and conv kernels share: C types per dtype, loads and stores
that convert 16-bit floats, the per-program scratch buffer and small uploaded tables."""
from __future__ import annotations

import hashlib
import weakref

import numpy as np

from ...ir.dtype import DType
from . import memory

# the type a kernel computes in: 16-bit floats in float, integers as unsigned (products and
# sums wrap modulo 2^n exactly as the oracle's, without C's signed-overflow rules)
COMPUTE = {DType.F32: "float", DType.F64: "double", DType.F16: "float", DType.BF16: "float",
           DType.I32: "uint", DType.I64: "ulong"}
BUFFER = {DType.F32: "float", DType.F64: "double", DType.F16: "half", DType.BF16: "ushort",
          DType.I32: "int", DType.I64: "long", DType.BOOL: "uchar"}
FLOATS = (DType.F32, DType.F64, DType.F16, DType.BF16)


def load(ptr: str, idx: str, dt: DType, ct: str) -> str:
    """C expression: element ``idx`` of ``ptr`` (dtype ``dt``) as compute type ``ct``."""
    if dt is DType.F16:
        return f"(({ct})vload_half({idx}, {ptr}))"
    if dt is DType.BF16:
        return f"(({ct})rlx_bf16_load({ptr}[{idx}]))"
    return f"(({ct}){ptr}[{idx}])"


def vload(ptr: str, off: str, dt: DType, ct: str, vw: int) -> str:
    """C expression: ``vw`` consecutive elements of ``ptr`` from ``off`` as a ``ct`` vector
    (``ct`` itself when ``vw`` is 1)."""
    if vw == 1:
        return load(ptr, off, dt, ct)
    if dt is DType.F16:
        return f"vload_half{vw}(0, {ptr} + {off})"
    if dt is DType.BF16:
        return f"as_float{vw}(convert_uint{vw}(vload{vw}(0, {ptr} + {off})) << 16)"
    if dt in (DType.I32, DType.I64):
        return f"as_{ct}{vw}(vload{vw}(0, {ptr} + {off}))"
    return f"vload{vw}(0, {ptr} + {off})"


def store(ptr: str, idx: str, val: str, dt: DType) -> str:
    """C statement: round ``val`` once into element ``idx`` of ``ptr`` (dtype ``dt``)."""
    if dt is DType.F16:
        return f"vstore_half_rte((float)({val}), {idx}, {ptr});"
    if dt is DType.BF16:
        return f"{ptr}[{idx}] = rlx_bf16_bits(rlx_rnd_bf16((float)({val})));"
    if dt is DType.I32:
        return f"{ptr}[{idx}] = as_int((uint)({val}));"
    if dt is DType.I64:
        return f"{ptr}[{idx}] = as_long((ulong)({val}));"
    return f"{ptr}[{idx}] = {val};"


def mac(a: str, b: str, c: str, ct: str) -> str:
    """``a·b + c`` in ``ct``: a fused multiply-add for floats, wrapping for integers."""
    return f"fma({a}, {b}, {c})" if ct in ("float", "double") else f"({a} * {b} + {c})"


def named(prefix: str, source_body: str) -> str:
    """A kernel name unique to its source (programs deduplicate kernels by name)."""
    return f"{prefix}_{hashlib.sha256(source_body.encode()).hexdigest()[:12]}"


def upload_longs(ctx, values) -> memory.DevArray:
    """An int64 table on the device (one element when empty: buffers are never 0 bytes)."""
    arr = np.ascontiguousarray(np.asarray(values, np.int64).reshape(-1))
    if arr.size == 0:
        arr = np.zeros(1, np.int64)
    return memory.upload(ctx.program.context, ctx.queue, arr)


def offsets(dims, strides) -> np.ndarray:
    """Flat element offsets of every index of ``dims`` (C order) under ``strides``."""
    out = np.zeros(1, np.int64)
    for d, s in zip(dims, strides):
        out = (out[:, None] + np.arange(d, dtype=np.int64)[None, :] * s).reshape(-1)
    return out


def c_strides(dims) -> list:
    """Element strides of a C-ordered array of ``dims``."""
    out, acc = [], 1
    for d in reversed(dims):
        out.append(acc)
        acc *= d
    return out[::-1]


class Scratch:
    """One device buffer the packing kernels of a program share.

    Every plan of a program enqueues on one in-order queue, so no two steps use it at once;
    it grows to the largest request (a step binds the buffer current at its bind time)."""

    def __init__(self, context):
        self.context = context
        self.want = 4
        self.buf = None
        self.retired: list = []     # kernels bound earlier may still name these

    def need(self, nbytes: int) -> None:
        self.want = max(self.want, int(nbytes))

    def buffer(self, nbytes: int):
        self.need(nbytes)
        if self.buf is None or self.buf.size < nbytes:
            import pyopencl as cl

            if self.buf is not None:
                self.retired.append(self.buf)
            self.buf = cl.Buffer(self.context, cl.mem_flags.READ_WRITE, self.want)
        return self.buf


_SCRATCH: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def scratch(ctx) -> Scratch:
    """The scratch buffer of ``ctx``'s program (made on first use)."""
    s = _SCRATCH.get(ctx.program)
    if s is None:
        s = _SCRATCH[ctx.program] = Scratch(ctx.program.context)
    return s
