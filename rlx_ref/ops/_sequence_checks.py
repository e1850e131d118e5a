"""Verifier rules shared by the sequence family, and the Lstm/Gru/Rnn shape rules."""
from __future__ import annotations

from ..ir.dtype import DType
from ..ir.shape import Dyn
from . import _sequence_ref as R
from .opdef import same_dtype, want

FLOATS = (DType.F32, DType.F64)


def dims_of(s):
    return tuple(s.dims)


def match(got, want_dims, what: str, cid: str):
    """Static dims equal where both are known; rank always."""
    want(len(got.dims) == len(want_dims),
         f"({cid}) {what} must have rank {len(want_dims)} {list(want_dims)}, got {got}")
    for g, w in zip(got.dims, want_dims):
        if isinstance(g, Dyn) or isinstance(w, Dyn) or w is None:
            continue
        want(g == w, f"({cid}) {what} must be {list(want_dims)}, got {got}")


def floats(shapes, kind):
    dt = same_dtype(shapes, f"{kind} operands")
    want(dt in FLOATS, f"(C1) {kind} operands must be f32 or f64, got {dt}")


def count(shapes, n, kind, why):
    want(len(shapes) == n, f"(C1) {kind} takes {n} operands {why}, got {len(shapes)}")


def recurrent_checker(kind: str):
    gates = R.GATES[kind]
    names = ["x", "w_ih", "w_hh"] + (["b_ih", "b_hh"] if kind == "Gru" else ["bias"])
    states = ["h0", "c0"] if kind == "Lstm" else ["h0"]

    def check(shapes, a, out):
        n = len(names) + (len(states) if a.carry else 0)
        count(shapes, n, kind, "[" + ", ".join(names + states * a.carry) + "]")
        floats(shapes, kind)
        want(a.hidden_size >= 1 and a.num_layers >= 1,
             f"(C2) {kind} needs hidden_size >= 1 and num_layers >= 1, got "
             f"{a.hidden_size} and {a.num_layers}")
        x = shapes[0]
        want(x.rank == 3, f"(C3) {kind} x must be [batch, seq, input], got {x}")
        bt, _, inp = dims_of(x)
        dirs = 2 if a.bidirectional else 1
        if isinstance(inp, Dyn):
            return
        sizes = R.block_sizes(gates, inp, a.hidden_size, a.num_layers, dirs)
        for i, (nm, blocks) in enumerate(zip(names[1:], sizes + (sizes[2],))):
            s = shapes[1 + i]
            want(s.numel is None or s.numel == sum(blocks),
                 f"(C4) {kind} {nm} must hold {sum(blocks)} elements ({len(blocks)} packed "
                 f"(layer, direction) blocks), got {s}")
        for j, nm in enumerate(states if a.carry else []):
            match(shapes[len(names) + j], (a.num_layers * dirs, bt, a.hidden_size), nm,
                   "C5")
    return check


def recurrent_infer(shapes, a):
    x = shapes[0]
    if x.rank != 3:
        return None
    dirs = 2 if a.bidirectional else 1
    return x.with_dims((x.dims[0], x.dims[1], dirs * a.hidden_size))


def recurrent_accuracy(a, s):
    width = max(s[0].dims[2], 2 * a.hidden_size) + a.hidden_size
    return (s[0].dims[1] + 1) * a.num_layers * (width + 4)
