"""DequantGroupedMatMul on an OpenCL device: MoE experts as packed GGUF slabs.

``out[i] = x[i] · W_e(i)ᵀ`` with ``e(i) = expert_idx[i]`` and expert e's ``[n, k]`` weight
the e-th slab of the packed bytes (RLX's ``gguf_grouped_matmul_bt``). Each run reads the
expert ids back (a few bytes; the launches depend on them), checks them, and sorts the
tokens by expert on the host (the counting sort's stable order); then one product per used
expert runs over its range of the permutation. The kernels read x rows and write output
rows through the permutation, so gathering and unpermuting need no pass of their own.
"""
from __future__ import annotations

import numpy as np

from ...quant import QuantError
from . import memory
from ._quant_matmul import Product, check_array, geometry, slab_bytes


def sort_tokens(expert_idx, num_experts: int) -> tuple[np.ndarray, np.ndarray]:
    """(perm int32 [m], offsets int64 [E + 1]): tokens in expert order, stable, and where
    each expert's run starts. An id is truncated toward zero (as RLX's cast); NaN, an
    infinity or a value outside [0, E) is an error naming the token."""
    v = np.asarray(expert_idx, np.float64).reshape(-1)
    bad = ~np.isfinite(v) | (v <= -1.0) | (v >= num_experts)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise QuantError(f"DequantGroupedMatMul: expert_idx[{i}] = {v[i]:g} is not an "
                         f"expert id: expected a value in [0, {num_experts}) "
                         f"({num_experts} expert slabs in the packed weight)")
    ids = np.trunc(v).astype(np.int64)
    counts = np.bincount(ids, minlength=num_experts)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    perm = np.argsort(ids, kind="stable").astype(np.int32)
    return perm, offsets


class QuantGroupedMatMul:
    """The step of one DequantGroupedMatMul node: x ``[m, k]``, ``num_experts`` slabs."""

    def __init__(self, ctx, scheme, m: int, n: int, k: int, num_experts: int):
        if num_experts < 1:
            raise QuantError(f"DequantGroupedMatMul needs at least one expert, got "
                             f"{num_experts}")
        self.ctx, self.m, self.n, self.k, self.experts = ctx, m, n, k, num_experts
        dec, geo = geometry(scheme)
        slab = slab_bytes(dec.name, geo, n, k)
        self.product = Product(ctx, scheme, m, n, k, indirect=True, counts=range(1, m + 1),
                               packed_bytes=num_experts * slab)
        self.last_offsets = None           # the latest run's expert offsets (reports)

    def bind(self, out, x, packed, expert_idx):
        """The launcher; sizes are checked now, expert ids at each run before any launch."""
        p, m = self.product, self.m
        check_array(f"{p.name} DequantGroupedMatMul x", x, m * self.k, "float32")
        check_array(f"{p.name} DequantGroupedMatMul packed experts", packed,
                    self.experts * p.slab, "uint8")
        check_array("DequantGroupedMatMul expert_idx", expert_idx, m, "float32")
        check_array(f"{p.name} DequantGroupedMatMul output", out, m * self.n, "float32")
        import pyopencl as cl

        queue = self.ctx.queue
        perm_dev = memory.empty(self.ctx.program.context, (max(m, 1),), np.int32)
        kernels: dict = {}
        held: list = []                 # the permutation being uploaded stays alive

        def launch():
            if m == 0 or self.n == 0:
                return
            perm, offsets = sort_tokens(expert_idx.get(queue), self.experts)
            self.last_offsets = offsets
            held[:] = [perm]
            cl.enqueue_copy(queue, perm_dev.buf, perm, is_blocking=False)
            for e in range(self.experts):
                start, count = int(offsets[e]), int(offsets[e + 1] - offsets[e])
                for ref, gsz, lsz, args in p.specs(out, x, packed, perm_dev, start, count,
                                                   e * p.slab):
                    kern = kernels.get(ref.name)
                    if kern is None:
                        kern = kernels[ref.name] = ref.make()
                    kern.set_args(*args)
                    cl.enqueue_nd_range_kernel(queue, kern, gsz, lsz)
        return launch
