"""Lowering of SelectiveScan, Mamba2 and GatedDeltaNet (``_sequence_src``).

One launch per node runs the whole sequence, a lane per work-item (batch × channel;
GatedDeltaNet: batch × head × state column), the state in f64 where the device has fp64
(else f32) across time steps.
Scratch for states too wide for private memory lives with the plan.
"""
from __future__ import annotations

import math

import numpy as np

from . import memory
from ._sequence_src import (
    gated_delta_net_source,
    mamba2_source,
    private_state,
    selective_scan_source,
)
from .launch import bind_1d, scalar
from .lowering import FLOAT_DTYPES, Step, lowers

_STATE = "state and sums in f64 (f32 without cl_khr_fp64), one rounding per output"


def _acc(ctx) -> tuple:
    return ("double", np.float64) if ctx.device.fp64 else ("float", np.float32)


def _launch(ctx, source, lanes: int, scratch_cells: int, extra) -> Step:
    name, text = source
    ref = ctx.kernel(text, name)
    scratch = memory.empty(ctx.program.context, (max(1, scratch_cells),), _acc(ctx)[1])

    def bind(out, *xs):
        launch = bind_1d(ref, ctx.device, ctx.queue, lanes,
                         [out.buf] + [x.buf for x in xs] + extra(scratch), local=64)

        def run():
            launch()
        run.keep = (scratch,)     # kernel arguments do not keep a buffer alive
        return run
    return Step(bind)


@lowers("SelectiveScan", FLOAT_DTYPES, reason=_STATE)
def _selective_scan(node, ins, ctx):
    bt, sq, hd = ins[0].dims
    n = node.attrs.state_size
    lanes = bt * hd if math.prod(node.shape.dims) else 0
    acc = _acc(ctx)[0]
    return _launch(ctx, selective_scan_source(node.shape.dtype, acc, n), lanes,
                   0 if private_state(n) else lanes * n,
                   lambda s: [s.buf, scalar(bt), scalar(sq), scalar(hd)])


@lowers("Mamba2", FLOAT_DTYPES, reason=_STATE)
def _mamba2(node, ins, ctx):
    bt, sq, hd, p = ins[0].dims
    n = node.attrs.state_size
    lanes = bt * hd * p if math.prod(node.shape.dims) else 0
    acc = _acc(ctx)[0]
    return _launch(ctx, mamba2_source(node.shape.dtype, acc, n), lanes,
                   0 if private_state(n) else lanes * n,
                   lambda s: [s.buf, scalar(bt), scalar(sq), scalar(hd), scalar(p)])


@lowers("GatedDeltaNet", FLOAT_DTYPES, reason=_STATE)
def _gated_delta_net(node, ins, ctx):
    bt, sq, hd, n = ins[0].dims
    a = node.attrs
    lanes = bt * hd * n if math.prod(node.shape.dims) else 0
    acc, acc_np = _acc(ctx)
    gw = n if a.gate_per_channel else 1
    scale = acc_np(1.0) / np.sqrt(acc_np(n)) if n else acc_np(0)
    name, text = gated_delta_net_source(node.shape.dtype, acc, n)
    ref = ctx.kernel(text, name)
    cells = 0 if private_state(n) else lanes * n
    scratch = memory.empty(ctx.program.context, (max(1, cells),), acc_np)

    def bind(out, q, k, v, g, beta, state=None):
        st = state if a.carry_state else q         # never read without carry_state
        launch = bind_1d(ref, ctx.device, ctx.queue, lanes, [
            out.buf, q.buf, k.buf, v.buf, g.buf, beta.buf, st.buf, scratch.buf,
            scalar(bt), scalar(sq), scalar(hd), scalar(int(a.carry_state), "int"),
            scalar(gw, "int"), scalar(scale, acc)], local=64)

        def run():
            launch()
        run.keep = (scratch,)
        return run
    return Step(bind)
