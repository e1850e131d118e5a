"""Sequence-model family: SelectiveScan, Mamba2, GatedDeltaNet, Lstm, Gru, Rnn.

Each kind is a recurrence over the sequence axis with a state that never leaves the op.
Oracles are numpy time loops (``_sequence_ref``); ``_sequence_scan`` writes every kind as
an rlx ``Scan`` so the oracle can be checked against its own loop form.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..conformance.accuracy import reduction
from ..ir.dtype import DType
from ..ir.shape import Dyn
from . import _sequence_checks as C
from . import _sequence_ref as R
from .codec import BOOL, USIZE, attr
from .opdef import Caps, OpDef, register, want

FLOATS = (DType.F32, DType.F64)
CAPS = Caps.FUSED      # RLX capability.rs: composites with a decomposition


@dataclass(frozen=True)
class SelectiveScanAttrs:
    state_size: int = attr(USIZE, doc="N, the state width per channel (a's last dim)")


@dataclass(frozen=True)
class Mamba2Attrs:
    head_dim: int = attr(USIZE, doc="P, the channels per head (x's last dim)")
    state_size: int = attr(USIZE, doc="N, the state width (b's and c's last dim)")


@dataclass(frozen=True)
class GatedDeltaNetAttrs:
    state_size: int = attr(USIZE, doc="n, the key/value width per head")
    carry_state: bool = attr(BOOL, False, doc="a 6th operand `state [b, h, n, n]` seeds S")
    gate_per_channel: bool = attr(BOOL, False, doc="g is [b, s, h, n]: row i decays by g[i]")


@dataclass(frozen=True)
class RecurrentAttrs:
    hidden_size: int = attr(USIZE, doc="H, the hidden width")
    num_layers: int = attr(USIZE, doc="stacked layers; layer l > 0 reads layer l-1's output")
    bidirectional: bool = attr(BOOL, doc="a reverse-time pass per layer, concatenated")
    carry: bool = attr(BOOL, doc="initial states h0 (and c0) are operands")


@dataclass(frozen=True)
class RnnAttrs:
    hidden_size: int = attr(USIZE, doc="H, the hidden width")
    num_layers: int = attr(USIZE, doc="stacked layers; layer l > 0 reads layer l-1's output")
    bidirectional: bool = attr(BOOL, doc="a reverse-time pass per layer, concatenated")
    carry: bool = attr(BOOL, doc="the initial state h0 is an operand")
    relu: bool = attr(BOOL, doc="ReLU instead of tanh")


# ── SelectiveScan and Mamba2 ───────────────────────────────────────────────

def _check_selective_scan(shapes, a, out):
    C.count(shapes, 5, "SelectiveScan", "[x, delta, a, b, c]")
    C.floats(shapes, "SelectiveScan")
    x = shapes[0]
    want(x.rank == 3, f"(C2) SelectiveScan x must be [batch, seq, hidden], got {x}")
    bt, sq, hd = C.dims_of(x)
    n = a.state_size
    C.match(shapes[1], (bt, sq, hd), "delta", "C2")
    C.match(shapes[2], (hd, n), "a (state_size = N)", "C3")
    C.match(shapes[3], (bt, sq, n), "b", "C3")
    C.match(shapes[4], (bt, sq, n), "c", "C3")


register(OpDef(
    kind="SelectiveScan", family="sequence", attrs=SelectiveScanAttrs, payload="struct",
    arity=5, caps=CAPS, input_names=("x", "delta", "a", "b", "c"),
    check=_check_selective_scan, infer=lambda s, a: s[0],
    reference=lambda ctx, *xs: R.selective_scan(ctx.out_np, *xs),
    doc="Mamba's selective scan (S6). For each batch row and channel `d` a state "
        "`h[d, :]` of width N starts at zero and runs over the sequence: "
        "`h = exp(Δ[t,d]·A[d,:]) ⊙ h + Δ[t,d]·B[t,:]·x[t,d]`, `y[t,d] = Σ_n C[t,n]·h[n]`. "
        "Operands `x [b, s, h]`, `delta [b, s, h]` (used as given: no softplus, no D skip "
        "term), `a [h, N]`, `b [b, s, N]`, `c [b, s, N]`; output `[b, s, h]`.",
    constraints=(
        "C1: five operands of one float dtype (f32 or f64).",
        "C2: x is [batch, seq, hidden] and delta has x's shape.",
        "C3: a is [hidden, N], b and c are [batch, seq, N], with N = state_size.",
    ),
    samples=lambda rng: _samples("selective_scan", rng), dtypes=FLOATS,
    accuracy=reduction(4, lambda a, s: (s[0].dims[1] + 1) * (a.state_size + 2), "all",
                       reason="a length-L recurrence of N-term sums"),
    notes="RLX's kernels are f32 only; f64 is rlx_ref's. The state is reset per batch row.",
))


def _check_mamba2(shapes, a, out):
    C.count(shapes, 5, "Mamba2", "[x, dt, a, b, c]")
    C.floats(shapes, "Mamba2")
    x = shapes[0]
    want(x.rank == 4, f"(C2) Mamba2 x must be [batch, seq, heads, head_dim], got {x}")
    bt, sq, hd, p = C.dims_of(x)
    want(isinstance(p, Dyn) or p == a.head_dim,
         f"(C2) Mamba2 x's last dim ({p}) must equal head_dim ({a.head_dim})")
    n = a.state_size
    C.match(shapes[1], (bt, sq, hd), "dt", "C2")
    C.match(shapes[2], (hd,), "a", "C2")
    C.match(shapes[3], (bt, sq, hd, n), "b (state_size = N)", "C3")
    C.match(shapes[4], (bt, sq, hd, n), "c (state_size = N)", "C3")


register(OpDef(
    kind="Mamba2", family="sequence", attrs=Mamba2Attrs, payload="struct", arity=5,
    caps=CAPS, input_names=("x", "dt", "a", "b", "c"),
    check=_check_mamba2, infer=lambda s, a: s[0],
    reference=lambda ctx, *xs: R.mamba2(ctx.out_np, *xs),
    doc="Mamba-2 / SSD scan with a scalar decay per head. Per batch row and head a state "
        "`S [P, N]` starts at zero: `S = exp(dt[t]·a)·S + (dt[t]·x[t]) ⊗ b[t]`, "
        "`y[t, p] = Σ_n S[p, n]·c[t, n]`. Operands `x [b, s, h, P]`, `dt [b, s, h]` (used as "
        "given, already non-negative), `a [h]`, `b, c [b, s, h, N]`; output x's shape.",
    constraints=(
        "C1: five operands of one float dtype (f32 or f64).",
        "C2: x is [batch, seq, heads, head_dim]; dt is [batch, seq, heads]; a is [heads].",
        "C3: b and c are [batch, seq, heads, state_size].",
    ),
    samples=lambda rng: _samples("mamba2", rng), dtypes=FLOATS,
    accuracy=reduction(4, lambda a, s: (s[0].dims[1] + 1) * (a.state_size + 2), "all",
                       reason="a length-L recurrence of N-term sums"),
    notes="RLX's kernels are f32 only; f64 is rlx_ref's.",
))


# ── GatedDeltaNet ──────────────────────────────────────────────────────────

def _check_gdn(shapes, a, out):
    n_ops = 6 if a.carry_state else 5
    C.count(shapes, n_ops, "GatedDeltaNet",
           "[q, k, v, g, beta" + (", state]" if a.carry_state else "]"))
    C.floats(shapes, "GatedDeltaNet")
    q = shapes[0]
    want(q.rank == 4, f"(C2) GatedDeltaNet q must be [batch, seq, heads, n], got {q}")
    bt, sq, hd, n = C.dims_of(q)
    want(isinstance(n, Dyn) or n == a.state_size,
         f"(C2) GatedDeltaNet q's last dim ({n}) must equal state_size ({a.state_size})")
    C.match(shapes[1], C.dims_of(q), "k", "C2")
    C.match(shapes[2], C.dims_of(q), "v", "C2")
    gate = (bt, sq, hd, n) if a.gate_per_channel else (bt, sq, hd)
    C.match(shapes[3], gate, "g" + (" (gate_per_channel)" if a.gate_per_channel else ""), "C3")
    C.match(shapes[4], (bt, sq, hd), "beta", "C3")
    if a.carry_state:
        C.match(shapes[5], (bt, hd, n, n), "state", "C4")


register(OpDef(
    kind="GatedDeltaNet", family="sequence", attrs=GatedDeltaNetAttrs, payload="struct",
    arity=None, min_arity=5, caps=CAPS,
    input_names=("q", "k", "v", "g", "beta", "state?"),
    check=_check_gdn, infer=lambda s, a: s[0],
    reference=lambda ctx, *xs: R.gated_delta_net(
        ctx.out_np, *xs[:5], state=xs[5] if ctx.attrs.carry_state else None,
        per_channel=ctx.attrs.gate_per_channel),
    doc="Gated DeltaNet linear attention (Qwen3-Next / Qwen3.5, llama.cpp's autoregressive "
        "path). Per batch row and head a state `S [n, n]` (zero, or the `state` operand when "
        "`carry_state`) runs over the sequence: `S ·= exp(g[t])` (each row i by "
        "`exp(g[t, i])` when `gate_per_channel`), `sk[j] = Σ_i S[i,j]·k[t,i]`, "
        "`d = (v[t] - sk)·beta[t]`, `S[i,j] += k[t,i]·d[j]`, "
        "`o[t,j] = Σ_i S[i,j]·q[t,i] / √n`. q and k are used as given (the caller "
        "L2-normalises them). Output `[b, s, h, n]`.",
    constraints=(
        "C1: five operands (six with carry_state) of one float dtype (f32 or f64).",
        "C2: q, k and v are [batch, seq, heads, n] with n = state_size.",
        "C3: g is [batch, seq, heads] ([batch, seq, heads, n] with gate_per_channel); "
        "beta is [batch, seq, heads].",
        "C4: with carry_state, state is [batch, heads, n, n] (S[i, j] row-major).",
    ),
    samples=lambda rng: _samples("gated_delta_net", rng), dtypes=FLOATS,
    accuracy=reduction(4, lambda a, s: (s[0].dims[1] + 1) * (3 * a.state_size + 2), "all",
                       reason="a length-L recurrence of n-term matrix-vector products"),
    notes="RLX's kernel writes the final S back into the `state` operand in place (decode "
          "threading); rlx_ref's IR has one output per node, so only `o` is observable and "
          "operands are never mutated. RLX's CPU kernel is f32 with n <= 128; rlx_ref has no "
          "size limit and adds f64.",
))


# ── Lstm, Gru, Rnn ─────────────────────────────────────────────────────────

_PACKING = (
    "Weights are packed: every (layer, direction) block, layer-major then direction "
    "(forward first), concatenated flat; block (l, d) of w_ih is `[G·H, in_l]` with "
    "`in_l = input` for l = 0 else `D·H` (D = 2 when bidirectional), of w_hh `[G·H, H]`, "
    "of a bias `[G·H]`. Layer l > 0 reads layer l-1's output; the reverse direction walks "
    "t = seq-1..0 and writes position t. h0/c0 (with `carry`) are `[L·D, batch, H]`, "
    "block order again; otherwise states start at zero. Output `[batch, seq, D·H]`, the last "
    "layer's hidden states, forward ‖ reverse on the feature axis."
)


def _recurrent_constraints(kind, ops):
    return (
        f"C1: operands {ops}, one float dtype (f32 or f64).",
        "C2: hidden_size >= 1 and num_layers >= 1.",
        "C3: x is [batch, seq, input].",
        "C4: each packed weight/bias operand holds exactly the elements of its blocks (any "
        "shape; RLX checks element counts).",
        "C5: with carry, the initial states are [num_layers·D, batch, hidden_size].",
    )


_NOTES = ("RLX writes the final states back into h0/c0 in place (decode threading); "
          "rlx_ref's IR has one output per node, so only y is observable and operands are "
          "never mutated. RLX's kernels are f32 only; f64 is rlx_ref's. Oracle checked "
          "against torch.nn.{} (tests/test_ops_sequence.py).")


def _register_recurrent(kind, attrs, names, doc, gates):
    register(OpDef(
        kind=kind, family="sequence", attrs=attrs, payload="struct", arity=None,
        min_arity=sum(not n.endswith("?") for n in names), caps=CAPS,
        input_names=tuple(names),
        check=C.recurrent_checker(kind), infer=C.recurrent_infer,
        reference=lambda ctx, *xs: R.recurrent(kind, ctx.out_np, ctx.attrs, *xs),
        doc=doc + " " + _PACKING.replace("G·H", f"{gates}·H" if gates > 1 else "H"),
        constraints=_recurrent_constraints(kind, "[" + ", ".join(names) + "]"),
        samples=lambda rng: _samples(kind.lower(), rng), dtypes=FLOATS,
        accuracy=reduction(4, C.recurrent_accuracy, "all",
                           reason="stacked recurrences of (input + hidden)-term products"),
        notes=_NOTES.format(kind.upper()),
    ))


_register_recurrent(
    "Lstm", RecurrentAttrs, ("x", "w_ih", "w_hh", "bias", "h0?", "c0?"),
    "Multi-layer LSTM (PyTorch, batch_first), gate order i, f, g, o: "
    "`z = x_t·w_ihᵀ + h·w_hhᵀ + bias` (bias = b_ih + b_hh merged), "
    "`c = σ(z_f)·c + σ(z_i)·tanh(z_g)`, `h = σ(z_o)·tanh(c)`.", 4)
_register_recurrent(
    "Gru", RecurrentAttrs, ("x", "w_ih", "w_hh", "b_ih", "b_hh", "h0?"),
    "Multi-layer GRU (PyTorch, batch_first), gate order r, z, n: "
    "`r = σ(x·W_irᵀ + b_ir + h·W_hrᵀ + b_hr)`, `z = σ(x·W_izᵀ + b_iz + h·W_hzᵀ + b_hz)`, "
    "`n = tanh(x·W_inᵀ + b_in + r ⊙ (h·W_hnᵀ + b_hn))`, `h = (1 - z) ⊙ n + z ⊙ h`; the "
    "biases stay separate because r multiplies b_hn.", 3)
_register_recurrent(
    "Rnn", RnnAttrs, ("x", "w_ih", "w_hh", "bias", "h0?"),
    "Multi-layer Elman RNN (PyTorch, batch_first): `h = act(x_t·w_ihᵀ + h·w_hhᵀ + bias)`, "
    "act = ReLU when `relu` else tanh, bias = b_ih + b_hh merged.", 1)


def _samples(name: str, rng):
    """Samples live in ``_sequence_samples``."""
    from . import _sequence_samples

    return getattr(_sequence_samples, name)(rng)
