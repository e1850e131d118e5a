"""Samples of the sequence family: small shapes (seq <= 8, widths <= 8, state <= 4), every
payload flag, empty sequences and hand-computed recurrences."""
from __future__ import annotations

import numpy as np

from . import _sequence_ref as R
from .opdef import Sample
from .sequence import (
    GatedDeltaNetAttrs,
    Mamba2Attrs,
    RecurrentAttrs,
    RnnAttrs,
    SelectiveScanAttrs,
)


def _f(*v):
    return np.array(v, np.float32)


def _r(rng, *shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, shape).astype(np.float32)


# ── state-space scans ──────────────────────────────────────────────────────

def _ss_inputs(rng, b, s, h, n):
    return (_r(rng, b, s, h), _r(rng, b, s, h, lo=0.05, hi=1.0), _r(rng, h, n, lo=-2, hi=-0.2),
            _r(rng, b, s, n), _r(rng, b, s, n))


def selective_scan(rng):
    A = SelectiveScanAttrs
    f64 = tuple(v.astype(np.float64) for v in _ss_inputs(rng, 1, 4, 2, 3))
    # A = 0 keeps the state (decay 1): h = 2·1·1 = 2, then 2 + 2·1·2 = 6; y = c·h
    hand = (_f(1, 2).reshape(1, 2, 1), np.full((1, 2, 1), 2, np.float32),
            np.zeros((1, 1), np.float32), np.ones((1, 2, 1), np.float32),
            _f(1, 0.5).reshape(1, 2, 1))
    return [
        Sample(_ss_inputs(rng, 2, 5, 3, 4), A(4), tags=("prime-length",)),
        Sample(_ss_inputs(rng, 1, 8, 8, 4), A(4), tags=("long",)),
        Sample(_ss_inputs(rng, 1, 1, 1, 1), A(1), tags=("size-1",)),
        Sample(_ss_inputs(rng, 1, 0, 2, 2), A(2), tags=("empty",)),
        Sample(_ss_inputs(rng, 1, 4, 2, 2)[:1] + (_r(rng, 1, 4, 2, lo=5, hi=10),
                                                  _r(rng, 2, 2, lo=-90, hi=-20))
               + _ss_inputs(rng, 1, 4, 2, 2)[3:], A(2), tags=("decay-underflow",)),
        Sample(hand, A(1), tags=("hand",), expect=_f(2, 3).reshape(1, 2, 1)),
        Sample(f64, A(3), tags=("f64",)),
    ]


def _m2_inputs(rng, b, s, h, p, n):
    return (_r(rng, b, s, h, p), _r(rng, b, s, h, lo=0.05, hi=1.0), _r(rng, h, lo=-2, hi=-0.2),
            _r(rng, b, s, h, n), _r(rng, b, s, h, n))


def mamba2(rng):
    A = Mamba2Attrs
    # a = 0: S = 1·1 = 1, then 1 + 1·2 = 3; y = S·c
    hand = (_f(1, 2).reshape(1, 2, 1, 1), np.ones((1, 2, 1), np.float32),
            np.zeros(1, np.float32), np.ones((1, 2, 1, 1), np.float32),
            _f(2, 1).reshape(1, 2, 1, 1))
    f64 = tuple(v.astype(np.float64) for v in _m2_inputs(rng, 1, 3, 2, 2, 2))
    return [
        Sample(_m2_inputs(rng, 2, 5, 2, 3, 4), A(3, 4), tags=("prime-length",)),
        Sample(_m2_inputs(rng, 1, 7, 1, 2, 1), A(2, 1), tags=("size-1",)),
        Sample(_m2_inputs(rng, 0, 3, 2, 2, 2), A(2, 2), tags=("empty",)),
        Sample(hand, A(1, 1), tags=("hand",), expect=_f(2, 3).reshape(1, 2, 1, 1)),
        Sample(f64, A(2, 2), tags=("f64",)),
    ]


def _unit(v):
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)


def _gdn_inputs(rng, b, s, h, n, per_channel=False, carry=False):
    q, k = _unit(_r(rng, b, s, h, n)), _unit(_r(rng, b, s, h, n))
    g = _r(rng, *((b, s, h, n) if per_channel else (b, s, h)), lo=-1.0, hi=0.0)
    ins = (q, k, _r(rng, b, s, h, n), g, _r(rng, b, s, h, lo=0.0, hi=1.0))
    return ins + ((_r(rng, b, h, n, n),) if carry else ())


def gated_delta_net(rng):
    A = GatedDeltaNetAttrs
    one = np.ones((1, 2, 1, 1), np.float32)
    # n = 1, q = k = 1, g = 0, beta = 1/2: S = 1, o = 1; then d = (2 - 1)/2, S = o = 1.5
    hand = (one, one, 2 * one, np.zeros((1, 2, 1), np.float32),
            np.full((1, 2, 1), 0.5, np.float32))
    return [
        Sample(_gdn_inputs(rng, 1, 5, 2, 4), A(4), tags=("prime-length",)),
        Sample(_gdn_inputs(rng, 2, 3, 1, 4, per_channel=True), A(4, False, True),
               tags=("gate-per-channel",)),
        Sample(_gdn_inputs(rng, 1, 4, 2, 3, carry=True), A(3, True, False), tags=("carry",)),
        Sample(_gdn_inputs(rng, 1, 3, 2, 2, True, True), A(2, True, True),
               tags=("carry", "gate-per-channel")),
        Sample(_gdn_inputs(rng, 1, 0, 2, 2, carry=True), A(2, True, False),
               tags=("empty", "carry")),
        Sample(hand, A(1), tags=("hand",), expect=_f(1, 1.5).reshape(1, 2, 1, 1)),
        Sample(tuple(v.astype(np.float64) for v in _gdn_inputs(rng, 1, 3, 1, 2)), A(2),
               tags=("f64",)),
    ]


# ── Lstm, Gru, Rnn ─────────────────────────────────────────────────────────

def recurrent_inputs(rng, kind, batch, seq, inp, a, flat=False, scale=0.6):
    """x, packed weights and biases (and h0/c0 with ``a.carry``) for one sample."""
    gates, dirs = R.GATES[kind], 2 if a.bidirectional else 1
    s_ih, s_hh, s_b = R.block_sizes(gates, inp, a.hidden_size, a.num_layers, dirs)
    rows = gates * a.hidden_size

    def packed(sizes):
        v = _r(rng, sum(sizes), lo=-scale, hi=scale)
        return v if flat or len(sizes) > 1 else v.reshape(rows, -1)
    ins = [_r(rng, batch, seq, inp), packed(s_ih), packed(s_hh)]
    ins += [_r(rng, sum(s_b), lo=-scale, hi=scale) for _ in range(2 if kind == "Gru" else 1)]
    n_states = (2 if kind == "Lstm" else 1) if a.carry else 0
    ins += [_r(rng, a.num_layers * dirs, batch, a.hidden_size) for _ in range(n_states)]
    return tuple(ins)


def _recurrent_samples(rng, kind, attrs):
    A = attrs
    extra = (False,) if kind == "Rnn" else ()
    cases = [
        (A(4, 1, False, False, *extra), (2, 5, 3), ("single-layer",)),
        (A(3, 2, True, False, *extra), (2, 4, 3), ("bidirectional", "layers")),
        (A(4, 1, False, True, *extra), (2, 5, 2), ("carry",)),
        (A(2, 2, True, True, *extra), (1, 3, 2), ("bidirectional", "layers", "carry")),
        (A(3, 1, False, False, *extra), (1, 1, 1), ("size-1",)),
        (A(2, 1, True, False, *extra), (2, 0, 3), ("empty", "bidirectional")),
    ]
    out = [Sample(recurrent_inputs(rng, kind, *dims, a), a, tags=tags)
           for a, dims, tags in cases]
    if kind != "Rnn":        # weights of tens: sigmoid and tanh saturate to 0 and ±1
        a = A(3, 1, False, False)
        out.append(Sample(recurrent_inputs(rng, kind, 2, 4, 3, a, scale=40.0), a,
                          tags=("saturated",)))
    a64 = A(2, 1, True, True, *extra)
    ins = recurrent_inputs(rng, kind, 1, 3, 2, a64, flat=True)
    out.append(Sample(tuple(v.astype(np.float64) for v in ins), a64, tags=("f64", "flat")))
    return out


def lstm(rng):
    return _recurrent_samples(rng, "Lstm", RecurrentAttrs)


def gru(rng):
    return _recurrent_samples(rng, "Gru", RecurrentAttrs)


def rnn(rng):
    out = _recurrent_samples(rng, "Rnn", RnnAttrs)
    # ReLU, all weights 1, bias 0: h = relu(1 + 0) = 1, relu(2 + 1) = 3, relu(-5 + 3) = 0
    hand = (_f(1, 2, -5).reshape(1, 3, 1), np.ones((1, 1), np.float32),
            np.ones((1, 1), np.float32), np.zeros(1, np.float32))
    out.append(Sample(hand, RnnAttrs(1, 1, False, False, True), tags=("hand", "relu"),
                      expect=_f(1, 3, 0).reshape(1, 3, 1)))
    out[1] = Sample(out[1].inputs, RnnAttrs(3, 2, True, False, True),
                    tags=("bidirectional", "layers", "relu"))
    return out
