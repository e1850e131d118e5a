"""DequantGroupedMatMul on numba-cpu: each token's row times its expert's GGUF weight.

``out[i] = x[i] @ W[e_i].T`` with ``e_i = expert_idx[i]`` (f32-encoded, truncated toward
zero as RLX's ``as usize``) and expert ``e``'s W [n, k] at bytes ``e·slab .. (e+1)·slab`` of
the packed stack (RLX's ``gguf_grouped_matmul_bt``). Tokens are counting-sorted by expert;
each expert with tokens runs one DequantMatMul (``_quant_matmul``) over its rows, gathered
into a buffer and its results written back to their original rows (unpermute). Experts
with many tokens go in chunks of at most ``chunk_rows`` rows, so the gather and result
buffers stay within half of ``TILE_FRACTION`` of the operands' bytes (the other half is the
matmul's tile scratch); a chunk decodes its expert's weight again.
"""
from __future__ import annotations

import numpy as np

from ...quant import QuantError
from ._quant_matmul import TILE_FRACTION, _as_bytes, _gguf, plan_dequant_matmul
from .kernels import compile_kernel

MIN_CHUNK = 16          # rows of a chunk even when the budget is smaller (tiny operands)

_SORT_SRC = '''
@njit(cache=True, nogil=True)
def moe_sort(ids, num_experts):
    # counting sort: (order, offsets), tokens of expert e at order[offsets[e]:offsets[e+1]]
    # in their original order
    offsets = np.zeros(num_experts + 1, np.int64)
    for i in range(ids.size):
        offsets[ids[i] + 1] += 1
    for e in range(num_experts):
        offsets[e + 1] += offsets[e]
    fill = offsets[:-1].copy()
    order = np.empty(ids.size, np.int64)
    for i in range(ids.size):
        order[fill[ids[i]]] = i
        fill[ids[i]] += 1
    return order, offsets
'''


def expert_ids(expert_idx, m: int, num_experts: int) -> np.ndarray:
    """The experts of the m tokens as int64, or a QuantError naming the first bad one."""
    e = np.asarray(expert_idx)
    if e.shape != (m,):
        raise QuantError(f"DequantGroupedMatMul: expert_idx must be [{m}] (one id per row of "
                         f"x), got shape {list(e.shape)}")
    if e.dtype.kind == "f":
        bad = ~np.isfinite(e)
        if bad.any():
            i = int(np.argmax(bad))
            raise QuantError(f"DequantGroupedMatMul: expert_idx[{i}] = {e[i]} is not a "
                             "finite expert id")
        e = np.trunc(e)
    elif e.dtype.kind not in "iu":
        raise QuantError(f"DequantGroupedMatMul: expert_idx must be float or integer, got "
                         f"{e.dtype}")
    bad = (e < 0) | (e >= num_experts)
    if bad.any():
        i = int(np.argmax(bad))
        raise QuantError(f"DequantGroupedMatMul: expert_idx[{i}] = {e[i]} is outside the "
                         f"{num_experts} experts [0, {num_experts})")
    return e.astype(np.int64)


def dequant_grouped_matmul(x, packed, expert_idx, n: int, num_experts: int | None, scheme,
                           out=None, threads: int | None = None,
                           chunk_rows: int | None = None) -> np.ndarray:
    """``out[i] = x[i] @ W[expert_idx[i]].T``: x f32 [m, k], ``packed`` the experts' GGUF
    slabs (each W [n, k]) back to back; ``num_experts`` None derives it from the byte count.
    Everything is checked before any kernel reads (ids in range, exact byte counts)."""
    sd = _gguf(scheme)
    x = np.asarray(x)
    if x.dtype != np.float32 or x.ndim != 2:
        raise QuantError(f"DequantGroupedMatMul: x must be float32 [m, k], got {x.dtype} "
                         f"{list(x.shape)}")
    m, k = x.shape
    n = int(n)
    slab_plan = plan_dequant_matmul(sd, 1, k, n, threads)      # checks W [n, k] blocks
    slab = slab_plan.weight_bytes
    raw = _as_bytes(packed, f"{sd.name} DequantGroupedMatMul weight")
    if num_experts is None:
        if slab == 0 or raw.size % slab:
            raise QuantError(f"{sd.name} DequantGroupedMatMul: {raw.size} bytes is not a "
                             f"whole number of {slab}-byte expert slabs (W [{n}, {k}])")
        num_experts = raw.size // slab
    num_experts = int(num_experts)
    if num_experts < 1 or raw.size != num_experts * slab:
        raise QuantError(f"{sd.name} DequantGroupedMatMul: {num_experts} experts of W [{n}, "
                         f"{k}] are {num_experts * slab} bytes, but the packed weight has "
                         f"{raw.size}")
    ids = expert_ids(expert_idx, m, num_experts)
    if out is None:
        out = np.empty((m, n), np.float32)
    elif out.dtype != np.float32 or out.shape != (m, n) or not out.flags.c_contiguous:
        raise QuantError(f"DequantGroupedMatMul: out must be C-contiguous float32 [{m}, {n}]")
    if m == 0 or n == 0:
        return out
    order, offsets = compile_kernel("moe_sort", _SORT_SRC).fn(ids, num_experts)
    if chunk_rows is None:
        budget = TILE_FRACTION / 2 * (x.nbytes + raw.size + out.nbytes)
        chunk_rows = max(MIN_CHUNK, int(budget // (4 * (k + n))))
    rows_cap = min(m, int(chunk_rows))
    xbuf = np.empty((rows_cap, k), np.float32)
    obuf = np.empty((rows_cap, n), np.float32)
    plans: dict = {}
    for e in range(num_experts):
        w = raw[e * slab:(e + 1) * slab]
        for s in range(int(offsets[e]), int(offsets[e + 1]), rows_cap):
            rows = order[s:min(s + rows_cap, int(offsets[e + 1]))]
            c = rows.size
            if c not in plans:
                plans[c] = plan_dequant_matmul(sd, c, k, n, threads)
            np.take(x, rows, axis=0, out=xbuf[:c])
            plans[c].run(xbuf[:c], w, obuf[:c])
            out[rows] = obuf[:c]
    return out
