"""ONNX LSTM, GRU and RNN onto RLX's Lstm, Gru and Rnn kinds (PyTorch's cells).

ONNX packs gates as LSTM (i, o, f, c) and GRU (z, r, h); RLX, like PyTorch, as LSTM
(i, f, g, o) and GRU (r, z, n): a Gather reorders the gate blocks in the graph, so the
weights stay the model's Params. What RLX's cells cannot express is refused by name:
other activations, clip, input_forget, peepholes, ragged sequence_lens and GRU's
linear_before_reset=0. LSTM's Y_c, which RLX's Lstm does not return, is recomputed from
the hidden states it does.
"""
from __future__ import annotations

import numpy as np

from ..context import Unmappable
from . import converts

# ONNX gate blocks in RLX's order: LSTM i,o,f,c → i,f,c(g),o; GRU z,r,h → r,z,n
ORDER = {"LSTM": (0, 2, 3, 1), "GRU": (1, 0, 2), "RNN": (0,)}
DEFAULT_ACTS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"],
                "RNN": ["Tanh"]}
KIND = {"LSTM": "Lstm", "GRU": "Gru", "RNN": "Rnn"}


def _opt(ins, i):
    return len(ins) > i and bool(ins[i])


def _gates(ctx, w, order, hid):
    """``w`` [D, G·H, ...] with its gate blocks in RLX's order: a Gather along axis 1, so
    weights stay the model's Params (or run-time tensors)."""
    if tuple(order) == tuple(range(len(order))):
        return w
    idx = np.concatenate([np.arange(g * hid, (g + 1) * hid) for g in order])
    return ctx.op("Gather", (w, ctx.const(idx.astype(np.int64))), axis=1)


def _acts(attrs, op, dirs):
    """The activations; only ONNX's defaults (or Relu for RNN) have an RLX cell."""
    acts = [a.decode() if isinstance(a, bytes) else a for a in attrs.get("activations", [])]
    base = DEFAULT_ACTS[op]
    if not acts:
        return False
    relu = op == "RNN" and acts == ["Relu"] * dirs
    if acts != base * dirs and not relu:
        raise Unmappable(f"activations={acts} (RLX's {KIND[op]} cell fixes "
                         f"{base}{' or Relu' if op == 'RNN' else ''})", "activations")
    return relu


def _refuse(ctx, op, ins, attrs, seq):
    for name in ("activation_alpha", "activation_beta", "clip"):
        if attrs.has(name):
            attrs.get(name)
            raise Unmappable(f"{name} has no RLX form (RLX's cells are unclipped and take "
                             "no activation parameters)", name)
    if op == "LSTM":
        if attrs.get("input_forget", 0):
            raise Unmappable("input_forget=1 (coupled gates) has no RLX form", "input_forget")
        if _opt(ins, 7) and np.any(ctx.need(ins[7], "LSTM's peepholes P")):
            raise Unmappable("peephole weights P: RLX's Lstm cell has no peepholes")
    if op == "GRU" and attrs.get("linear_before_reset", 0) != 1:
        raise Unmappable("linear_before_reset=0 applies r before R_h; RLX's Gru (PyTorch's "
                         "cell) applies it after, which ONNX spells linear_before_reset=1",
                         "linear_before_reset")
    if _opt(ins, 4):
        lens = np.asarray(ctx.need(ins[4], "sequence_lens"))
        if np.any(lens != seq):
            raise Unmappable("sequence_lens shorter than the sequence (ragged batches)")


@converts("LSTM", "GRU", "RNN")
def recurrent(ctx, node, ins, attrs):
    op = node.op_type
    direction = attrs.only("direction", ("forward", "reverse", "bidirectional"), "forward")
    layout = attrs.only("layout", (0, 1), 0)
    hid = int(attrs.get("hidden_size"))
    x = ctx.id(ins[0])
    if layout == 0:
        x = ctx.op("Transpose", (x,), perm=(1, 0, 2))       # RLX is batch-first
    batch, seq, _ = ctx.dims(x)
    dt = ctx.dt(x)
    dirs = 2 if direction == "bidirectional" else 1
    relu = _acts(attrs, op, dirs)
    _refuse(ctx, op, ins, attrs, seq)
    order = ORDER[op]
    g = len(order)
    w, r = (_gates(ctx, ctx.id(ins[i]), order, hid) for i in (1, 2))
    b = ctx.id(ins[3]) if _opt(ins, 3) else ctx.const(np.zeros((dirs, 2 * g * hid), dt.np), dt)
    wb, rb = (_gates(ctx, ctx.op("Slice", (b,), axis=1, start=k * g * hid, len=g * hid,
                                 step=1), order, hid) for k in (0, 1))
    if direction == "reverse":
        # RLX's reverse pass is the second direction of a bidirectional one: run the
        # forward direction on a reversed sequence instead, and reverse its output
        x = _flip(ctx, x, 1)
    flat = [ctx.reshape(t, (int(np.prod(ctx.dims(t))),)) for t in (w, r, wb, rb)]
    operands = [x, flat[0], flat[1]]
    if op == "GRU":
        operands += flat[2:]
    else:
        operands.append(ctx.bin("Add", flat[2], flat[3]))
    states = [5, 6] if op == "LSTM" else [5]
    carry = any(_opt(ins, i) for i in states)
    init = [_state(ctx, ins, i, layout, (dirs, batch, hid), dt) for i in states]
    if carry:
        operands += init
    fields = dict(hidden_size=hid, num_layers=1, bidirectional=dirs == 2, carry=carry)
    if op == "RNN":
        fields["relu"] = relu
    y = ctx.op(KIND[op], operands, **fields)
    y = ctx.reshape(y, (batch, seq, dirs, hid))
    y_c = None
    if op == "LSTM" and len(node.output) > 2 and node.output[2]:
        y_c = lstm_cell_state(ctx, x, y, w, r, ctx.bin("Add", wb, rb), init, hid)
        if layout == 0:
            y_c = ctx.op("Transpose", (y_c,), perm=(1, 0, 2))
    if direction == "reverse":
        y = _flip(ctx, y, 1)
    outs = [_y_out(ctx, y, layout), _y_h(ctx, y, direction, layout, seq)]
    return outs + ([y_c] if y_c is not None else [])


def _state(ctx, ins, i, layout, dims, dt):
    """An initial state as [D, batch, H] (layout 1 gives it batch-first), zeros if absent."""
    if not _opt(ins, i):
        return ctx.const(np.zeros(dims, dt.np), dt)
    s = ctx.id(ins[i])
    return s if layout == 0 else ctx.op("Transpose", (s,), perm=(1, 0, 2))


def lstm_cell_state(ctx, x, y, w, r, bias, init, hid):
    """LSTM's final cell state [batch, D, H], which RLX's Lstm does not return: the gates
    of every step are recomputed from x and the hidden states y holds (the step's input
    state is the previous output), then c_t = f·c_(t-1) + i·g runs in the direction's
    order. Weights are in RLX's gate order (i, f, g, o)."""
    batch, seq, dirs, _ = ctx.dims(y)
    finals = []
    for d in range(dirs):
        hs = ctx.reshape(ctx.op("Slice", (y,), axis=2, start=d, len=1, step=1),
                         (batch, seq, hid))
        h0 = ctx.reshape(ctx.op("Slice", (init[0],), axis=0, start=d, len=1, step=1),
                         (batch, 1, hid))
        c = ctx.reshape(ctx.op("Slice", (init[1],), axis=0, start=d, len=1, step=1),
                        (batch, hid))
        if seq == 1:
            prev = h0
        elif d == 0:        # step t reads h_(t-1); the reverse pass reads h_(t+1)
            prev = ctx.op("Concat", (h0, ctx.op("Slice", (hs,), axis=1, start=0,
                                                len=seq - 1, step=1)), axis=1)
        else:
            prev = ctx.op("Concat", (ctx.op("Slice", (hs,), axis=1, start=1, len=seq - 1,
                                            step=1), h0), axis=1)
        wd, rd, bd = (ctx.op("Slice", (t,), axis=0, start=d, len=1, step=1)
                      for t in (w, r, bias))
        wt, rt = (ctx.op("Transpose", (ctx.reshape(t, ctx.dims(t)[1:]),), perm=(1, 0))
                  for t in (wd, rd))
        z = ctx.bin("Add", ctx.bin("Add", ctx.op("MatMul", (x, wt)),
                                   ctx.op("MatMul", (prev, rt))),
                    ctx.reshape(bd, (4 * hid,)))
        gate = [ctx.op("Slice", (z,), axis=2, start=k * hid, len=hid, step=1)
                for k in range(3)]
        i, f, g = ctx.act("Sigmoid", gate[0]), ctx.act("Sigmoid", gate[1]), \
            ctx.act("Tanh", gate[2])
        for t in (range(seq) if d == 0 else range(seq - 1, -1, -1)):
            at = [ctx.reshape(ctx.op("Slice", (v,), axis=1, start=t, len=1, step=1),
                              (batch, hid)) for v in (i, f, g)]
            c = ctx.bin("Add", ctx.bin("Mul", at[1], c), ctx.bin("Mul", at[0], at[2]))
        finals.append(ctx.reshape(c, (batch, 1, hid)))
    return finals[0] if dirs == 1 else ctx.op("Concat", finals, axis=1)


def _flip(ctx, x, axis):
    n = ctx.dims(x)[axis]
    return ctx.op("Slice", (x,), axis=axis, start=n - 1, len=n, step=-1)


def _y_out(ctx, y, layout):
    """Y: [seq, D, batch, H] (layout 0) or [batch, seq, D, H] (layout 1)."""
    return y if layout == 1 else ctx.op("Transpose", (y,), perm=(1, 2, 0, 3))


def _y_h(ctx, y, direction, layout, seq):
    """Y_h: each direction's last state, [D, batch, H] (layout 0) or [batch, D, H]."""
    parts = []
    for d in range(2 if direction == "bidirectional" else 1):
        t = 0 if direction == "reverse" or d == 1 else seq - 1
        s = ctx.op("Slice", (y,), axis=1, start=t, len=1, step=1)
        parts.append(ctx.op("Slice", (s,), axis=2, start=d, len=1, step=1))
    h = parts[0] if len(parts) == 1 else ctx.op("Concat", parts, axis=2)
    b, _, dd, hid = ctx.dims(h)
    h = ctx.reshape(h, (b, dd, hid))
    return h if layout == 1 else ctx.op("Transpose", (h,), perm=(1, 0, 2))
