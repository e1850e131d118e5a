"""Lstm, Gru and Rnn as Scans: one Scan per (layer, direction), as PyTorch stacks them.

The input projection ``x·w_ihᵀ + b`` of a whole layer is one MatMul outside the loop (it
does not depend on the state); the Scan body does the recurrent part. The reverse
direction reverses its input sequence, scans forward and reverses the trajectory back.
Lstm's carry is ``h ‖ c`` ([B, 2H]); Gru's and Rnn's is ``h``.
"""
from __future__ import annotations

from ..ir.graph import Graph
from ..ir.shape import Shape
from . import _sequence_ref as R
from ._control_bodies import make_body
from ._sequence_scan import graph_for, narrow, scan, time_major, zeros


def _blocks(g, v, shape, sizes, rows):
    """The packed blocks of operand ``v``, each [rows, n / rows]."""
    flat = g.reshape(v, (shape.numel,))
    out, at = [], 0
    for n in sizes:
        out.append(g.reshape(narrow(g, flat, 0, at, n), (rows, n // rows)))
        at += n
    return out


def _lstm_step(hid):
    def step(s, carry, wt, xw_t):
        h, c = narrow(s, carry, 1, 0, hid), narrow(s, carry, 1, hid, hid)
        z = s.add(xw_t, s.matmul(h, wt))
        i, f, gg, o = (narrow(s, z, 1, j * hid, hid) for j in range(4))
        sig = lambda v: s.activation("Sigmoid", v)  # noqa: E731
        c2 = s.add(s.mul(sig(f), c), s.mul(sig(i), s.activation("Tanh", gg)))
        h2 = s.mul(sig(o), s.activation("Tanh", c2))
        return s.concat((h2, c2), 1)
    return step


def _gru_step(hid, dt):
    def step(s, h, wt, b_hh, xw_t):
        hw = s.add(s.matmul(h, wt), b_hh)
        xr, xz, xn = (narrow(s, xw_t, 1, j * hid, hid) for j in range(3))
        hr, hz, hn = (narrow(s, hw, 1, j * hid, hid) for j in range(3))
        r = s.activation("Sigmoid", s.add(xr, hr))
        z = s.activation("Sigmoid", s.add(xz, hz))
        n = s.activation("Tanh", s.add(xn, s.mul(r, hn)))
        one = s.constant(1.0, dt)
        return s.add(s.mul(s.sub(one, z), n), s.mul(z, h))
    return step


def _rnn_step(relu):
    def step(s, h, wt, xw_t):
        return s.activation("Relu" if relu else "Tanh", s.add(xw_t, s.matmul(h, wt)))
    return step


def _direction(g, kind, a, layer_in, dims, w_ih, w_hh, biases, init, reverse):
    """One (layer, direction) pass: [B, L, in] -> [B, L, H]."""
    bt, sq, width = dims
    hid, gh = a.hidden_size, R.GATES[kind] * a.hidden_size
    dt = g.nodes[layer_in].shape.dtype
    seq = time_major(g, layer_in, 3)
    if reverse:
        seq = g.op("Reverse", (seq,), axes=(0,))
    xw = g.matmul(g.reshape(seq, (sq * bt, width)), g.transpose(w_ih, (1, 0)))
    xw = g.reshape(g.add(xw, g.reshape(biases[0], (gh,))), (sq, bt, gh))
    bcast = [g.transpose(w_hh, (1, 0))]
    carry_w = 2 * hid if kind == "Lstm" else hid
    shapes = [Shape((bt, carry_w), dt), Shape((hid, gh), dt)]
    if kind == "Lstm":
        step = _lstm_step(hid)
    elif kind == "Gru":
        step = _gru_step(hid, dt)
        bcast.append(g.reshape(biases[1], (gh,)))
        shapes.append(Shape((gh,), dt))
    else:
        step = _rnn_step(a.relu)
    body = make_body(f"{kind.lower()}_step", shapes + [Shape((bt, gh), dt)], step)
    traj = scan(g, init, bcast, [xw], body, sq)
    hs = narrow(g, traj, 2, 0, hid)
    if reverse:
        hs = g.op("Reverse", (hs,), axes=(0,))
    return time_major(g, hs, 3)


def _initial(g, kind, a, states, blk, bt, dt):
    """The carry a (layer, direction) starts from: zeros, or its rows of h0 (‖ c0)."""
    hid = a.hidden_size
    if not states:
        return zeros(g, (bt, 2 * hid if kind == "Lstm" else hid), dt)
    rows = [g.reshape(narrow(g, s, 0, blk, 1), (bt, hid)) for s in states]
    return g.concat(rows, 1) if len(rows) > 1 else rows[0]


def recurrent(kind: str, shapes, a) -> Graph:
    """Lstm / Gru / Rnn as stacked Scans."""
    g, ids = graph_for(f"{kind.lower()}_as_scan", shapes)
    bt, sq, inp = shapes[0].dims
    dt, hid = shapes[0].dtype, a.hidden_size
    gates, dirs = R.GATES[kind], 2 if a.bidirectional else 1
    s_ih, s_hh, s_b = R.block_sizes(gates, inp, hid, a.num_layers, dirs)
    w_ih = _blocks(g, ids[1], shapes[1], s_ih, gates * hid)
    w_hh = _blocks(g, ids[2], shapes[2], s_hh, gates * hid)
    nb = 2 if kind == "Gru" else 1
    biases = [_blocks(g, ids[3 + j], shapes[3 + j], s_b, gates * hid) for j in range(nb)]
    states = ids[3 + nb:] if a.carry else []
    layer_in, width = ids[0], inp
    for layer in range(a.num_layers):
        outs = []
        for d in range(dirs):
            blk = layer * dirs + d
            init = _initial(g, kind, a, states, blk, bt, dt)
            outs.append(_direction(g, kind, a, layer_in, (bt, sq, width), w_ih[blk],
                                   w_hh[blk], [b[blk] for b in biases], init, d == 1))
        layer_in = g.concat(outs, 2) if dirs > 1 else outs[0]
        width = dirs * hid
    g.set_outputs([layer_in])
    return g
