"""Fused GGUF dequant kernels: GEMV, tiled product and dequant-only, for any block scheme.

W is the GGML matrix ``[N, K]`` (row n = ``K / block_size`` blocks of ``block_bytes``
bytes), and ``out[r, n] = Σ_k x[r, k]·W[n, k]``. Block size and bytes come from the
scheme's record and are pasted in as constants with the decoder's sub-block length, so
a kernel cannot walk a block of one scheme with another's size.

- GEMV (one x row): a warp per output element. Its lanes take sub-blocks in turn
  (neighbouring lanes read neighbouring bytes), decode each into registers and dot it
  with x; the warp's partial sums fold through shared memory.
- Tiled (prefill): a block owns a BM×BN output tile; per 32-element chunk of K it stages
  the x rows and the decoded W sub-blocks in shared memory (each weight decoded once per
  tile) and every thread forms TM×TN outer-product updates from registers.
- Dequant-only: a thread per sub-block writes the decoded values into ``[E·K, N]``.

Grouped (MoE) products reuse GEMV and tiled with a row table: row r of a launch reads x
row ``perm[poff + r]`` and writes that output row (the unpermute), W from byte ``wbase``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...quant import get_scheme
from ._gemm import Tiling
from .device import simulator_active
from .kernels import Launch, array_type, compile_kernel, int_type
from .lower_reduce import _render

CH = 32     # K elements per tiled step: divides every block size, a multiple of every SUB
# scheme -> (decoder, its module, sub-block length SUB)
DECODERS = {
    "Q4_0": ("_dq_q4_0", "", 32), "Q4_1": ("_dq_q4_1", "", 32),
    "Q5_0": ("_dq_q5_0", "", 32), "Q5_1": ("_dq_q5_1", "", 32),
    "Q8_0": ("_dq_q8_0", "", 32),
    "Q2_K": ("_dq_q2_k", "_k", 16), "Q3_K": ("_dq_q3_k", "_k", 16),
    "Q4_K": ("_dq_q4_k", "_k", 32), "Q5_K": ("_dq_q5_k", "_k", 32),
    "Q6_K": ("_dq_q6_k", "_k", 16), "Q8_K": ("_dq_q8_k", "_k", 32),
    "IQ4_NL": ("_dq_iq4_nl", "", 32), "IQ4_XS": ("_dq_iq4_xs", "", 32),
    "TQ1_0": ("_dq_tq1_0", "", 32), "TQ2_0": ("_dq_tq2_0", "", 32),
    "MXFP4": ("_dq_mxfp4", "", 32), "NVFP4": ("_dq_nvfp4", "", 16),
}


@dataclass(frozen=True)
class Block:
    """What a kernel knows of a scheme: the record's sizes and the decoder's walk."""

    name: str
    qk: int         # elements per block (the record's block_size)
    bb: int         # bytes per block (the record's block_bytes)
    sub: int        # elements per decoder call
    fn: str
    module: str

    @property
    def nsub(self) -> int:
        return self.qk // self.sub

    def fields(self) -> dict:
        imp = (f"from rlx_ref.backends.numba_cuda._quant_device{self.module} import "
               f"{self.fn}\n")
        return {"QK": self.qk, "BB": self.bb, "SUB": self.sub, "NSUB": self.nsub,
                "dec": self.fn, "imp": imp}


def block_of(scheme_name: str) -> Block:
    """The Block of a registered scheme with a CUDA decoder (KeyError otherwise)."""
    sd = get_scheme(scheme_name)
    fn, module, sub = DECODERS[sd.name]
    if sd.block_size % sub or sd.block_size % CH:
        raise ValueError(f"{sd.name}: the decoder's {sub}-element steps and the {CH}-element "
                         f"tiles must divide its {sd.block_size}-element block")
    return Block(sd.name, sd.block_size, sd.block_bytes, sub, fn, module)


_GEMV = '''{imp}
def {name}(out, x, w, m, n, k_len, nblk, wbase, perm, poff):
    sm = cuda.shared.array({T}, np.float32)
    sub = cuda.local.array(({SUB}, 1), np.float32)
    t = cuda.threadIdx.x
    lane = t % 32
    total = m * n
    nsub = nblk * {NSUB}
    item0 = cuda.blockIdx.x * {WARPS}
    while item0 < total:
        item = item0 + t // 32
        acc = np.float32(0)
        r = 0
        col = 0
        if item < total:
            r = item // n
            col = item - r * n
            xo0 = {xrow} * k_len
            wo = wbase + col * nblk * {BB}
            g = lane
            while g < nsub:
                b = g // {NSUB}
                {dec}(w, wo + b * {BB}, g - b * {NSUB}, sub, 0, 0)
                xo = xo0 + g * {SUB}
                for i in range({SUB}):
                    acc += x[xo + i] * sub[i, 0]
                g += 32
        sm[t] = acc
        cuda.syncthreads()
        s = 16
        while s > 0:
            if lane < s:
                sm[t] += sm[t + s]
            cuda.syncthreads()
            s //= 2
        if lane == 0 and item < total:
            out[{orow} * n + col] = sm[t]
        cuda.syncthreads()
        item0 += cuda.gridDim.x * {WARPS}
'''

_TILED = '''{imp}
def {name}(out, x, w, m, n, k_len, nblk, wbase, perm, poff):
    sx = cuda.shared.array(({CH}, {BMP}), np.float32)
    sw = cuda.shared.array(({CH}, {BN}), np.float32)
    acc = cuda.local.array(({TM}, {TN}), np.float32)
    ra = cuda.local.array({TM}, np.float32)
    rb = cuda.local.array({TN}, np.float32)
    t = cuda.threadIdx.x
    ty = t // {TX}
    tx = t - ty * {TX}
    tiles_n = (n + {BN} - 1) // {BN}
    tiles = ((m + {BM} - 1) // {BM}) * tiles_n
    tile = cuda.blockIdx.x
    while tile < tiles:
        row0 = (tile // tiles_n) * {BM}
        col0 = (tile - (tile // tiles_n) * tiles_n) * {BN}
        for i in range({TM}):
            for j in range({TN}):
                acc[i, j] = 0
        for c in range(k_len // {CH}):
            k0 = c * {CH}
            for p in range({PX}):
                e = p * {NT} + t
                rr = e // {CH}
                kk = e - rr * {CH}
                v = np.float32(0)
                if row0 + rr < m:
                    r = row0 + rr
                    v = x[{xrow} * k_len + k0 + kk]
                sx[kk, rr] = v
            b = k0 // {QK}
            s0 = (k0 - b * {QK}) // {SUB}
            e = t
            while e < {BN} * {NSC}:
                cl = e // {NSC}
                sj = e - cl * {NSC}
                if col0 + cl < n:
                    {dec}(w, wbase + ((col0 + cl) * nblk + b) * {BB}, s0 + sj, sw, sj * {SUB},
                          cl)
                else:
                    for i in range({SUB}):
                        sw[sj * {SUB} + i, cl] = 0
                e += {NT}
            cuda.syncthreads()
            for kk in range({CH}):
                for i in range({TM}):
                    ra[i] = sx[kk, ty + i * {TY}]
                for j in range({TN}):
                    rb[j] = sw[kk, tx + j * {TX}]
                for i in range({TM}):
                    for j in range({TN}):
                        acc[i, j] += ra[i] * rb[j]
            cuda.syncthreads()
        for i in range({TM}):
            r = row0 + ty + i * {TY}
            if r < m:
                for j in range({TN}):
                    col = col0 + tx + j * {TX}
                    if col < n:
                        out[{orow} * n + col] = acc[i, j]
        tile += cuda.gridDim.x
'''

_DEQUANT = '''{imp}
def {name}(out, w, total, n, nblk, k_len):
    g = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    while g < total:
        rest = g // n
        col = g - rest * n
        eb = rest // {NSUB}
        s = rest - eb * {NSUB}
        ex = eb // nblk
        b = eb - ex * nblk
        {dec}(w, ((ex * n + col) * nblk + b) * {BB}, s, out,
              ex * k_len + b * {QK} + s * {SUB}, col)
        g += cuda.gridDim.x * cuda.blockDim.x
'''

BIG = Tiling(128, 128, CH, 8, 8)     # prefill: 256 threads, 64 accumulators each
SMALL = Tiling(64, 64, CH, 4, 4)     # few rows or columns: 256 threads, 16 each
SIM = Tiling(8, 8, CH, 2, 2)         # the simulator: 16 Python threads


def tiled_tiling(m: int, n: int) -> Tiling:
    if simulator_active():
        return SIM
    return BIG if m >= 96 and n >= 96 else SMALL


def _rows(grouped: bool) -> dict:
    row = "perm[poff + r]" if grouped else "r"
    return {"xrow": row, "orow": row}


def _product_types():
    f32, u8, i64 = array_type(np.float32), array_type(np.uint8), int_type()
    return (f32, f32, u8) + (i64,) * 5 + (array_type(np.int64), i64)


def gemv_launch(blk: Block, threads: int, grouped: bool = False) -> Launch:
    """``out[r, n]`` for every row r of the launch, a warp per output element."""
    name, source = _render(_GEMV, f"qgemv_{blk.name.lower()}", T=threads,
                           WARPS=threads // 32, **blk.fields(), **_rows(grouped))
    return Launch(compile_kernel(name, source), _product_types())


def tiled_launch(blk: Block, tl: Tiling, grouped: bool = False) -> Launch:
    """The tiled product over a ``tl`` tile grid (K a whole number of CH chunks)."""
    nt = tl.threads
    name, source = _render(_TILED, f"qtile_{blk.name.lower()}", BM=tl.bm, BN=tl.bn,
                           BMP=tl.bm + 1, TM=tl.tm, TN=tl.tn, TX=tl.bn // tl.tn,
                           TY=tl.bm // tl.tm, NT=nt, CH=CH, PX=tl.bm * CH // nt,
                           NSC=CH // blk.sub, **blk.fields(), **_rows(grouped))
    return Launch(compile_kernel(name, source), _product_types())


def dequant_launch(blk: Block) -> Launch:
    """Decode ``E`` stacked ``[N, K]`` matrices into ``out`` ``[E·K, N]`` (2-D)."""
    from numba import from_dtype, types

    name, source = _render(_DEQUANT, f"qdeq_{blk.name.lower()}", **blk.fields())
    i64 = int_type()
    out2 = types.Array(from_dtype(np.dtype(np.float32)), 2, "C")
    return Launch(compile_kernel(name, source), (out2, array_type(np.uint8)) + (i64,) * 4)
