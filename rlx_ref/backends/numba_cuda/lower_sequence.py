"""SelectiveScan, Mamba2 and GatedDeltaNet as CUDA kernels: sequential over time,
parallel over independent lanes.

One launch runs a whole sequence. Each thread owns one lane and walks every time step
with the lane's recurrent state in an f64 local array (its size, the state size, is fixed
at lowering): a (batch, channel) pair for SelectiveScan, a (batch, head, head-dim) triple
for Mamba2, and a (batch, head, value column j) triple for GatedDeltaNet, whose state
columns S[:, j] evolve independently (decay by row, the delta's column j, the readout's
column j). Sums run in f64 and each output is rounded once, as on numba-cpu.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.dtype import DType
from .device import device_dtype, launch_shape
from .geometry import store_expr
from .kernels import Launch, array_type, compile_kernel, float_type, int_type
from .lower_reduce import _render
from .lowering import Step, lowers

FLOATS = (DType.F32, DType.F64)
_STATE = "state and sums in f64 locals, one rounding per output"

_S6 = '''
def {name}(out, x, delta, a, b, c, bt, sq, hd):
    h = cuda.local.array({N}, np.float64)
    lane = cuda.grid(1)
    step = cuda.gridsize(1)
    while lane < bt * hd:
        bi = lane // hd
        d = lane - bi * hd
        for k in range({N}):
            h[k] = 0.0
        for t in range(sq):
            row = bi * sq + t
            dl = np.float64(delta[row * hd + d])
            xv = np.float64(x[row * hd + d])
            acc = 0.0
            for k in range({N}):
                h[k] = math.exp(dl * np.float64(a[d * {N} + k])) * h[k] + \\
                    dl * np.float64(b[row * {N} + k]) * xv
                acc += np.float64(c[row * {N} + k]) * h[k]
            out[row * hd + d] = {store}
        lane += step
'''
_SSD = '''
def {name}(out, x, dt, a, b, c, bt, sq, hd, p):
    s = cuda.local.array({N}, np.float64)
    lane = cuda.grid(1)
    step = cuda.gridsize(1)
    while lane < bt * hd * p:
        bi = lane // (hd * p)
        rest = lane - bi * hd * p
        hh = rest // p
        pp = rest - hh * p
        for k in range({N}):
            s[k] = 0.0
        for t in range(sq):
            bh = (bi * sq + t) * hd + hh
            d = np.float64(dt[bh])
            decay = math.exp(d * np.float64(a[hh]))
            u = d * np.float64(x[bh * p + pp])
            acc = 0.0
            for k in range({N}):
                s[k] = decay * s[k] + u * np.float64(b[bh * {N} + k])
                acc += s[k] * np.float64(c[bh * {N} + k])
            out[bh * p + pp] = {store}
        lane += step
'''
_GDN = '''
def {name}(out, q, k, v, g, beta, state, bt, sq, hd, carry, gw, scale):
    s = cuda.local.array({N}, np.float64)
    lane = cuda.grid(1)
    step = cuda.gridsize(1)
    while lane < bt * hd * {N}:
        bh0 = lane // {N}
        j = lane - bh0 * {N}
        bi = bh0 // hd
        hh = bh0 - bi * hd
        for i in range({N}):
            s[i] = np.float64(state[(bh0 * {N} + i) * {N} + j]) if carry else 0.0
        for t in range(sq):
            bh = (bi * sq + t) * hd + hh
            e = math.exp(np.float64(g[bh * gw]))
            acc = 0.0
            for i in range({N}):
                if gw > 1:
                    e = math.exp(np.float64(g[bh * gw + i]))
                s[i] *= e
                acc += s[i] * np.float64(k[bh * {N} + i])
            sk = (np.float64(v[bh * {N} + j]) - acc) * np.float64(beta[bh])
            acc = 0.0
            for i in range({N}):
                s[i] += np.float64(k[bh * {N} + i]) * sk
                acc += s[i] * np.float64(q[bh * {N} + i])
            out[bh * {N} + j] = {store}
        lane += step
'''


def _launch(template, prefix, dt, n_arrays, n_state, extra) -> Launch:
    name, source = _render(template, prefix, N=max(int(n_state), 1),
                           store=store_expr(dt, "acc" if prefix != "gdn" else "acc * scale"))
    arr = array_type(device_dtype(dt))
    return Launch(compile_kernel(name, source), (arr,) * n_arrays + extra)


@lowers("SelectiveScan", FLOATS, reason=_STATE)
def lower_selective_scan(node, ins, ctx) -> Step:
    bt, sq, hd = (int(d) for d in ins[0].dims)
    i64 = int_type()
    launch = _launch(_S6, "s6", node.shape.dtype, 6, ins[2].dims[1], (i64,) * 3)

    def run(out, x, delta, a, b, c):
        if out.size:
            blocks, threads = launch_shape(bt * hd)
            launch(blocks, threads, out, x, delta, a, b, c, bt, sq, hd)
    return Step(run, [launch])


@lowers("Mamba2", FLOATS, reason=_STATE)
def lower_mamba2(node, ins, ctx) -> Step:
    bt, sq, hd, p = (int(d) for d in ins[0].dims)
    i64 = int_type()
    launch = _launch(_SSD, "ssd", node.shape.dtype, 6, ins[3].dims[3], (i64,) * 4)

    def run(out, x, dt, a, b, c):
        if out.size:
            blocks, threads = launch_shape(bt * hd * p)
            launch(blocks, threads, out, x, dt, a, b, c, bt, sq, hd, p)
    return Step(run, [launch])


@lowers("GatedDeltaNet", FLOATS, reason=_STATE)
def lower_gated_delta_net(node, ins, ctx) -> Step:
    a = node.attrs
    bt, sq, hd, n = (int(d) for d in ins[0].dims)
    dt = node.shape.dtype
    gw = n if a.gate_per_channel else 1
    scale = 1.0 / math.sqrt(a.state_size)
    i64 = int_type()
    launch = _launch(_GDN, "gdn", dt, 7, n, (i64,) * 5 + (float_type(),))
    empty: list = []            # a one-element stand-in for the absent state operand

    def run(out, q, k, v, g, beta, state=None):
        if not out.size:
            return
        if state is None or not a.carry_state:
            if not empty:
                from .device import import_cuda
                empty.append(import_cuda().to_device(np.zeros(1, device_dtype(dt))))
            state = empty[0]
        blocks, threads = launch_shape(bt * hd * n)
        launch(blocks, threads, out, q, k, v, g, beta, state, bt, sq, hd,
               int(a.carry_state), gw, scale)
    return Step(run, [launch])
