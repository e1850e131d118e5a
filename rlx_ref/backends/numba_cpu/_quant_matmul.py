"""DequantMatMul on numba-cpu: x [m, k] @ W.T with W [n, k] in GGUF blocks, never expanded.

``plan_dequant_matmul(scheme, m, k, n)`` reads the scheme record (block size and bytes),
picks the path and the tile sizes once (what a lowering does) and returns a plan whose
``run(x, packed, out)`` validates the operands before any kernel reads them. The paths
(``_quant_kernels``): GEMV for m = 1, BLAS over decoded tiles for m > 1, a row-by-row
kernel when blocks straddle rows (k % bs != 0). ``dequant_matmul`` and ``dequant_blocks``
plan and run in one call; the grouped (MoE) form is in ``_quant_grouped``.

Memory: the tiled path's scratch is one [nt, kc] f32 tile per thread, sized so that all
threads together hold at most ``TILE_FRACTION`` of the operands' bytes (inputs + output),
and never less than ``TILE_FLOOR`` per thread (8 rows of one block: small products).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...quant import QuantError, get_scheme
from ._quant_decode import DECODERS, decoder_source, dot_source
from ._quant_kernels import driver_source
from .kernels import compile_kernel
from .lower_linalg import blas_serial, numba_threads

TILE_FRACTION = 0.1         # all threads' tile scratch, as a fraction of inputs + output
TILE_FLOOR = 8 * 256 * 4    # bytes per thread the tile may always take
TILE_ROWS = 256             # most rows of W per tile (one sgemm's M)
TILE_COLS = 256             # columns per decoded chunk (one sgemm's K), rounded to blocks
PAR_BLOCKS = 256            # blocks from which dequant_blocks runs in prange
MOE_ROWS = 16               # rows of W decoded per DequantMoEWeights task
TASK_ROWS = 32              # rows of W per GEMV / straddling-rows task
TASK_BLOCKS = 1024          # blocks per dequant_blocks task


def kernel(name: str, block_size: int):
    """The compiled kernel module of one scheme (decoder + drivers), once per process."""
    if name not in DECODERS:
        known = ", ".join(sorted(DECODERS))
        raise QuantError(f"numba-cpu has no block decoder for {name}; it decodes: {known}")
    fn, src = decoder_source(name)
    fused = dot_source(name)
    if fused:
        src += fused[1]
    # blocks in flight in the fused GEMV, each with two accumulators (dot_source): a
    # 32-value block is only 2 multiply-adds, so 2 blocks (4 chains; Q4_0 4096 x 4096 on
    # one thread went from ~1.6 ms with one chain to ~0.8 ms); a 256-value block is 16,
    # so 1 (more inlined copies of it cost seconds of compile for no measurable gain)
    chains = 2 if block_size <= 64 else 1
    return compile_kernel("qdeq", driver_source(fn, src, fused and fused[0], chains))


def _gguf(scheme):
    sd = get_scheme(scheme)
    if sd.kind != "gguf":
        raise QuantError(f"{sd.name} keeps its scales in side tensors: not a GGUF block "
                         "scheme, so DequantMatMul's 2-input form does not apply")
    return sd


def _as_bytes(packed, what: str) -> np.ndarray:
    arr = np.asarray(packed)
    if arr.dtype != np.uint8:
        raise QuantError(f"{what} must be uint8 bytes, got dtype {arr.dtype}")
    return np.ascontiguousarray(arr).reshape(-1)


@dataclass(frozen=True)
class DequantMatmulPlan:
    """One planned ``out[m, n] = x[m, k] @ W[n, k].T`` for one scheme and shape."""

    scheme: str
    block_size: int
    block_bytes: int
    m: int
    k: int
    n: int
    path: str                # gemv | tiles | straddle | empty | zeros
    threads: int
    tile_rows: int = 0
    tile_cols: int = 0

    @property
    def weight_bytes(self) -> int:
        """The exact byte count of the packed W this plan reads."""
        return self.n * self.k // self.block_size * self.block_bytes

    @property
    def scratch_bytes(self) -> int:
        """Scratch the kernels allocate (all threads): tiles, rows or one block each."""
        per = {"tiles": self.tile_rows * self.tile_cols, "gemv": self.k,
               "straddle": self.block_size + self.m}.get(self.path, 0)
        return 4 * per * self.threads

    def check(self, x, packed, out=None):
        """The operands as the kernels need them, or a QuantError saying what is wrong."""
        x = np.asarray(x)
        if x.dtype != np.float32 or x.shape != (self.m, self.k):
            raise QuantError(f"{self.scheme} DequantMatMul: x must be float32 [{self.m}, "
                             f"{self.k}], got {x.dtype} {list(x.shape)}")
        raw = _as_bytes(packed, f"{self.scheme} DequantMatMul weight")
        if raw.size != self.weight_bytes:
            raise QuantError(
                f"{self.scheme} DequantMatMul: W [{self.n}, {self.k}] is "
                f"{self.n * self.k // self.block_size} blocks of {self.block_bytes} bytes = "
                f"{self.weight_bytes} bytes, but the packed weight has {raw.size}")
        if out is None:
            out = np.empty((self.m, self.n), np.float32)
        elif (out.dtype != np.float32 or out.shape != (self.m, self.n)
              or not out.flags.c_contiguous):
            raise QuantError(f"{self.scheme} DequantMatMul: out must be C-contiguous "
                             f"float32 [{self.m}, {self.n}], got {out.dtype} "
                             f"{list(out.shape)}")
        return np.ascontiguousarray(x), raw, out

    def run(self, x, packed, out=None, kern=None) -> np.ndarray:
        """``x @ W.T`` into ``out`` (allocated when None); returns ``out``. ``kern``: the
        scheme's kernel module when the caller compiled it already (a lowering does)."""
        x, raw, out = self.check(x, packed, out)
        if self.path == "empty":
            return out
        if self.path == "zeros":
            out[...] = 0
            return out
        kern = kern or kernel(self.scheme, self.block_size)
        bs, bb, nthr = self.block_size, self.block_bytes, self.threads
        if self.path == "gemv":
            gemv = kern.get("qgemv_fused" if dot_source(self.scheme) else "qgemv")
            gemv(x.reshape(-1), raw, out.reshape(-1), self.k, bs, bb, TASK_ROWS, nthr)
        elif self.path == "tiles":
            blas_serial(kern.get("qtiles"), x.reshape(-1), raw, out.reshape(-1), self.m,
                        self.k, self.n, bs, bb, self.tile_rows, self.tile_cols, nthr)
        else:
            kern.get("qstraddle")(x, raw, out, self.k, bs, bb, TASK_ROWS, nthr)
        return out


def tile_shape(m: int, k: int, n: int, bs: int, bb: int, threads: int) -> tuple[int, int]:
    """(rows, columns) of the per-thread tile: whole blocks, within the memory budget."""
    operands = 4 * (m * k + m * n) + n * k // bs * bb
    per_thread = max(TILE_FLOOR, int(TILE_FRACTION * operands) // threads)
    cols = min(k, max(bs, TILE_COLS // bs * bs))
    while cols > bs and per_thread // (4 * cols) < min(8, n):
        cols = max(bs, cols // 2 // bs * bs)        # narrower chunks before thinner tiles
    return min(n, TILE_ROWS, max(1, per_thread // (4 * cols))), cols


def plan_dequant_matmul(scheme, m: int, k: int, n: int,
                        threads: int | None = None) -> DequantMatmulPlan:
    """Plan ``out[m, n] = x[m, k] @ W.T`` for W [n, k] packed in ``scheme`` (name or record).

    Raises QuantError when W [n, k] is not a whole number of blocks or the scheme has no
    numba-cpu decoder.
    """
    sd = _gguf(scheme)
    bs, bb = sd.block_size, sd.block_bytes
    m, k, n = int(m), int(k), int(n)
    if min(m, k, n) < 0:
        raise QuantError(f"{sd.name} DequantMatMul: negative dimension in m={m}, k={k}, "
                         f"n={n}")
    if (n * k) % bs:
        raise QuantError(f"{sd.name} DequantMatMul: W [{n}, {k}] has {n * k} elements, not "
                         f"a whole number of {bs}-element blocks")
    if sd.name not in DECODERS:
        kernel(sd.name, bs)                         # raises, naming what is decodable
    nthr = max(1, int(threads or numba_threads()))
    if m == 0 or n == 0:
        return DequantMatmulPlan(sd.name, bs, bb, m, k, n, "empty", nthr)
    if k == 0:
        return DequantMatmulPlan(sd.name, bs, bb, m, k, n, "zeros", nthr)
    row_tasks = -(-n // TASK_ROWS)
    if k % bs:
        return DequantMatmulPlan(sd.name, bs, bb, m, k, n, "straddle", min(nthr, row_tasks))
    if m == 1:
        return DequantMatmulPlan(sd.name, bs, bb, m, k, n, "gemv", min(nthr, row_tasks))
    rows, cols = tile_shape(m, k, n, bs, bb, nthr)
    tiles = -(-n // rows)
    return DequantMatmulPlan(sd.name, bs, bb, m, k, n, "tiles", min(nthr, tiles), rows, cols)


def dequant_matmul(x, packed, n: int, scheme, out=None, threads: int | None = None):
    """``x [m, k] @ W.T`` for W [n, k] given as GGUF blocks of ``scheme``: f32 [m, n]."""
    x = np.asarray(x)
    if x.ndim != 2:
        raise QuantError(f"DequantMatMul: x must be 2-D [m, k], got shape {list(x.shape)}")
    plan = plan_dequant_matmul(scheme, x.shape[0], x.shape[1], n, threads)
    return plan.run(x, packed, out)


def dequant_blocks(packed, scheme, n_elements: int | None = None, out=None) -> np.ndarray:
    """The first ``n_elements`` (default: all) values of GGUF blocks, f32, bit-exact."""
    sd = _gguf(scheme)
    bs, bb = sd.block_size, sd.block_bytes
    raw = _as_bytes(packed, f"{sd.name} packed data")
    held = raw.size // bb
    count = held * bs if n_elements is None else int(n_elements)
    if raw.size % bb:
        raise QuantError(f"{sd.name}: {raw.size} bytes is not a whole number of {bb}-byte "
                         "blocks")
    if count < 0 or count % bs or count // bs > held:
        raise QuantError(f"{sd.name}: n_elements={count} must be a non-negative multiple of "
                         f"the block size {bs}, at most the {held * bs} the data holds")
    nblocks = count // bs
    if out is None:
        out = np.empty(count, np.float32)
    elif out.dtype != np.float32 or out.size != count or not out.flags.c_contiguous:
        raise QuantError(f"{sd.name}: out must be C-contiguous float32 of {count} values")
    flat = out.reshape(-1)
    kern = kernel(sd.name, bs)
    if nblocks >= PAR_BLOCKS and numba_threads() > 1:
        kern.get("qdeq_par")(raw, flat, bs, bb, nblocks, TASK_BLOCKS, numba_threads())
    elif nblocks:
        kern.fn(raw, flat, bs, bb, nblocks)
    return out


def dequant_moe_weights(packed, scheme, num_experts: int, k: int, n: int,
                        out=None) -> np.ndarray:
    """f32 [E, K, N] from E packed expert weights W [N, K] (RLX's DequantMoEWeights)."""
    sd = _gguf(scheme)
    bs, bb = sd.block_size, sd.block_bytes
    e, k, n = int(num_experts), int(k), int(n)
    raw = _as_bytes(packed, f"{sd.name} DequantMoEWeights weight")
    if min(e, k, n) < 0 or (n * k) % bs:
        raise QuantError(f"{sd.name} DequantMoEWeights: W [{n}, {k}] is not a whole number "
                         f"of {bs}-element blocks")
    if raw.size != e * (n * k // bs) * bb:
        raise QuantError(f"{sd.name} DequantMoEWeights: {e} experts of W [{n}, {k}] are "
                         f"{e * (n * k // bs) * bb} bytes, but the packed weight has "
                         f"{raw.size}")
    if out is None:
        out = np.empty((e, k, n), np.float32)
    elif out.dtype != np.float32 or out.shape != (e, k, n) or not out.flags.c_contiguous:
        raise QuantError(f"{sd.name}: out must be C-contiguous float32 [{e}, {k}, {n}]")
    if out.size:
        nthr = numba_threads()
        kernel(sd.name, bs).get("qmoe")(raw, out, bs, bb, MOE_ROWS, nthr)
    return out
