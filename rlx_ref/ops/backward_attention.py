"""Backward kinds of Attention: AttentionBackward (one of dQ, dK, dV, chosen by ``wrt``) and
AttentionBackwardAll (all three packed along axis 0).

Both recompute the forward scores and softmax from q, k, v (and the mask), then read like
the textbook backward pass: ``dV = Pᵀ·dY``, ``dP = dY·Vᵀ``, ``dS = P ⊙ (dP − rowsum(P ⊙ dP))``,
``dQ = dS·K·scale``, ``dK = dSᵀ·Q·scale``. Hidden keys are SET to a constant score by the
forward, so their ``dS`` is 0. RLX's payload has no score_scale, softcap or v_head_dim:
these kinds differentiate an Attention with the default scale ``1/sqrt(head_dim)``, no cap
and V as wide as Q/K. Layouts, GQA and masks are Attention's (``_attention_geom``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..conformance.accuracy import reduction
from ..ir.dtype import DType
from ..ir.shape import Dyn, Shape
from . import _attention_geom as geo
from .attention import MASK_KIND, AttentionAttrs, _check_attention, _infer_attention, _softmax
from .codec import USIZE, Enum, attr
from .opdef import Caps, OpDef, OpError, register, want

FLOATS = (DType.F32, DType.F64, DType.F16, DType.BF16)
WRT = Enum("AttentionBwdWrt", units=("Query", "Key", "Value"))
_WRT_INDEX = {"Query": 0, "Key": 1, "Value": 2}


@dataclass(frozen=True)
class AttentionBackwardAttrs:
    num_heads: int = attr(USIZE, doc="the forward Attention's query heads H")
    head_dim: int = attr(USIZE, doc="the forward Attention's per-head width D (Q, K and V)")
    mask_kind: object = attr(MASK_KIND, doc="the forward Attention's mask kind")
    wrt: str = attr(WRT, doc="which gradient: Query (dQ), Key (dK) or Value (dV)")


@dataclass(frozen=True)
class AttentionBackwardAllAttrs:
    num_heads: int = attr(USIZE, doc="the forward Attention's query heads H")
    head_dim: int = attr(USIZE, doc="the forward Attention's per-head width D (Q, K and V)")
    mask_kind: object = attr(MASK_KIND, doc="the forward Attention's mask kind")


def forward_attrs(a) -> AttentionAttrs:
    """The forward Attention these kinds differentiate (default scale, no cap)."""
    return AttentionAttrs(num_heads=a.num_heads, head_dim=a.head_dim, mask_kind=a.mask_kind)


def _forward_shapes(shapes):
    """q, k, v and the mask operand, if any (dy is operand 3)."""
    return list(shapes[:3]) + list(shapes[4:])


def _check_common(kind: str, shapes, a):
    fwd = forward_attrs(a)
    n = geo.mask_arity(a.mask_kind) + 1
    extra = {"Custom": ", mask", "Bias": ", bias"}.get(a.mask_kind, "")
    want(len(shapes) == n, f"(C2) {kind} with mask_kind {MASK_KIND.to_json(a.mask_kind)} "
                           f"takes {n} inputs (q, k, v, dy{extra}), got {len(shapes)}")
    try:
        _check_attention(_forward_shapes(shapes), fwd, None)
        expect = _infer_attention(_forward_shapes(shapes), fwd)
    except OpError as e:
        raise OpError(f"{kind}: the forward Attention of q, k, v{extra} is invalid: {e}") \
            from None
    dy = shapes[3]
    want(dy == expect, f"(C3) {kind}: dy {dy} must be the forward Attention's output {expect}")


def _check_backward(shapes, a, out):
    want(a.wrt in WRT.units, f"(C1) wrt must be Query, Key or Value, got {a.wrt!r}")
    _check_common("AttentionBackward", shapes, a)


def _check_backward_all(shapes, a, out):
    _check_common("AttentionBackwardAll", shapes, a)
    q, k, v = shapes[:3]
    want(q.dims == k.dims == v.dims,
         f"(C4) AttentionBackwardAll packs dQ, dK and dV along axis 0, so q, k and v must "
         f"share one shape (self-attention, no GQA), got q {q}, k {k}, v {v}")
    want(q.rank >= 1, "(C4) q must have rank >= 1")


def _infer_backward(shapes, a):
    return shapes[_WRT_INDEX[a.wrt]] if a.wrt in _WRT_INDEX else None


def _infer_backward_all(shapes, a):
    q = shapes[0]
    if q.rank == 0 or isinstance(q.dims[0], Dyn):
        return None
    return q.with_dim(0, 3 * q.dims[0])


def _from_bhsd(x: np.ndarray, g: geo.AttnGeom, shape) -> np.ndarray:
    """A ``[B, heads, S, width]`` gradient back in the layout of the operand of ``shape``."""
    if g.layout == "BHSD":
        return x
    x = x.transpose(0, 2, 1, 3)                     # [B, S, heads, width]
    return x if g.layout == "BSHD" else x.reshape(shape)


def attention_grads(q, k, v, dy, mask, a):
    """(dQ, dK, dV) of ``Attention(q, k, v[, mask])`` for the cotangent ``dy``, each in
    the layout, shape and working dtype of its operand."""
    fwd = forward_attrs(a)
    g = geo.attention_geom(q.shape, k.shape, v.shape, fwd)   # re-checked: dims may be dynamic
    if mask is not None:
        geo.check_mask_operand(Shape(mask.shape, DType.of(mask)), g, a.mask_kind)
    want(dy.shape == geo.output_dims(q.shape, fwd),
         f"(C3) dy {list(dy.shape)} must be the forward output "
         f"{list(geo.output_dims(q.shape, fwd))}")
    dt = q.dtype.type
    Q = geo.to_bhsd(q, g, g.heads, g.d)              # [B, H, S_q, D]
    DY = geo.to_bhsd(dy, g, g.heads, g.dv)           # [B, H, S_q, D]
    group = g.heads // g.kv_heads                    # query heads per K/V head (GQA)
    K = np.repeat(geo.to_bhsd(k, g, g.kv_heads, g.d), group, axis=1)
    V = np.repeat(geo.to_bhsd(v, g, g.kv_heads, g.dv), group, axis=1)
    scale = dt(1) / np.sqrt(dt(g.d))
    with np.errstate(all="ignore"):
        s = (Q @ K.swapaxes(-1, -2)) * scale         # the forward's scores [B, H, S_q, S_k]
        if a.mask_kind == "Bias":
            s = s + mask.astype(s.dtype)
        allowed = geo.synthetic_allowed(a.mask_kind, g.s_q, g.s_k)[None, None]
        if a.mask_kind == "Custom":
            keep = ~(mask.astype(np.float64) < geo.MASK_THRESHOLD)
            allowed = allowed & keep[:, None, None, :]
        p = _softmax(np.where(allowed, s, dt(geo.MASK_FILL)))
        dV = p.swapaxes(-1, -2) @ DY                 # out = P·V
        dP = DY @ V.swapaxes(-1, -2)
        dS = p * (dP - (p * dP).sum(axis=-1, keepdims=True))     # through the softmax
        dS = np.where(allowed, dS, dt(0))            # hidden scores are constants
        dQ = (dS @ K) * scale
        dK = (dS.swapaxes(-1, -2) @ Q) * scale

    def fold(x):                                     # sum each K/V head's query group
        return x.reshape(x.shape[0], g.kv_heads, group, *x.shape[2:]).sum(axis=2)

    return (_from_bhsd(dQ, g, q.shape), _from_bhsd(fold(dK), g, k.shape),
            _from_bhsd(fold(dV), g, v.shape))


def _work(*arrays):
    dt = np.float64 if any(a.dtype == np.float64 for a in arrays) else np.float32
    return [np.asarray(a).astype(dt) for a in arrays]


def _ref_backward(ctx, q, k, v, dy, *mask):
    grads = attention_grads(*_work(q, k, v, dy), mask[0] if mask else None, ctx.attrs)
    return grads[_WRT_INDEX[ctx.attrs.wrt]].astype(ctx.out_np)


def _ref_backward_all(ctx, q, k, v, dy, *mask):
    grads = attention_grads(*_work(q, k, v, dy), mask[0] if mask else None, ctx.attrs)
    return np.concatenate(grads, axis=0).astype(ctx.out_np)


def _samples(name: str):
    def samples(rng):
        from . import _backward_attention_samples

        return getattr(_backward_attention_samples, name)(rng)
    return samples


def _k_terms(a, s) -> int:
    """Terms behind one gradient element: the score row (S_k·D) and the key/query sums."""
    g = geo.attention_geom(s[0].dims, s[1].dims, s[2].dims, forward_attrs(a))
    return (g.s_q + g.s_k) * (a.head_dim + 2)


_GEOMETRY = (
    "Operands are RLX's `[q, k, v, dy]` plus the forward's mask or bias when mask_kind is "
    "Custom or Bias; `dy` is the cotangent of Attention's output (Q's shape). Layouts "
    "(BHSD, BSHD, packed BSD and SD), GQA head groups and the masks (None, Causal, "
    "SlidingWindow(w), Custom, Bias) are Attention's; the scale is `1/sqrt(head_dim)`. "
    "dK and dV sum over the query heads that share a K/V head. Hidden keys get no "
    "gradient (the forward sets their scores); a row with every key hidden has uniform "
    "weights, so it still feeds dV. f16/bf16 compute in f32."
)
_CONSTRAINTS = (
    "C1: num_heads and head_dim are non-zero; mask_kind is a MaskKind (and wrt is Query, "
    "Key or Value).",
    "C2: 4 operands (q, k, v, dy), or 5 when mask_kind is Custom (mask) or Bias (bias); the "
    "forward Attention of q, k, v (and the mask) with this payload, the default scale, no "
    "softcap and v_head_dim = head_dim is valid (Attention's C2-C7).",
    "C3: dy has the forward output's shape and dtype (Q's).",
)

register(OpDef(
    kind="AttentionBackward", family="backward", attrs=AttentionBackwardAttrs,
    payload="struct", arity=None, min_arity=4, caps=Caps.NONE, infer=_infer_backward,
    check=_check_backward, reference=_ref_backward,
    input_names=("q", "k", "v", "dy", "mask"),
    doc="One gradient of scaled dot-product `Attention`: `wrt` = Query gives dQ (q's "
        "shape), Key gives dK (k's), Value gives dV (v's). With `P = softmax(masked(QKᵀ·"
        "scale + bias))`: `dV = Pᵀ·dY`, `dS = P ⊙ (dY·Vᵀ − rowsum(P ⊙ dY·Vᵀ))` (0 on hidden "
        "keys), `dQ = dS·K·scale`, `dK = dSᵀ·Q·scale`. " + _GEOMETRY,
    constraints=_CONSTRAINTS, samples=_samples("attention_backward_samples"),
    dtypes=FLOATS, accuracy=reduction(4, _k_terms, "all"),
    notes="RLX's autodiff emits three of these (Query, Key, Value) per Attention and drops "
          "the forward's score_scale and attn_logit_softcap, which this payload cannot "
          "carry: an Attention with either set (or with v_head_dim != head_dim) has no "
          "AttentionBackward. RLX's CPU kernel needs equal head counts; GQA works here.",
))

register(OpDef(
    kind="AttentionBackwardAll", family="backward", attrs=AttentionBackwardAllAttrs,
    payload="struct", arity=None, min_arity=4, caps=Caps.NONE, infer=_infer_backward_all,
    check=_check_backward_all, reference=_ref_backward_all,
    input_names=("q", "k", "v", "dy", "mask"),
    doc="dQ, dK and dV of one `Attention` in ONE packed output: the three gradients "
        "(AttentionBackward's Query, Key and Value) concatenated along axis 0, so the "
        "output is q's shape with axis 0 tripled (`[3B, ...]`; rank 2: `[3S, H*D]`), and "
        "axis-0 Narrows at 0, B and 2B recover them. Packing needs q, k and v of one "
        "shape (self-attention). " + _GEOMETRY,
    constraints=_CONSTRAINTS + (
        "C4: q, k and v share one shape (so the three gradients pack along axis 0).",),
    samples=_samples("attention_backward_all_samples"), dtypes=FLOATS,
    accuracy=reduction(4, _k_terms, "all"),
    notes="RLX's FuseAttentionBackwardAll pass (opt-in) builds it from the three sibling "
          "AttentionBackward nodes when q and k share a shape, then Narrows the packed "
          "buffer; one output tensor per node, so it fits rlx_ref's IR as is.",
))
