"""Lowering of Fft (``_fft_src``): radix-2 Stockham stages, Bluestein, or a direct DFT.

Power-of-two rows longer than ``DIRECT_MAX`` run log2(N) launches of one butterfly per
work-item, ping-ponging (re, im) pairs in the accumulation type through two plan scratch
buffers. Other rows longer than ``BLUESTEIN_MIN`` run Bluestein's chirp-z transform over
the same stages at M = 2^m >= 2N - 1 (the chirp's own FFT is computed once on the host);
short rows run the direct DFT, one output element per work-item. Twiddles and chirps are
host tables computed in f64 from exact integer phases.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.dtype import DType
from ...ops._spectral_ref import output_scale
from . import memory
from ._fft_src import bluestein_sources, direct_source, stage_source
from .launch import bind_1d, scalar
from .lowering import Step, lowers

DIRECT_MAX = 16           # power-of-two rows up to this length run the direct DFT
BLUESTEIN_MIN = 64        # other rows above this length run Bluestein


def _acc(ctx) -> tuple:
    return ("double", np.float64) if ctx.device.fp64 else ("float", np.float32)


def _pairs(z: np.ndarray, acc_np) -> np.ndarray:
    return np.stack([z.real, z.imag], 1).reshape(-1).astype(acc_np)


def _upload(ctx, host):
    return memory.upload(ctx.program.context, ctx.queue, host)


def _twiddles(ctx, n: int, acc_np):
    return _upload(ctx, _pairs(np.exp(2j * np.pi * np.arange(max(n, 1)) / max(n, 1)), acc_np))


def _keep(launches, keep):
    def run():
        for f in launches:
            f()
    run.keep = keep               # kernel arguments do not keep a buffer alive
    return run


class _Stages:
    """log2(m) Stockham stages over rows of m; ``bind`` gives their launchers."""

    def __init__(self, ctx, dt, acc, acc_np, m: int, rows: int, ends: bool):
        self.ctx, self.m, self.rows, self.acc = ctx, m, rows, acc
        self.count = m.bit_length() - 1
        # ends: the first stage reads x's layout and the last writes the output's
        self.refs = [ctx.kernel(*reversed(stage_source(
            dt, acc, ends and s == 0, ends and s == self.count - 1)))
            for s in range(self.count)]
        self.tw = _twiddles(ctx, m, acc_np)

    def bind(self, src, dst, pool, sign: float, scale: float) -> list:
        """Launchers from ``src`` to ``dst``; each stage between writes the buffer of
        ``pool`` it does not read (a Stockham stage never runs in place)."""
        out, cur = [], src
        for s, ref in enumerate(self.refs):
            nxt = dst if s == self.count - 1 else next(b for b in pool if b is not cur)
            out.append(bind_1d(ref, self.ctx.device, self.ctx.queue,
                               self.rows * (self.m // 2), [
                                   nxt.buf, cur.buf, self.tw.buf, scalar(self.rows),
                                   scalar(self.m), scalar(1 << s), scalar(sign, self.acc),
                                   scalar(scale, self.acc)]))
            cur = nxt
        return out


@lowers("Fft", (DType.F32, DType.F64, DType.C64))
def _fft(node, ins, ctx):
    dims, dt, a = tuple(ins[0].dims), ins[0].dtype, node.attrs
    n = dims[-1] if dt is DType.C64 else dims[-1] // 2
    rows = math.prod(dims[:-1]) if n else 0
    acc, acc_np = _acc(ctx)
    sign = -1.0 if not a.inverse else 1.0
    scale = output_scale(a.norm, max(n, 1), a.inverse)
    pow2 = n & (n - 1) == 0
    if (pow2 and n > DIRECT_MAX) or (not pow2 and n > BLUESTEIN_MIN):
        return (_radix2 if pow2 else _bluestein)(ctx, dt, acc, acc_np, n, rows, sign, scale)
    name, text = direct_source(dt, acc)
    ref = ctx.kernel(text, name)
    tw = _twiddles(ctx, n, acc_np)

    def bind(out, x):
        return _keep([bind_1d(ref, ctx.device, ctx.queue, rows * n, [
            out.buf, x.buf, tw.buf, scalar(rows), scalar(n), scalar(sign, acc),
            scalar(scale, acc)])], (tw,))
    return Step(bind)


def _radix2(ctx, dt, acc, acc_np, n, rows, sign, scale) -> Step:
    stages = _Stages(ctx, dt, acc, acc_np, n, rows, True)
    bufs = [memory.empty(ctx.program.context, (rows * n * 2,), acc_np) for _ in range(2)]

    def bind(out, x):
        return _keep(stages.bind(x, out, bufs, sign, scale), (stages.tw, *bufs))
    return Step(bind)


def _bluestein(ctx, dt, acc, acc_np, n, rows, sign, scale) -> Step:
    m = 1 << (2 * n - 2).bit_length()                  # the least 2^k >= 2n - 1
    j = np.arange(n, dtype=np.int64)
    chirp = np.exp(sign * 1j * np.pi * ((j * j) % (2 * n)) / n)    # exact phases
    b = np.zeros(m, np.complex128)
    b[:n] = np.conj(chirp)
    b[m - n + 1:] = np.conj(chirp[1:])[::-1]
    w, bf = _upload(ctx, _pairs(chirp, acc_np)), _upload(ctx, _pairs(np.fft.fft(b), acc_np))
    stages = _Stages(ctx, dt, acc, acc_np, m, rows, False)
    (n_in, t_in), (n_mul, t_mul), (n_out, t_out) = bluestein_sources(dt, acc)
    k_in, k_mul, k_out = (ctx.kernel(t, nm) for nm, t in
                          ((n_in, t_in), (n_mul, t_mul), (n_out, t_out)))
    bufs = [memory.empty(ctx.program.context, (rows * m * 2,), acc_np) for _ in range(3)]
    dev, q = ctx.device, ctx.queue

    def bind(out, x):
        p0, p1, p2 = bufs          # a in p0 -> A in p2 (C after the product) -> c in p0
        fwd = stages.bind(p0, p2, [p1, p0], sign, 1.0)
        inv = stages.bind(p2, p0, [p1, p2], -sign, 1.0)
        launches = [bind_1d(k_in, dev, q, rows * m, [
            p0.buf, x.buf, w.buf, scalar(rows), scalar(n), scalar(m)])]
        launches += fwd + [bind_1d(k_mul, dev, q, rows * m, [
            p2.buf, bf.buf, scalar(rows), scalar(m)])] + inv
        launches.append(bind_1d(k_out, dev, q, rows * n, [
            out.buf, p0.buf, w.buf, scalar(rows), scalar(n), scalar(m),
            scalar(scale / m, acc)]))
        return _keep(launches, (w, bf, stages.tw, *bufs))
    return Step(bind)
