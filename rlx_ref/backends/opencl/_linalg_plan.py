"""Planning a batched matrix product on an OpenCL device: which kernels, what scratch, how
the launches are bound.

``Gemm`` computes ``out[b] = A[ia[b]] · B[ib[b]]`` (``[M, K] · [K, N]``, output batches C
ordered and contiguous) from two ``Packer``s that say where each operand element lives.
Output batches may run in chunks (a conv unfolds a few images at a time into scratch);
the lhs is packed once per run, the rhs once per chunk. ``Direct`` is the one-kernel product for
small sizes, where a packing pass would cost more launches than the product itself;
``Skinny`` the CPU product of a few lhs rows read in place.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...ir.dtype import DType
from . import _reduce_c as rc
from . import memory
from ._linalg_cl import COMPUTE, scratch, upload_longs
from ._linalg_gemm import (
    GPU_RT,
    GPU_TK,
    MR,
    NV,
    accumulates_in_place,
    cpu_source,
    direct_source,
    gpu_source,
    skinny_source,
    skinny_vectors,
    vec_width,
)
from ._linalg_pack import pack_source
from .launch import bind_nd, round_up, scalar

KC = 256                     # CPU k block: a KC × NR rhs panel is 16 KiB (L1)
MCP_ROWS = 192               # CPU macro tile rows (an L2-resident lhs block of KC rows)
NCP_COLS = 64                # CPU macro tile columns
PACK_LOCAL = 64
_SIZE = {"float": 4, "double": 8, "uint": 4, "ulong": 8}


@dataclass
class Packer:
    """Where packed operand elements come from: ``kind`` is ``table`` (``tab`` holds
    [matrix offsets | free offsets | k offsets]) or a conv unfold (``geo``); ``count`` is
    the matrices packed (None, rhs only: one per output batch of each chunk)."""

    kind: str
    src_dt: DType
    free: int
    k: int
    count: int | None
    tab: memory.DevArray | None = None
    geo: memory.DevArray | None = None
    free_fast: bool = True           # the free index is the source's contiguous axis
    unit: bool = False               # table: free offsets step by exactly 1


def table_packer(ctx, src_dt, mats, free, ks) -> Packer:
    """A packer reading element (b, f, k) at ``mats[b] + free[f] + ks[k]``."""
    tab = upload_longs(ctx, np.concatenate([mats, free, ks]).astype(np.int64))
    step = (lambda t: abs(int(t[1]) - int(t[0])) if len(t) > 1 else 1 << 62)
    free = np.asarray(free, np.int64)
    unit = bool(len(free) < 2 or (np.diff(free) == 1).all())
    return Packer("table", src_dt, len(free), len(ks), len(mats), tab=tab,
                  free_fast=step(free) < step(ks), unit=unit)


def gpu_local(device) -> int:
    """Side L of the GPU kernel's L × L work-groups (the largest the device allows)."""
    for side in (16, 8, 4, 2):
        if side * side <= device.max_work_group:
            return side
    return 1


def kernel(ctx, named_source: tuple):
    """The handle of a ``(name, source)`` kernel in ``ctx``'s program."""
    name, source = named_source
    return ctx.kernel(source, name)


def _or(arr, other):
    """``arr``'s buffer, or ``other``'s as a placeholder argument the kernel never reads."""
    return (arr if arr is not None else other).buf


class Gemm:
    """The packed product of one node (see the module docstring)."""

    def __init__(self, ctx, out_dt: DType, M: int, N: int, K: int, a: Packer, b: Packer,
                 ia, ib, chunks: list):
        self.ctx, self.out_dt = ctx, out_dt
        self.M, self.N, self.K, self.a, self.b = M, N, K, a, b
        self.chunks = chunks                      # [(first output batch, batches)]
        ct = COMPUTE[out_dt]
        self.cpu = not rc.gpu_style(ctx.device)
        if self.cpu:
            nr = vec_width(ct) * NV
            self.ga = (MR, -(-M // MR), K)        # (W, panels, Kp)
            self.gb = (nr, -(-N // nr), K)
            self.mm = kernel(ctx, cpu_source(out_dt))
        else:
            self.L = gpu_local(ctx.device)
            tm = GPU_RT * self.L
            kp = round_up(K, GPU_TK)
            self.ga = (round_up(M, tm), 1, kp)
            self.gb = (round_up(N, tm), 1, kp)
            self.mm = kernel(ctx, gpu_source(out_dt, self.L))
        panel = (lambda g: g[0]) if self.cpu else (lambda g: None)
        self.pack_a = kernel(ctx, pack_source(a.kind, a.src_dt, ct, panel(self.ga),
                                              a.free_fast, a.unit))
        self.pack_b = kernel(ctx, pack_source(b.kind, b.src_dt, ct, panel(self.gb),
                                              b.free_fast, b.unit))
        per = [g[0] * g[1] * g[2] for g in (self.ga, self.gb)]
        most = max(n for _, n in chunks)
        self.a_elems = per[0] * a.count
        self.b_elems = per[1] * (b.count or most)
        self.nbytes = (self.a_elems + self.b_elems) * _SIZE[ct]
        self.scratch = scratch(ctx)
        self.scratch.need(self.nbytes)
        self.ia, self.ib = upload_longs(ctx, ia), upload_longs(ctx, ib)

    def _pack(self, ref, p: Packer, geom, src, buf, off: int, b0: int, count: int):
        w, panels, kp = geom
        args = [buf, scalar(off), src.buf, _or(p.tab, self.ia), _or(p.geo, self.ia),
                scalar(b0, "int"), scalar(count, "int"), scalar(p.free, "int"),
                scalar(p.k, "int"), scalar(w, "int"), scalar(panels, "int"),
                scalar(kp, "int")]
        lsz = min(PACK_LOCAL, self.ctx.device.max_work_group)
        if self.cpu and p.free_fast:        # one work-item per (panel, k, matrix)
            gsz = (round_up(panels, lsz), kp, count)
        elif self.cpu:                      # one per (k, panel, matrix)
            gsz = (round_up(kp, lsz), panels, count)
        else:                   # one per (padded row or column, k, matrix)
            gsz = (round_up(w, lsz), kp, count)
        return bind_nd(ref, self.ctx.queue, gsz, (lsz, 1, 1), args)

    def _product(self, out, buf, b0: int, nb: int):
        M, N = self.M, self.N
        head = [out.buf, scalar(b0 * M * N), buf, scalar(0), scalar(self.a_elems),
                self.ia.buf, self.ib.buf, scalar(M, "int"), scalar(N, "int")]
        if self.cpu:
            kc = KC if accumulates_in_place(self.out_dt) else max(self.K, 1)
            ncp = max(1, NCP_COLS // self.gb[0])
            mcp = self._row_panels(-(-self.gb[1] // ncp) * nb)
            args = head + [scalar(self.K, "int"), scalar(kc, "int"), scalar(mcp, "int"),
                           scalar(ncp, "int")]
            gsz = (-(-self.gb[1] // ncp), -(-self.ga[1] // mcp), nb)
            return bind_nd(self.mm, self.ctx.queue, gsz, (1, 1, 1), args)
        args = head + [scalar(self.ga[0], "int"), scalar(self.gb[0], "int"),
                       scalar(self.ga[2], "int")]
        L, tm = self.L, GPU_RT * self.L
        gsz = (self.gb[0] // tm * L, self.ga[0] // tm * L, nb)
        return bind_nd(self.mm, self.ctx.queue, gsz, (L, L, 1), args)

    def _row_panels(self, col_items: int) -> int:
        """Row panels per CPU work-item: at most MCP_ROWS rows, split evenly, and enough
        work-items to keep every compute unit busy (4 each) while tiles stay >= 4 panels."""
        mp = self.ga[1]
        tiles = -(-mp // max(1, MCP_ROWS // MR))
        want = 4 * self.ctx.device.compute_units
        tiles = max(tiles, min(-(-mp // 4), -(-want // max(col_items, 1))))
        return -(-mp // tiles)

    def bind(self, out, xa, xb):
        """The launcher: pack lhs, then per chunk pack rhs and multiply."""
        buf = self.scratch.buffer(self.nbytes)
        steps = [self._pack(self.pack_a, self.a, self.ga, xa, buf, 0, 0, self.a.count)]
        for b0, nb in self.chunks:
            steps.append(self._pack(self.pack_b, self.b, self.gb, xb, buf, self.a_elems, b0,
                                    self.b.count or nb))
            steps.append(self._product(out, buf, b0, nb))

        def launch():
            for s in steps:
                s()
        return launch


class Direct:
    """One work-item per output through offset tables (small products, K = 0)."""

    def __init__(self, ctx, in_dt: DType, out_dt: DType, M: int, N: int, K: int, nb: int,
                 a_tabs, b_tabs):
        self.ctx, self.M, self.N, self.K, self.nb = ctx, M, N, K, nb
        self.ref = kernel(ctx, direct_source(in_dt, out_dt))
        self.tab = upload_longs(ctx, np.concatenate(list(a_tabs) + list(b_tabs)))

    def bind(self, out, xa, xb):
        dev = self.ctx.device
        l0 = 8 if dev.max_work_group >= 64 else 1
        l1 = 8 if dev.max_work_group >= 64 else 1
        args = [out.buf, xa.buf, xb.buf, self.tab.buf, scalar(self.nb, "int"),
                scalar(self.M, "int"), scalar(self.N, "int"), scalar(self.K, "int")]
        gsz = (round_up(self.N, l0), round_up(self.M, l1), self.nb)
        return bind_nd(self.ref, self.ctx.queue, gsz, (l0, l1, 1), args)


class Skinny:
    """A product with few lhs rows over row-major operands (MatMul on a CPU): read in
    place, no packing pass (see ``skinny_source``)."""

    def __init__(self, ctx, dt: DType, M: int, N: int, K: int, ia, ib):
        self.ctx, self.N, self.K, self.nb = ctx, N, K, len(ia)
        self.nr = vec_width(COMPUTE[dt]) * skinny_vectors(M)
        self.ref = kernel(ctx, skinny_source(dt, M))
        self.ia, self.ib = upload_longs(ctx, ia), upload_longs(ctx, ib)

    def bind(self, out, xa, xb):
        lsz = min(8, self.ctx.device.max_work_group)
        args = [out.buf, xa.buf, xb.buf, self.ia.buf, self.ib.buf, scalar(self.N, "int"),
                scalar(self.K, "int")]
        gsz = (round_up(-(-self.N // self.nr), lsz), self.nb)
        return bind_nd(self.ref, self.ctx.queue, gsz, (lsz, 1), args)
