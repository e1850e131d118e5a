"""Host entry points of the fused GGUF dequant kernels on an OpenCL device.

Each takes ``device`` (None: the default device; a spec such as ``"pocl"`` or ``"0:1"``;
an ``OpenCLBackend``, whose kernel style it follows; a ``(DeviceInfo, context, queue)``
triple; or a lowering's ``LowerCtx``) and operands that are numpy arrays (the result comes
back as numpy) or device arrays (``memory.DevArray``; the result stays on the device).
Sizes are checked before anything is uploaded or enqueued.

    dequant_matmul(device, x, packed, n, "Q4_K")            # x [..., k] -> [..., n]
    dequant_grouped_matmul(device, x, packed, expert_idx, n, "Q8_0")
    dequant(device, packed, "Q4_0", num_elements=None)        # flat f32
    dequant_moe_weights(device, packed, "Q4_K", num_experts, k, n)   # [E, k, n]
"""
from __future__ import annotations

import math

import numpy as np

from ...quant import QuantError
from . import memory
from ._quant_grouped import QuantGroupedMatMul
from ._quant_matmul import QuantDequant, QuantMatMul, geometry, slab_bytes
from .lowering import LowerCtx
from .program import ProgramBuilder


def standalone_ctx(device=None) -> LowerCtx:
    """A LowerCtx (device, a fresh program, queue) outside any graph."""
    if isinstance(device, LowerCtx):            # its device and queue, a program of our own
        device = (device.device, device.program.context, device.queue)
    if isinstance(device, tuple) and len(device) == 3:
        info, context, queue = device
    elif hasattr(device, "_device") and hasattr(device, "kernels"):     # OpenCLBackend
        entry = device._device()
        if entry is None:
            device._unavailable()
        info, context, queue = entry
    else:
        from .devices import context_for

        info, context, queue = context_for(device)
    return LowerCtx(None, None, info, ProgramBuilder(context, info), queue=queue)


def _packed_bytes(packed) -> int:
    if isinstance(packed, memory.DevArray):
        return packed.nbytes
    arr = np.asarray(packed)
    if arr.dtype.itemsize != 1 or arr.dtype.kind not in "iu":
        raise QuantError(f"packed data must be uint8 bytes, got dtype {arr.dtype}")
    return arr.size


def _shape(a) -> tuple:
    return tuple(a.shape)


def _dev(ctx, arr, dtype):
    """``arr`` on the device as ``dtype`` (a DevArray is used as it is)."""
    if isinstance(arr, memory.DevArray):
        return arr
    host = np.ascontiguousarray(np.asarray(arr).reshape(-1))
    if dtype == np.uint8:
        host = host.view(np.uint8)
    return memory.upload(ctx.program.context, ctx.queue, host.astype(dtype, copy=False))


def _run(ctx, plan, out_shape, operands, host: bool):
    """Bind ``plan`` over fresh output and ``operands``, run, and return the output."""
    out = memory.empty(ctx.program.context, (math.prod(out_shape),), np.float32)
    plan.bind(out, *operands)()
    if not host:
        return memory.DevArray(out.buf, out_shape, np.float32)
    return out.get(ctx.queue).reshape(out_shape)


def dequant_matmul(device, x, packed, n: int, scheme):
    """``x[..., k] · Wᵀ`` with W ``[n, k]`` packed as GGUF blocks of ``scheme``."""
    xs = _shape(x)
    if len(xs) < 1:
        raise QuantError("DequantMatMul x must have at least one axis ([..., k])")
    k, m = xs[-1], math.prod(xs[:-1])
    dec, geo = geometry(scheme)
    need = slab_bytes(dec.name, geo, n, k)
    if _packed_bytes(packed) != need:
        raise QuantError(f"{dec.name} DequantMatMul: the packed weight has "
                         f"{_packed_bytes(packed)} bytes; a [{n}, {k}] weight needs {need}")
    ctx = standalone_ctx(device)
    plan = QuantMatMul(ctx, dec.name, m, n, k)
    ops = [_dev(ctx, x, np.float32), _dev(ctx, packed, np.uint8)]
    return _run(ctx, plan, xs[:-1] + (n,), ops, not isinstance(x, memory.DevArray))


def dequant_grouped_matmul(device, x, packed, expert_idx, n: int, scheme):
    """Each row of x ``[m, k]`` times its expert's ``[n, k]`` slab (transposed); the expert
    count is the packed bytes over one slab's."""
    xs = _shape(x)
    if len(xs) != 2:
        raise QuantError(f"DequantGroupedMatMul x must be [m, k], got shape {xs}")
    m, k = xs
    dec, geo = geometry(scheme)
    slab = slab_bytes(dec.name, geo, n, k)
    total = _packed_bytes(packed)
    if slab == 0 or total % slab or total == 0:
        raise QuantError(f"{dec.name} DequantGroupedMatMul: {total} packed bytes is not a "
                         f"whole number of [{n}, {k}] expert slabs of {slab} bytes")
    if math.prod(_shape(expert_idx)) != m:
        raise QuantError(f"DequantGroupedMatMul: expert_idx has {math.prod(_shape(expert_idx))}"
                         f" ids for {m} rows of x")
    ctx = standalone_ctx(device)
    plan = QuantGroupedMatMul(ctx, dec.name, m, n, k, total // slab)
    ops = [_dev(ctx, x, np.float32), _dev(ctx, packed, np.uint8),
           _dev(ctx, expert_idx, np.float32)]
    return _run(ctx, plan, (m, n), ops, not isinstance(x, memory.DevArray))


def dequant(device, packed, scheme, num_elements: int | None = None):
    """Packed blocks -> flat float32 (``num_elements``: default all the bytes hold)."""
    dec, (bs, bb) = geometry(scheme)
    total = _packed_bytes(packed)
    if total % bb:
        raise QuantError(f"{dec.name}: {total} bytes is not a whole number of {bb}-byte "
                         "blocks")
    if num_elements is None:
        num_elements = total // bb * bs
    if num_elements < 0 or num_elements % bs or num_elements // bs * bb != total:
        raise QuantError(f"{dec.name}: {num_elements} elements need "
                         f"{max(num_elements, 0) // bs * bb} bytes of whole blocks, "
                         f"the data has {total}")
    ctx = standalone_ctx(device)
    plan = QuantDequant(ctx, dec.name, num_elements)
    return _run(ctx, plan, (num_elements,), [_dev(ctx, packed, np.uint8)],
                not isinstance(packed, memory.DevArray))


def dequant_moe_weights(device, packed, scheme, num_experts: int, k: int, n: int):
    """DequantMoEWeights: ``num_experts`` packed ``[n, k]`` slabs -> f32 ``[E, k, n]``."""
    dec, geo = geometry(scheme)
    need = num_experts * slab_bytes(dec.name, geo, n, k)
    if _packed_bytes(packed) != need:
        raise QuantError(f"{dec.name} DequantMoEWeights: {_packed_bytes(packed)} packed "
                         f"bytes; {num_experts} experts of [{n}, {k}] need {need}")
    ctx = standalone_ctx(device)
    plan = QuantDequant(ctx, dec.name, 0, moe=(num_experts, k, n))
    return _run(ctx, plan, (num_experts, k, n), [_dev(ctx, packed, np.uint8)],
                not isinstance(packed, memory.DevArray))
