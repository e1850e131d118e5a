"""Every sequence kind written as an rlx ``Scan``: its loop form, built from registry ops.

``as_scan(kind, shapes, attrs)`` returns a graph with Inputs ``x0, x1, ...`` (the op's
operands, in order) and one output equal to the op's. Scan's carry is one tensor, so each
body packs what a step must hand on: the state, plus a slot for the step's output (the
trajectory keeps every carry; the output slot is sliced out of it afterwards). Sequences
are moved to time-major (``Transpose``) so that Scan slices one step per row. The tests
run these graphs on the oracle interpreter and compare with the op's own oracle.
"""
from __future__ import annotations

import numpy as np

from ..ir.graph import Graph
from ..ir.shape import Shape
from ._control_bodies import make_body
from .control import ScanAttrs


def graph_for(name: str, shapes) -> tuple:
    """A graph with one Input per operand shape, named x0, x1, ..."""
    g = Graph(name)
    return g, [g.input(f"x{i}", s.dims, s.dtype) for i, s in enumerate(shapes)]


def narrow(g, x, axis: int, start: int, n: int) -> int:
    return g.op("Narrow", (x,), axis=axis, start=start, len=n)


def zeros(g, dims, dtype) -> int:
    return g.constant(np.zeros(dims, dtype.np), dtype)


def scan(g, init, bcasts, xs, body, length: int) -> int:
    """Scan with a saved trajectory: [length, *carry]."""
    attrs = ScanAttrs(body, length, True, len(bcasts), len(xs), 0)
    return g.op("Scan", (init, *bcasts, *xs), attrs)


def time_major(g, x, rank: int) -> int:
    """[batch, seq, ...] -> [seq, batch, ...]."""
    return g.transpose(x, (1, 0) + tuple(range(2, rank)))


def step_output(g, traj, axis: int, start: int, dims) -> int:
    """The output slot of every carry in a trajectory, back to batch-major ``dims``."""
    seq, batch = dims[1], dims[0]
    y = g.reshape(narrow(g, traj, axis, start, 1), (seq, batch) + tuple(dims[2:]))
    return time_major(g, y, len(dims))


def _finish(g, out) -> Graph:
    g.set_outputs([out])
    return g


# ── SelectiveScan: carry [B, H, N + 1] = state ‖ y ──────────────────────────

def selective_scan(shapes, a) -> Graph:
    g, (x, delta, am, b, c) = graph_for("selective_scan_as_scan", shapes)
    bt, sq, hd = shapes[0].dims
    n, dt = a.state_size, shapes[0].dtype

    def step(s, carry, a_, x_t, d_t, b_t, c_t):
        h = narrow(s, carry, 2, 0, n)
        d3 = s.reshape(d_t, (bt, hd, 1))
        decay = s.activation("Exp", s.mul(d3, a_))
        u = s.mul(s.mul(d3, s.reshape(b_t, (bt, 1, n))), s.reshape(x_t, (bt, hd, 1)))
        h2 = s.add(s.mul(decay, h), u)
        y = s.sum(s.mul(s.reshape(c_t, (bt, 1, n)), h2), (2,), keep_dim=True)
        return s.concat((h2, y), 2)
    body = make_body("s6_step", [Shape((bt, hd, n + 1), dt), Shape((hd, n), dt),
                                 Shape((bt, hd), dt), Shape((bt, hd), dt),
                                 Shape((bt, n), dt), Shape((bt, n), dt)], step)
    xs = [time_major(g, v, 3) for v in (x, delta, b, c)]
    traj = scan(g, zeros(g, (bt, hd, n + 1), dt), [am], xs, body, sq)
    return _finish(g, step_output(g, traj, 3, n, (bt, sq, hd)))


# ── Mamba2: carry [B, H, P, N + 1] = state ‖ y ──────────────────────────────

def mamba2(shapes, a) -> Graph:
    g, (x, dts, am, b, c) = graph_for("mamba2_as_scan", shapes)
    bt, sq, hd, p = shapes[0].dims
    n, dt = a.state_size, shapes[0].dtype

    def step(s, carry, a_, x_t, dt_t, b_t, c_t):
        st = narrow(s, carry, 3, 0, n)
        decay = s.reshape(s.activation("Exp", s.mul(dt_t, a_)), (bt, hd, 1, 1))
        u = s.reshape(s.mul(s.reshape(dt_t, (bt, hd, 1)), x_t), (bt, hd, p, 1))
        st2 = s.add(s.mul(decay, st), s.mul(u, s.reshape(b_t, (bt, hd, 1, n))))
        y = s.sum(s.mul(st2, s.reshape(c_t, (bt, hd, 1, n))), (3,), keep_dim=True)
        return s.concat((st2, y), 3)
    body = make_body("ssd_step", [Shape((bt, hd, p, n + 1), dt), Shape((hd,), dt),
                                  Shape((bt, hd, p), dt), Shape((bt, hd), dt),
                                  Shape((bt, hd, n), dt), Shape((bt, hd, n), dt)], step)
    xs = [time_major(g, x, 4), time_major(g, dts, 3), time_major(g, b, 4),
          time_major(g, c, 4)]
    traj = scan(g, zeros(g, (bt, hd, p, n + 1), dt), [am], xs, body, sq)
    return _finish(g, step_output(g, traj, 4, n, (bt, sq, hd, p)))


# ── GatedDeltaNet: carry [B, H, n + 1, n] = S ‖ o (one extra row) ──────────

def gated_delta_net(shapes, a) -> Graph:
    g, ids = graph_for("gated_delta_net_as_scan", shapes)
    q, k, v, gate, beta = ids[:5]
    bt, sq, hd, n = shapes[0].dims
    dt, pc = shapes[0].dtype, a.gate_per_channel

    def step(s, carry, q_t, k_t, v_t, g_t, b_t):
        st = narrow(s, carry, 2, 0, n)
        decay = s.reshape(s.activation("Exp", g_t), (bt, hd, n if pc else 1, 1))
        st1 = s.mul(st, decay)
        kc = s.reshape(k_t, (bt, hd, n, 1))
        sk = s.sum(s.mul(st1, kc), (2,))
        d = s.mul(s.sub(v_t, sk), s.reshape(b_t, (bt, hd, 1)))
        st2 = s.add(st1, s.mul(kc, s.reshape(d, (bt, hd, 1, n))))
        scale = s.activation("Rsqrt", s.constant(float(n), dt))
        o = s.sum(s.mul(st2, s.reshape(q_t, (bt, hd, n, 1))), (2,), keep_dim=True)
        return s.concat((st2, s.mul(o, scale)), 2)
    vec = Shape((bt, hd, n), dt)
    body = make_body("gdn_step", [Shape((bt, hd, n + 1, n), dt), vec, vec, vec,
                                  vec if pc else Shape((bt, hd), dt), Shape((bt, hd), dt)],
                     step)
    xs = [time_major(g, q, 4), time_major(g, k, 4), time_major(g, v, 4),
          time_major(g, gate, 4 if pc else 3), time_major(g, beta, 3)]
    if a.carry_state:
        init = g.concat((ids[5], zeros(g, (bt, hd, 1, n), dt)), 2)
    else:
        init = zeros(g, (bt, hd, n + 1, n), dt)
    traj = scan(g, init, [], xs, body, sq)
    return _finish(g, step_output(g, traj, 3, n, (bt, sq, hd, n)))


def as_scan(kind: str, shapes, attrs) -> Graph:
    """The loop form of ``kind`` on operands of ``shapes``."""
    from . import _sequence_scan_rnn

    table = {"SelectiveScan": selective_scan, "Mamba2": mamba2,
             "GatedDeltaNet": gated_delta_net}
    if kind in table:
        return table[kind](shapes, attrs)
    return _sequence_scan_rnn.recurrent(kind, shapes, attrs)
