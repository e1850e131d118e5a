"""The sequence family's oracles: plain numpy time loops, one step per line of RLX's formulas.

Every loop keeps the recurrent state in one array and walks the sequence axis in order, so
the code reads like the recurrences in RLX's op docs. The arithmetic runs in the node's
output dtype (f64 in the interpreter's float64 mode).
"""
from __future__ import annotations

import numpy as np


def _as(dt, *arrays):
    return [np.asarray(a).astype(dt) for a in arrays]


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


# ── state-space scans ──────────────────────────────────────────────────────

def selective_scan(dt, x, delta, a, b, c):
    """Mamba S6: h = exp(Δ·A)·h + Δ·B·x, y = Σ_n C·h, per (batch, channel)."""
    x, delta, a, b, c = _as(dt, x, delta, a, b, c)
    batch, seq, hidden = x.shape
    h = np.zeros((batch, hidden, a.shape[1]), dt)             # [B, H, N]
    y = np.zeros((batch, seq, hidden), dt)
    with np.errstate(all="ignore"):
        for t in range(seq):
            d = delta[:, t, :, None]                           # [B, H, 1]
            h = np.exp(d * a) * h + d * b[:, t, None, :] * x[:, t, :, None]
            y[:, t] = (c[:, t, None, :] * h).sum(-1)
    return y


def mamba2(dt, x, dts, a, b, c):
    """Mamba-2 SSD: S = exp(dt·a)·S + (dt·x) ⊗ b, y = S · c, per (batch, head)."""
    x, dts, a, b, c = _as(dt, x, dts, a, b, c)
    batch, seq, heads, p = x.shape
    s = np.zeros((batch, heads, p, b.shape[-1]), dt)          # [B, H, P, N]
    y = np.zeros_like(x)
    with np.errstate(all="ignore"):
        for t in range(seq):
            decay = np.exp(dts[:, t] * a)[:, :, None, None]    # [B, H, 1, 1]
            u = (dts[:, t, :, None] * x[:, t])[..., None]      # [B, H, P, 1]
            s = decay * s + u * b[:, t, :, None, :]
            y[:, t] = (s * c[:, t, :, None, :]).sum(-1)
    return y


def gated_delta_net(dt, q, k, v, g, beta, state=None, per_channel=False):
    """Gated delta rule: S ·= exp(g); d = (v - Sᵀk)·β; S += k ⊗ d; o = Sᵀq / √n."""
    q, k, v, g, beta = _as(dt, q, k, v, g, beta)
    batch, seq, heads, n = q.shape
    if state is None:
        s = np.zeros((batch, heads, n, n), dt)                # S[b, h, i, j]
    else:
        s = np.asarray(state).astype(dt).reshape(batch, heads, n, n).copy()
    scale = dt.type(1.0) / np.sqrt(dt.type(n))
    out = np.zeros_like(q)
    with np.errstate(all="ignore"):
        for t in range(seq):
            if per_channel:
                s = s * np.exp(g[:, t])[..., :, None]          # row i decays by exp(g[i])
            else:
                s = s * np.exp(g[:, t])[..., None, None]
            kt = k[:, t]
            sk = (s * kt[..., :, None]).sum(-2)                # Σ_i S[i, j]·k[i]
            d = (v[:, t] - sk) * beta[:, t, :, None]
            s = s + kt[..., :, None] * d[..., None, :]
            out[:, t] = (s * q[:, t][..., :, None]).sum(-2) * scale
    return out


# ── PyTorch recurrent layers ───────────────────────────────────────────────

GATES = {"Lstm": 4, "Gru": 3, "Rnn": 1}


def block_sizes(gates, input_size, hidden, layers, directions):
    """Element counts of each packed (layer, direction) block of w_ih, w_hh and bias."""
    rows = gates * hidden
    w_ih = [rows * (input_size if l == 0 else directions * hidden)
            for l in range(layers) for _ in range(directions)]
    return w_ih, [rows * hidden] * (layers * directions), [rows] * (layers * directions)


def unpack(flat, sizes, rows):
    """The blocks of a packed operand, each shaped [rows, -1]."""
    flat, out, at = np.asarray(flat).reshape(-1), [], 0
    for n in sizes:
        out.append(flat[at:at + n].reshape(rows, -1))
        at += n
    return out


def lstm_cell(xw, h, c, w_hh):
    """One LSTM step; ``xw`` = x·w_ihᵀ + bias already. Gates i, f, g, o (PyTorch)."""
    z = xw + h @ w_hh.T
    i, f, g, o = np.split(z, 4, axis=-1)
    c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
    return _sigmoid(o) * np.tanh(c), c


def gru_cell(xw, h, w_hh, b_hh):
    """One GRU step; ``xw`` = x·w_ihᵀ + b_ih. Gates r, z, n; r applies after b_hn."""
    hw = h @ w_hh.T + b_hh
    xr, xz, xn = np.split(xw, 3, axis=-1)
    hr, hz, hn = np.split(hw, 3, axis=-1)
    r, z = _sigmoid(xr + hr), _sigmoid(xz + hz)
    n = np.tanh(xn + r * hn)
    return (1 - z) * n + z * h


def rnn_cell(xw, h, w_hh, relu):
    """One Elman step; ``xw`` = x·w_ihᵀ + bias."""
    z = xw + h @ w_hh.T
    return np.maximum(z, 0) if relu else np.tanh(z)


def recurrent(kind, dt, a, x, w_ih, w_hh, *rest):
    """Lstm / Gru / Rnn over [batch, seq, input]: layers bottom-up, each direction a loop.

    ``rest`` is (bias) or (b_ih, b_hh) for Gru, then h0 (and c0 for Lstm) when carried.
    """
    gates, hid = GATES[kind], a.hidden_size
    dirs = 2 if a.bidirectional else 1
    nb = 2 if kind == "Gru" else 1
    biases, carried = rest[:nb], rest[nb:]
    x = np.asarray(x).astype(dt)
    batch, seq, inp = x.shape
    s_ih, s_hh, s_b = block_sizes(gates, inp, hid, a.num_layers, dirs)
    w_ih = unpack(np.asarray(w_ih).astype(dt), s_ih, gates * hid)
    w_hh = unpack(np.asarray(w_hh).astype(dt), s_hh, gates * hid)
    bs = [unpack(np.asarray(b).astype(dt), s_b, 1) for b in biases]
    init = [np.asarray(h).astype(dt).reshape(a.num_layers * dirs, batch, hid)
            for h in carried]
    layer_in = x
    with np.errstate(all="ignore"):
        for layer in range(a.num_layers):
            outs = []
            for d in range(dirs):
                blk = layer * dirs + d
                xw = layer_in @ w_ih[blk].T + bs[0][blk].reshape(-1)     # [B, L, G·H]
                h = init[0][blk] if init else np.zeros((batch, hid), dt)
                c = init[1][blk] if len(init) > 1 else np.zeros((batch, hid), dt)
                y = np.zeros((batch, seq, hid), dt)
                for t in (range(seq) if d == 0 else reversed(range(seq))):
                    if kind == "Lstm":
                        h, c = lstm_cell(xw[:, t], h, c, w_hh[blk])
                    elif kind == "Gru":
                        h = gru_cell(xw[:, t], h, w_hh[blk], bs[1][blk].reshape(-1))
                    else:
                        h = rnn_cell(xw[:, t], h, w_hh[blk], a.relu)
                    y[:, t] = h
                outs.append(y)
            layer_in = np.concatenate(outs, axis=-1)
    return layer_in
