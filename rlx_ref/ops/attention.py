"""Attention family: Attention (scaled dot-product, every RLX mask and layout) and Rope.

The Attention reference moves Q/K/V into ``[B, H, S, D]``, repeats K/V heads for GQA,
and then reads exactly like the textbook formula ``softmax(QKᵀ·scale + mask)·V``.
Layout rules and masks live in ``_attention_geom``; samples in ``_attention_samples``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..conformance.accuracy import reduction
from ..ir.dtype import DType
from ..ir.shape import Shape
from . import _attention_geom as geo
from .codec import F32, USIZE, Enum, Optional, attr
from .opdef import Caps, OpDef, register, want

FLOATS = (DType.F32, DType.F64, DType.F16, DType.BF16)
MASK_KIND = Enum("MaskKind", units=("None", "Causal", "Custom", "Bias"),
                 data={"SlidingWindow": USIZE})
ROPE_STYLE = Enum("RopeStyle", units=("NeoX", "GptJ"))


def _f32_or_none(v):
    # the codec's rounding leaves non-numbers and f32 overflows for the verifier to report
    return None if v is None else F32.normalize(v)


def _work(*arrays):
    """Arrays in one arithmetic dtype: f64 if any input is f64, else f32."""
    dt = np.float64 if any(a.dtype == np.float64 for a in arrays) else np.float32
    return [np.asarray(a).astype(dt) for a in arrays]


def _samples(name: str, rng):
    """Samples live in their own module (it imports this one's attrs classes)."""
    from . import _attention_samples

    return getattr(_attention_samples, name)(rng)


# ── Attention ─────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class AttentionAttrs:
    num_heads: int = attr(USIZE, doc="query heads H")
    head_dim: int = attr(USIZE, doc="per-head width D of Q and K")
    v_head_dim: int | None = attr(Optional(USIZE), None, doc="per-head width of V and the "
                                  "output (None = head_dim; MLA uses another)")
    mask_kind: object = attr(MASK_KIND, "None",
                             doc="None, Causal, SlidingWindow(w), Custom or Bias")
    score_scale: float | None = attr(Optional(F32), None,
                                     doc="score multiplier (None = D^-1/2)")
    attn_logit_softcap: float | None = attr(Optional(F32), None,
                                            doc="cap c: s -> c·tanh(s/c)")

    def __post_init__(self):
        # RLX stores these as f32; rounding here keeps Python-built payloads == parsed ones
        object.__setattr__(self, "score_scale", _f32_or_none(self.score_scale))
        object.__setattr__(self, "attn_logit_softcap", _f32_or_none(self.attn_logit_softcap))


def _check_payload(a):
    want(a.num_heads > 0 and a.head_dim > 0,
         "(C1) Attention num_heads and head_dim must be non-zero, got "
         f"num_heads={a.num_heads}, head_dim={a.head_dim}")
    want(a.v_head_dim is None or a.v_head_dim > 0, "(C1) Attention v_head_dim must be non-zero")
    mk = a.mask_kind
    want(mk in MASK_KIND.units or (isinstance(mk, tuple) and len(mk) == 2
                                   and mk[0] == "SlidingWindow" and isinstance(mk[1], int)
                                   and mk[1] >= 0),
         f"(C1) mask_kind must be None, Causal, ('SlidingWindow', w >= 0), Custom or Bias, "
         f"got {mk!r}")
    if a.score_scale is not None:
        want(math.isfinite(a.score_scale), f"(C8) score_scale must be finite, got "
                                           f"{a.score_scale}")
    if a.attn_logit_softcap is not None:
        c = a.attn_logit_softcap
        want(math.isfinite(c) and c > 0, f"(C8) attn_logit_softcap must be a finite positive "
                                         f"cap, got {c}")


def _check_attention(shapes, a, out):
    _check_payload(a)
    n = geo.mask_arity(a.mask_kind)
    operands = "q, k, v" + {"Custom": ", mask", "Bias": ", bias"}.get(a.mask_kind, "")
    want(len(shapes) == n, f"(C2) Attention with mask_kind {MASK_KIND.to_json(a.mask_kind)} "
                           f"takes {n} inputs ({operands}), got {len(shapes)}")
    q, k, v = shapes[:3]
    for s, name in zip((q, k, v), "QKV"):
        want(s.dtype.is_float, f"(C3) Attention {name} must be a float tensor, got {s.dtype}")
    want(q.dtype == k.dtype == v.dtype,
         f"(C3) Q, K and V must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if not all(s.is_static for s in shapes):
        want(2 <= q.rank <= 4, f"(C3) Attention Q must have rank 2, 3 or 4, got {q}")
        return  # the layout rules need static dims; the interpreter re-checks them
    g = geo.attention_geom(q.dims, k.dims, v.dims, a)
    if n == 4:
        geo.check_mask_operand(shapes[3], g, a.mask_kind)


def _infer_attention(shapes, a):
    q = shapes[0]
    want(2 <= q.rank <= 4, f"(C3) Attention Q must have rank 2, 3 or 4, got {q}")
    return Shape(geo.output_dims(q.dims, a), q.dtype)


def _softmax(s: np.ndarray) -> np.ndarray:
    """Row softmax over the last axis, max-subtracted."""
    m = s.max(axis=-1, keepdims=True, initial=-np.inf)
    e = np.exp(s - m)
    return e / e.sum(axis=-1, keepdims=True)


def _ref_attention(ctx, q, k, v, *mask):
    a = ctx.attrs
    q, k, v = _work(q, k, v)
    dt = q.dtype.type
    g = geo.attention_geom(q.shape, k.shape, v.shape, a)  # re-checked: dims may be dynamic
    if mask:
        geo.check_mask_operand(Shape(mask[0].shape, DType.of(mask[0])), g, a.mask_kind)
    Q = geo.to_bhsd(q, g, g.heads, g.d)             # [B, H, S_q, D]
    K = geo.to_bhsd(k, g, g.kv_heads, g.d)          # [B, H_kv, S_k, D]
    V = geo.to_bhsd(v, g, g.kv_heads, g.dv)         # [B, H_kv, S_k, Dv]
    # GQA: query head h reads K/V head h // (H / H_kv) (contiguous groups)
    K = np.repeat(K, g.heads // g.kv_heads, axis=1)
    V = np.repeat(V, g.heads // g.kv_heads, axis=1)
    scale = dt(a.score_scale) if a.score_scale is not None else dt(1) / np.sqrt(dt(g.d))
    with np.errstate(all="ignore"):
        s = (Q @ K.swapaxes(-1, -2)) * scale        # [B, H, S_q, S_k]
        if a.mask_kind == "Bias":
            s = s + mask[0].astype(s.dtype)
        if a.attn_logit_softcap is not None:
            cap = dt(a.attn_logit_softcap)
            s = cap * np.tanh(s / cap)
        allowed = geo.synthetic_allowed(a.mask_kind, g.s_q, g.s_k)[None, None]
        if a.mask_kind == "Custom":
            # NaN < 0.5 is false, so a NaN mask value keeps its key (as RLX)
            keep = ~(mask[0].astype(np.float64) < geo.MASK_THRESHOLD)
            allowed = allowed & keep[:, None, None, :]
        s = np.where(allowed, s, dt(geo.MASK_FILL))
        out = _softmax(s) @ V                        # [B, H, S_q, Dv]
    return geo.from_bhsd(out, g).astype(ctx.out_np)


register(OpDef(
    kind="Attention", family="attention", attrs=AttentionAttrs, payload="struct",
    arity=None, min_arity=3, caps=Caps.NONE, infer=_infer_attention, check=_check_attention,
    reference=_ref_attention, input_names=("q", "k", "v", "mask"),
    doc="Scaled dot-product attention `out = softmax(cap(QKᵀ·scale + bias), masked)·V` per "
        "batch and head. `scale` = `score_scale` or `1/sqrt(head_dim)`. Layouts (Q, K, V and "
        "the output share one): rank 4 is `[B, H, S, D]` when Q's axis 1 equals `num_heads` "
        "(this wins when S_q = H too), else `[B, S, H, D]`; rank 3 is packed `[B, S, H*D]` "
        "(head h at `[h*D, (h+1)*D)`); rank 2 is packed `[S, H*D]` with B = 1. K/V may have "
        "fewer heads H_kv (GQA/MQA): query head h reads K/V head `h // (H/H_kv)`. "
        "`v_head_dim` (None = head_dim) is V's per-head width and the output's. Order: scores "
        "are scaled, the Bias `[B, H, S_q, S_k]` is added, the softcap `c·tanh(s/c)` is "
        "applied, then hidden keys are SET to -1e9 and a max-subtracted softmax over keys "
        "weights V. Hidden keys: Causal hides `ki > qi + max(S_k - S_q, 0)` (queries aligned "
        "to the END of the keys); SlidingWindow(w) also hides `ki < that - w` (w + 1 keys "
        "incl. self); Custom hides key ki of batch b where `mask[b, ki] < 0.5` (`[B, S_k]`). "
        "A row with every key hidden gets uniform weights (the mean of V's rows), as RLX.",
    constraints=(
        "C1: num_heads, head_dim and v_head_dim (if set) are non-zero; mask_kind is a "
        "MaskKind.",
        "C2: exactly 3 operands (q, k, v), or 4 when mask_kind is Custom (mask) or Bias (bias).",
        "C3: Q, K, V are float tensors of one dtype and one rank, which is 2, 3 or 4.",
        "C4: Q matches a layout: rank 4 ends in head_dim and has num_heads on axis 1 or 2; "
        "rank 2/3 ends in num_heads * head_dim.",
        "C5: K and V share Q's batch, one key length S_k and one head count H_kv that "
        "divides num_heads; K's per-head width is head_dim, V's is v_head_dim.",
        "C6: S_k > 0 whenever there are queries.",
        "C7: a Custom mask is float or bool `[B, S_k]`; a Bias is float `[B, H, S_q, S_k]`.",
        "C8: score_scale is finite; attn_logit_softcap is finite and > 0.",
    ),
    samples=lambda rng: _samples("attention_samples", rng),
    # K = S_k·D terms per output; scale Σ p·|v| (the oracle on |V|)
    accuracy=reduction(2, lambda a, s: geo.attention_geom(s[0].dims, s[1].dims, s[2].dims, a)
                       .s_k * a.head_dim, "abs", operands=(2,)),
    dtypes=FLOATS,
    notes="Payload: the newest RLX form (op.rs @6ba28d59) with `v_head_dim` between head_dim "
          "and mask_kind; the older form without it parses as v_head_dim = None. RLX's CPU "
          "applies the softcap AFTER setting masked scores to -1e9 (so masked keys become "
          "≈ -c and leak weight); the reference caps first and masks after, as documented "
          "(\"applies c·tanh(s/c) to scores\"), which is identical on unmasked keys. RLX's CPU "
          "also skips weights <= 1e-8 when summing V and applies the softcap only on its "
          "BHSD path; the reference does neither. Rank-3 Q whose last dim is head_dim with "
          "num_heads > 1 (RLX's doc calls rank 3 single-head) is rejected as ambiguous; "
          "softcap <= 0 (silently ignored by RLX's CPU) is rejected. The Bias is added "
          "BEFORE the softcap, as RLX's CPU does (rlx-cpu executor.rs: MaskKind::Bias adds "
          "into the scores, then c·tanh(s/c)): the bias is part of the score the cap bounds, "
          "so a -inf bias becomes -c and that key keeps weight; hide keys with a mask kind, "
          "which applies after the cap here.",
))


# ── Rope ──────────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class RopeAttrs:
    head_dim: int = attr(USIZE, doc="per-head width; x's last dim holds whole heads")
    n_rot: int = attr(USIZE, doc="leading lanes of each head that rotate (even, <= head_dim)")
    style: str = attr(ROPE_STYLE, "NeoX", doc="NeoX: pairs (i, i + n_rot/2); GptJ: (2i, 2i+1)")


def rope_tables(x_dims, cos_dims, half: int):
    """(batch, seq, row stride, table rows, per_token) from the shapes, as RLX reads them."""
    seq = x_dims[-2]
    batch = int(np.prod(x_dims[:-2], dtype=np.int64))
    stride = cos_dims[-1] if len(cos_dims) >= 2 else half
    numel = int(np.prod(cos_dims, dtype=np.int64))
    want(stride >= half, f"(C4) Rope table rows hold {stride} values but n_rot/2 = {half} "
                         f"frequencies are needed (cos/sin {list(cos_dims)})")
    want(numel % stride == 0, f"(C4) a rank-1 Rope table must hold whole rows of n_rot/2 = "
                              f"{half} values, got {numel}")
    rows = numel // stride
    per_token = rows == batch * seq and rows != seq
    want(per_token or rows >= seq,
         f"(C4) Rope tables have {rows} rows; expected one per position (>= {seq}) or one per "
         f"token (batch * seq = {batch * seq})")
    return batch, seq, stride, rows, per_token


def _check_rope(shapes, a, out):
    x, cos, sin = shapes
    d, r = a.head_dim, a.n_rot
    want(a.style in ROPE_STYLE.units, f"(C1) Rope style must be NeoX or GptJ, got {a.style!r}")
    want(d > 0, "(C1) Rope head_dim must be non-zero")
    want(d % 2 == 0, f"(C1) Rope head_dim ({d}) must be even")
    want(r % 2 == 0, f"(C1) Rope n_rot ({r}) must be even")
    want(r <= d, f"(C1) Rope n_rot ({r}) exceeds head_dim ({d}): only the first n_rot lanes of "
                 f"each head rotate")
    for s, n in ((x, "x"), (cos, "cos"), (sin, "sin")):
        want(s.dtype.is_float, f"(C2) Rope operand `{n}` must be a float tensor, got {s.dtype}")
    want(x.rank >= 2, f"(C2) Rope x must be [..., S, H*head_dim] (rank >= 2), got {x}")
    if x.is_static:
        want(x.dims[-1] % d == 0, f"(C2) Rope input last dim ({x.dims[-1]}) is not a multiple "
                                  f"of head_dim ({d})")
    want(cos.dims == sin.dims, f"(C3) Rope cos and sin must have one shape, got {cos} and {sin}")
    want(cos.rank >= 1, "(C3) Rope tables must have rank >= 1, got 0-d")
    if r > 0 and x.is_static and cos.is_static:
        rope_tables(x.dims, cos.dims, r // 2)


def _ref_rope(ctx, x, cos, sin):
    a = ctx.attrs
    half = a.n_rot // 2
    want(x.shape[-1] % a.head_dim == 0, f"(C2) Rope input last dim ({x.shape[-1]}) is not a "
                                        f"multiple of head_dim ({a.head_dim})")
    xf, cos, sin = _work(x, cos, sin)
    if half == 0:
        return xf.astype(ctx.out_np)
    batch, seq, stride, rows, per_token = rope_tables(x.shape, cos.shape, half)
    c = cos.reshape(rows, stride)[:, :half]         # frequency i of each table row
    s = sin.reshape(rows, stride)[:, :half]
    if per_token:                                    # row b*S + s
        c, s = c.reshape(batch, seq, half), s.reshape(batch, seq, half)
    else:                                            # row s, shared by every batch entry
        c, s = c[None, :seq], s[None, :seq]
    c, s = c[:, :, None, :], s[:, :, None, :]        # broadcast over heads
    xr = xf.reshape(batch, seq, x.shape[-1] // a.head_dim, a.head_dim)
    y = xr.copy()                                    # lanes n_rot.. pass through
    if a.style == "NeoX":
        lo, hi = slice(0, half), slice(half, a.n_rot)
    else:
        lo, hi = slice(0, a.n_rot, 2), slice(1, a.n_rot, 2)
    x1, x2 = xr[..., lo], xr[..., hi]
    y[..., lo] = x1 * c - x2 * s
    y[..., hi] = x2 * c + x1 * s
    return y.reshape(x.shape).astype(ctx.out_np)


register(OpDef(
    kind="Rope", family="attention", attrs=RopeAttrs, payload="struct", arity=3,
    caps=Caps.NONE, infer=lambda s, a: s[0], check=_check_rope, reference=_ref_rope,
    input_names=("x", "cos", "sin"),
    doc="Rotary position embedding. x is `[..., S, H*head_dim]`: axis -2 is the position and "
        "all leading axes form the batch (rank-4 x must be `[B, H, S, D]`). In every head, "
        "the first `n_rot` lanes rotate in `n_rot/2` pairs and the rest pass through. Pair i "
        "is `(i, i + n_rot/2)` for NeoX and `(2i, 2i+1)` for GptJ; with `c = cos[row, i]`, "
        "`s = sin[row, i]`: `y₁ = x₁·c - x₂·s`, `y₂ = x₂·c + x₁·s`. Tables hold angles the "
        "caller computed (the position offset is baked in): a table row is its last dim "
        "(n_rot/2 for rank 1) wide and only its first n_rot/2 values are read. With "
        "batch·S rows (and batch·S != S) row `b*S + s` is used per token, else row `s`.",
    constraints=(
        "C1: head_dim is non-zero and even; n_rot is even and <= head_dim; style is NeoX or "
        "GptJ.",
        "C2: x is float of rank >= 2 and its last dim is a multiple of head_dim.",
        "C3: cos and sin are float and have one shape of rank >= 1.",
        "C4: table rows are >= n_rot/2 wide, and there is one row per token (batch·S) or at "
        "least one per position (>= S; the first S are used).",
    ),
    samples=lambda rng: _samples("rope_samples", rng),
    accuracy=reduction(2, 2, "row", axes=(-1,)),   # x1·c - x2·s on the heads' scale
    dtypes=FLOATS,
    notes="Payload: the newest RLX form with `style`; the older form without it parses as "
          "NeoX. A rank-4 [B, S, H, D] x would rotate by head index instead of position, as "
          "in RLX: reshape it to [B, S, H*D] first.",
))
