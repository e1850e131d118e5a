"""Lowering of the sequence family: SelectiveScan, Mamba2, GatedDeltaNet, Lstm, Gru, Rnn.

Each node is one kernel call over the whole sequence (``_sequence_kernels``), the recurrent
state in local f64 arrays across time steps, every output rounded once: the state-space
scans in a prange over independent lanes, Lstm/Gru/Rnn with BLAS products. Packed RNN weights are widened to f64 once per run and read flat, with
per-block offsets computed here; their products are BLAS calls inside the kernel.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.dtype import DType
from ...ops._sequence_ref import GATES, block_sizes
from . import _sequence_kernels as K
from .kernels import compile_kernel
from .lower_linalg import blas_serial
from .lowering import Step, lowers

FLOATS = (DType.F32, DType.F64)
_STATE = "state and sums in f64 locals, one rounding per output"


def _c(a):
    return np.ascontiguousarray(a)


@lowers("SelectiveScan", FLOATS, reason=_STATE)
def lower_selective_scan(node, ins, ctx) -> Step:
    kernel = compile_kernel("selective_scan", K.SELECTIVE_SCAN)

    def run(out, x, delta, a, b, c):
        if out.size:
            kernel.fn(_c(x), _c(delta), _c(a), _c(b), _c(c), out)
    return Step(run, [kernel])


@lowers("Mamba2", FLOATS, reason=_STATE)
def lower_mamba2(node, ins, ctx) -> Step:
    kernel = compile_kernel("mamba2", K.MAMBA2)

    def run(out, x, dt, a, b, c):
        if out.size:
            kernel.fn(_c(x), _c(dt), _c(a), _c(b), _c(c), out)
    return Step(run, [kernel])


@lowers("GatedDeltaNet", FLOATS, reason=_STATE)
def lower_gated_delta_net(node, ins, ctx) -> Step:
    kernel = compile_kernel("gated_delta_net", K.GATED_DELTA_NET)
    a = node.attrs
    scale = 1.0 / math.sqrt(a.state_size)

    def run(out, q, k, v, g, beta, state=None):
        if not out.size:
            return
        bt, sq, hd, n = q.shape
        g4 = _c(g).reshape(bt, sq, hd, n if a.gate_per_channel else 1)
        st = _c(state) if a.carry_state else np.zeros((1, 1, n, n), q.dtype)
        kernel.fn(_c(q), _c(k), _c(v), g4, _c(beta), st, out, a.carry_state, scale)
    return Step(run, [kernel])


_MODES = {"Lstm": 0, "Gru": 1}


def _lower_recurrent(node, ins) -> Step:
    kind, a = node.kind, node.attrs
    kernel = compile_kernel("recurrent", K.RECURRENT)
    gates, dirs = GATES[kind], 2 if a.bidirectional else 1
    mode = _MODES.get(kind, 3 if kind == "Rnn" and a.relu else 2)
    s_ih = block_sizes(gates, ins[0].dims[2], a.hidden_size, a.num_layers, dirs)[0]
    ih_off = np.concatenate([[0], np.cumsum(s_ih)[:-1]]).astype(np.int64)
    nb = 2 if kind == "Gru" else 1

    def run(out, x, w_ih, w_hh, *rest):
        if not out.size:
            return
        dt = x.dtype
        flat = [np.asarray(v, np.float64).reshape(-1) for v in (w_ih, w_hh) + rest[:nb]]
        b2 = flat[3] if nb == 2 else np.zeros(1)
        states = [_c(v) for v in rest[nb:]] if a.carry else []
        none = np.zeros((1, 1, 1), dt)
        h0 = states[0] if states else none
        c0 = states[1] if len(states) > 1 else none
        # BLAS held at one thread beside Numba's pool (lower_linalg's module docstring)
        blas_serial(kernel.fn, _c(x), flat[0], flat[1], flat[2], b2, h0, c0, out,
                    a.hidden_size, a.num_layers, dirs, gates, mode, ih_off, a.carry)
    return Step(run, [kernel])


@lowers("Lstm", FLOATS, reason=_STATE)
def lower_lstm(node, ins, ctx) -> Step:
    return _lower_recurrent(node, ins)


@lowers("Gru", FLOATS, reason=_STATE)
def lower_gru(node, ins, ctx) -> Step:
    return _lower_recurrent(node, ins)


@lowers("Rnn", FLOATS, reason=_STATE)
def lower_rnn(node, ins, ctx) -> Step:
    return _lower_recurrent(node, ins)
