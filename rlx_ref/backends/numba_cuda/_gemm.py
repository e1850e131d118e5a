"""The register-tiled GEMM template behind MatMul, DotGeneral, Conv and ConvTranspose2d.

One block computes a BM×BN tile of ``out[batch] = A[batch] · B[batch]`` (M×K by K×N);
each of its BM/TM × BN/TN threads owns TM×TN outputs held in registers. Per step of BK
along K the block stages an A tile (stored K-major, rows padded by 4 so the transposing
stores hit 32 distinct banks) and a B tile in shared memory, then every thread forms
TM×TN outer-product updates from TM + TN shared reads: 8×8 outputs per thread turn 16
shared loads into 64 FMAs, which is what lifts the kernel from the shared-memory bound
of one-output-per-thread tiling towards the FMA bound. A thread's rows are ``ty + i·TY``
and its columns ``tx + j·TX`` (strided, not blocked), so a warp's shared reads are
broadcasts or 16 consecutive words, and its stores are coalesced rows.

Callers supply how an element of A and of B is read (statements assigning ``v``; the
loads run only inside the bounds, so ragged M, N and K read zeros past the edges) and
how an output is stored (statements reading ``value``); conv kinds gather B from the
image (implicit GEMM) instead of materializing columns.
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass

from .device import simulator_active
from .lower_reduce import _render


@dataclass(frozen=True)
class Tiling:
    bm: int
    bn: int
    bk: int
    tm: int
    tn: int

    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)


BIG = Tiling(128, 128, 8, 8, 8)      # f32 and 16-bit inputs: 256 threads, 64 acc registers
WIDE = Tiling(64, 64, 8, 4, 4)       # f64/i64 accumulators (twice the registers each)
SIM = Tiling(8, 8, 4, 2, 2)          # the simulator runs a Python thread per CUDA thread


def tiling(acc: str, m: int, n: int) -> Tiling:
    """The tile shape for an ``acc`` accumulator and an M×N output."""
    if simulator_active():
        return SIM
    if acc == "np.float32" and m >= 96 and n >= 96:
        return BIG
    return WIDE


_TEMPLATE = '''
def {name}(out, a, b, m, n, k_len, batches{extra}):
    sa = cuda.shared.array(({BK}, {BMP}), {acc})
    sb = cuda.shared.array(({BK}, {BN}), {acc})
    acc = cuda.local.array(({TM}, {TN}), {acc})
    ra = cuda.local.array({TM}, {acc})
    rb = cuda.local.array({TN}, {acc})
    ga = cuda.local.array({PA}, {acc})
    gb = cuda.local.array({PB}, {acc})
    t = cuda.threadIdx.x
    ty = t // {TX}
    tx = t - ty * {TX}
    tiles_n = (n + {BN} - 1) // {BN}
    per_batch = ((m + {BM} - 1) // {BM}) * tiles_n
    tile = cuda.blockIdx.x
    while tile < per_batch * batches:
        batch = tile // per_batch
        rest = tile - batch * per_batch
        row0 = (rest // tiles_n) * {BM}
        col0 = (rest - (rest // tiles_n) * tiles_n) * {BN}
{setup}
        for i in range({TM}):
            for j in range({TN}):
                acc[i, j] = 0
        # step s stores the tile fetched at step s - 1, fetches the next one into
        # registers, then multiplies: the fetch's latency hides behind the FMAs
        for s in range((k_len + {BK} - 1) // {BK} + 1):
            if s > 0:
                for p in range({PA}):
                    e = p * {NT} + t
                    sa[e % {BK}, e // {BK}] = ga[p]
                for p in range({PB}):
                    e = p * {NT} + t
                    sb[e // {BN}, e % {BN}] = gb[p]
                cuda.syncthreads()
            k0 = s * {BK}
            if k0 < k_len:
{fetch}
            if s > 0:
{product}
                cuda.syncthreads()
        for i in range({TM}):
            row = row0 + ty + i * {TY}
            if row < m:
                for j in range({TN}):
                    col = col0 + tx + j * {TX}
                    if col < n:
                        value = acc[i, j]
{store}
        tile += cuda.gridDim.x
'''
# a K step's global loads go to registers one step ahead (one block of 256 threads per
# SM could not hide their latency otherwise)
_FETCH = '''
for p in range({PA}):
    e = p * {NT} + t
    row = row0 + e // {BK}
    ka = k0 + e % {BK}
    v = {acc}(0)
    if row < m and ka < k_len:
{load_a}
    ga[p] = v
for p in range({PB}):
    e = p * {NT} + t
    kb = k0 + e // {BN}
    col = col0 + e % {BN}
    v = {acc}(0)
    if kb < k_len and col < n:
{load_b}
    gb[p] = v
'''
_STEP = '''
                for i in range({TM}):
                    ra[i] = sa[{kk}, ty + i * {TY}]
                for j in range({TN}):
                    rb[j] = sb[{kk}, tx + j * {TX}]
                for i in range({TM}):
                    for j in range({TN}):
                        acc[i, j] += ra[i] * rb[j]
'''


def render_gemm(prefix: str, acc: str, tl: Tiling, load_a: str, load_b: str, store: str,
                setup: str = "", extra: tuple = ()) -> tuple[str, str]:
    """(kernel name, source). ``load_a`` may read ``row``, ``ka``; ``load_b`` ``kb``,
    ``col``; both assign ``v`` (an ``acc`` value). ``store`` writes ``value`` at
    (``batch``, ``row``, ``col``); ``setup`` runs once per tile (knows ``batch``). The
    snippets must not assign the template's own names (t, tx, ty, e, p, i, j, k0...)."""
    nt = tl.threads
    tx, ty = tl.bn // tl.tn, tl.bm // tl.tm
    pa, pb = tl.bm * tl.bk // nt, tl.bk * tl.bn // nt
    fetch = _FETCH.format(PA=pa, PB=pb, NT=nt, BK=tl.bk, BN=tl.bn, acc=acc,
                          load_a=ind(load_a, 8), load_b=ind(load_b, 8))
    # the K step is unrolled in the source: constant shared offsets, no loop counter
    product = "".join(_STEP.format(kk=kk, TM=tl.tm, TN=tl.tn, TX=tx, TY=ty)
                      for kk in range(tl.bk))
    return _render(_TEMPLATE, prefix, acc=acc, BM=tl.bm, BN=tl.bn, BK=tl.bk, TM=tl.tm,
                   TN=tl.tn, BMP=tl.bm + 4, NT=nt, TX=tx, TY=ty, PA=pa, PB=pb,
                   extra="".join(", " + x for x in extra), product=product,
                   setup=ind(setup, 8) or "        pass", fetch=ind(fetch, 16),
                   store=ind(store, 24))


def ind(code: str, n: int) -> str:
    """``code`` dedented, stripped and indented by ``n`` spaces."""
    return textwrap.indent(textwrap.dedent(code).strip(), " " * n)


def gemm_blocks(tl: Tiling, m: int, n: int, batches: int) -> int:
    """How many tiles the launch covers (its grid-stride loop takes the rest)."""
    return batches * -(-m // tl.bm) * -(-n // tl.bn)
