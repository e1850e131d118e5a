"""Numba source of the DequantMatMul drivers, pasted after one scheme's decoder.

``_decode`` is the scheme's block decoder (``_quant_decode``). W is [n, k] stored as GGML
blocks over its flat index (block b holds elements b·bs .. b·bs + bs - 1); a row of W is
``k // bs`` whole blocks when ``k % bs == 0``. Block size ``bs`` and bytes ``bb`` are
arguments (read from the scheme record when the call is planned), never constants here.

Parallel kernels split their work into tasks that threads claim one at a time (``claim``:
an atomic counter), so a thread the OS deschedules holds up one task, not a fixed share.

- ``qgemv_fused`` (m = 1): tasks of a few rows of W; each block's 16-value steps
  are multiplied into a 16-lane register accumulator (``_quant_simd``), one horizontal sum
  per row. ``qgemv`` is the same for decoders without fused steps: a row is decoded into an
  f32 scratch of k values (L1/L2-resident), then dotted with x in a vectorized loop.
- ``qtiles`` (m > 1): tasks are tiles of ``nt`` rows of W; a tile is decoded ``kc``
  columns at a time into a per-thread scratch [nt, kc] and multiplied by BLAS sgemm
  (single-threaded, see ``lower_linalg.blas_serial``) straight into ``out[:, j0:j0 + nt]``
  (ldc = n), accumulating over the k chunks (beta = 1 after the first). Numba's own
  ``np.dot`` cannot accumulate or write a strided output block, so the kernel calls the
  BLAS wrapper ``np.dot`` itself uses (``numba_xxgemm``).
- ``qstraddle`` (k % bs != 0: blocks straddle rows): each row decodes every block that
  covers part of it and takes only that part; neighbours may decode a shared block twice.
- ``qdeq`` / ``qdeq_par``: blocks decoded in place into a flat f32 output (bit-exact).
- ``qmoe``: an expert stack decoded into RLX's DequantMoEWeights layout [E, K, N] (each
  expert's W [N, K] transposed), a few rows at a time through a small scratch.
"""
from __future__ import annotations

DRIVERS = '''
from numba import float32 as _nb_f32
from numba.np.linalg import _BLAS

_xxgemm = _BLAS().numba_xxgemm(_nb_f32)
_decode = {dec}
_dot = {dot}
PREFETCH = {prefetch}
# the loops live in serial functions called from prange: inside a parfor body the
# fastmath flags do not reach the loops (a dot there ran unvectorized, 25x slower)
_FM = dict(cache=True, nogil=True, fastmath={{"reassoc", "contract"}})


@njit(cache=True, nogil=True)
def qdeq(buf, out, bs, bb, nblocks):
    for b in range(nblocks):
        _decode(buf, b * bb, out, b * bs)


@njit(cache=True, nogil=True, parallel=True)
def qdeq_par(buf, out, bs, bb, nblocks, per, nthr):
    # tasks of `per` blocks, claimed by the threads as they come free (claim)
    tasks = (nblocks + per - 1) // per
    counter = np.zeros(1, np.int64)
    for w in prange(nthr):
        t = claim(counter)
        while t < tasks:
            for b in range(t * per, min(nblocks, (t + 1) * per)):
                _decode(buf, b * bb, out, b * bs)
            t = claim(counter)


@njit(**_FM)
def _gemv_rows(x, buf, out, j0, j1, k, bs, bb, row):
    # out[j] = W[j, :] . x for j0 <= j < j1: decode the row, then one vectorized dot
    nbk = k // bs
    rb = nbk * bb
    for j in range(j0, j1):
        base = j * rb
        for b in range(nbk):
            _decode(buf, base + b * bb, row, b * bs)
        acc = np.float32(0)
        for t in range(k):
            acc += row[t] * x[t]
        out[j] = acc


{fused_rows}@njit(cache=True, nogil=True, parallel=True)
def qgemv(x, buf, out, k, bs, bb, rows, nthr):
    n = out.size
    tasks = (n + rows - 1) // rows
    counter = np.zeros(1, np.int64)
    for w in prange(nthr):
        row = np.empty(k, np.float32)
        t = claim(counter)
        while t < tasks:
            _gemv_rows(x, buf, out, t * rows, min(n, (t + 1) * rows), k, bs, bb, row)
            t = claim(counter)


@njit(cache=True, nogil=True, parallel=True)
def qgemv_fused(x, buf, out, k, bs, bb, rows, nthr):
    n = out.size
    tasks = (n + rows - 1) // rows
    counter = np.zeros(1, np.int64)
    for w in prange(nthr):
        t = claim(counter)
        while t < tasks:
            _gemv_rows_fused(x, buf, out, t * rows, min(n, (t + 1) * rows), k, bs, bb)
            t = claim(counter)


@njit(cache=True, nogil=True)
def _tile(xf, buf, of, m, k, n, bs, bb, j0, nr, kc, tile, one, zero):
    # of[:, j0:j0 + nr] = x @ W[j0:j0 + nr].T, kc columns of W decoded at a time
    rb = (k // bs) * bb
    for k0 in range(0, k, kc):
        kcur = min(kc, k - k0)
        nbk = kcur // bs
        for r in range(nr):
            base = (j0 + r) * rb + (k0 // bs) * bb
            for b in range(nbk):
                _decode(buf, base + b * bb, tile, r * kc + b * bs)
        # column-major view: C[nr, m] (ldc n) = tile^T [nr, kcur] @ x^T [kcur, m]
        _xxgemm(115, 116, 110, nr, m, kcur, one.ctypes, tile.ctypes, kc,
                xf[k0:].ctypes, k, (zero if k0 == 0 else one).ctypes,
                of[j0:].ctypes, n)


@njit(cache=True, nogil=True, parallel=True)
def qtiles(xf, buf, of, m, k, n, bs, bb, nt, kc, nthr):
    # of [m, n] (flat) = xf [m, k] (flat) @ W.T, W in tiles of nt rows
    ntiles = (n + nt - 1) // nt
    counter = np.zeros(1, np.int64)
    for w in prange(nthr):
        tile = np.empty(nt * kc, np.float32)
        one = np.ones(1, np.float32)
        zero = np.zeros(1, np.float32)
        t = claim(counter)
        while t < ntiles:
            _tile(xf, buf, of, m, k, n, bs, bb, t * nt, min(nt, n - t * nt), kc, tile, one,
                  zero)
            t = claim(counter)


@njit(cache=True, nogil=True)
def _moe_rows(buf, out3, e, j0, j1, bs, bb, tile):
    # out3[e, :, j0:j1] = W_e[j0:j1, :].T: the blocks covering those rows' flat elements
    # (rows may start mid-block) decoded into tile, then written row-block by column
    k = out3.shape[1]
    n = out3.shape[2]
    first = (e * n + j0) * k                   # flat element of W_e[j0, 0] in the stack
    b0 = first // bs
    b1 = ((e * n + j1) * k + bs - 1) // bs
    for b in range(b0, b1):
        _decode(buf, b * bb, tile, (b - b0) * bs)
    lead = first - b0 * bs
    for t in range(k):
        dst = out3[e, t, j0:j1]
        for r in range(j1 - j0):
            dst[r] = tile[lead + r * k + t]


@njit(cache=True, nogil=True, parallel=True)
def qmoe(buf, out3, bs, bb, rows, nthr):
    # out3 [E, K, N] (RLX's GroupedMatMul layout) from E packed W [N, K]; tasks of `rows`
    # rows of one expert
    k = out3.shape[1]
    n = out3.shape[2]
    per = (n + rows - 1) // rows
    tasks = out3.shape[0] * per
    counter = np.zeros(1, np.int64)
    for w in prange(nthr):
        tile = np.empty(rows * k + 2 * bs, np.float32)
        t = claim(counter)
        while t < tasks:
            e = t // per
            j0 = (t % per) * rows
            _moe_rows(buf, out3, e, j0, min(n, j0 + rows), bs, bb, tile)
            t = claim(counter)


@njit(**_FM)
def _straddle_rows(x, buf, out, j0, j1, k, bs, bb, blk, acc):
    # out[:, j] = x @ W[j, :] for j0 <= j < j1, blocks crossing row ends (k % bs != 0)
    m = x.shape[0]
    for j in range(j0, j1):
        acc[:] = 0
        lo = j * k
        hi = lo + k
        for b in range(lo // bs, (hi - 1) // bs + 1):
            _decode(buf, b * bb, blk, 0)
            e0 = max(lo, b * bs)
            e1 = min(hi, (b + 1) * bs)
            for i in range(m):
                s = np.float32(0)
                for e in range(e0, e1):
                    s += blk[e - b * bs] * x[i, e - lo]
                acc[i] += s
        for i in range(m):
            out[i, j] = acc[i]


@njit(cache=True, nogil=True, parallel=True)
def qstraddle(x, buf, out, k, bs, bb, rows, nthr):
    n = out.shape[1]
    tasks = (n + rows - 1) // rows
    counter = np.zeros(1, np.int64)
    for w in prange(nthr):
        blk = np.empty(bs, np.float32)
        acc = np.empty(x.shape[0], np.float32)
        t = claim(counter)
        while t < tasks:
            _straddle_rows(x, buf, out, t * rows, min(n, (t + 1) * rows), k, bs, bb, blk, acc)
            t = claim(counter)
'''


def _fused_rows(chains: int) -> str:
    """``_gemv_rows_fused`` with ``chains`` accumulators over consecutive blocks (so the
    multiply-adds of one block need not wait for the previous block's). It prefetches: the
    hardware prefetcher alone left the GEMV at about 60% of its L3-resident speed on a
    weight read from DRAM (Q8_0 4096 x 4096, 2 threads: 1.14 ms from DRAM, 0.73 ms from
    L3; 0.59 ms from DRAM with the prefetch)."""
    accs = [f"a{c}" for c in range(chains)]
    zero = "".join(f"        {a} = vzero16()\n" for a in accs)
    steps = "".join(f"            {a} = _dot(buf, base + (b + {c}) * bb, x, (b + {c}) * bs, {a})\n"
                    for c, a in enumerate(accs))
    total = accs[0]
    for a in accs[1:]:
        total = f"vadd16({total}, {a})"
    return f"""@njit(cache=True, nogil=True)
def _gemv_rows_fused(x, buf, out, j0, j1, k, bs, bb):
    # as _gemv_rows, each block's 16-value steps multiplied into register accumulators
    nbk = k // bs
    rb = nbk * bb
    for j in range(j0, j1):
        base = j * rb
{zero}        for b in range(0, nbk - {chains - 1}, {chains}):
            for line in range(0, {chains} * bb, 64):
                prefetch(buf, base + b * bb + PREFETCH + line)
{steps}        for b in range(nbk - nbk % {chains}, nbk):
            a0 = _dot(buf, base + b * bb, x, b * bs, a0)
        out[j] = vsum16({total})


"""


def driver_source(decoder: str, decoder_src: str, dot: str | None = None,
                  chains: int = 1, prefetch: int = 2048) -> str:
    """The kernel module source of one scheme: its decoder (and fused dot step, when it has
    one: ``qgemv_fused`` needs it, with ``chains`` accumulators and a software prefetch of
    every cache line ``prefetch`` bytes ahead of the blocks it reads), then the drivers."""
    return decoder_src + DRIVERS.format(dec=decoder, dot=dot or "None",
                                        fused_rows=_fused_rows(chains), prefetch=prefetch)
