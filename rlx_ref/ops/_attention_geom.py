"""Attention geometry: which layout Q/K/V use, GQA head groups, masks, and layout moves.

Shared by the Attention OpDef's check, shape rule and reference. Every function works on
plain dim tuples (ints), so the verifier and the interpreter read shapes the same way.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .opdef import OpError, want

# RLX fills masked scores with this value (RuntimeConfig.attn_mask_neg_inf); it is SET, not
# added, so a row whose keys are all masked gets uniform weights over every key.
MASK_FILL = -1e9
# RLX's mask_binary_threshold: a Custom mask value below it hides the key.
MASK_THRESHOLD = 0.5


@dataclass(frozen=True)
class AttnGeom:
    """Resolved sizes of one Attention node (layout is BHSD, BSHD, BSD or SD)."""

    layout: str
    batch: int
    s_q: int
    s_k: int
    heads: int
    kv_heads: int
    d: int
    dv: int


def _fmt(dims) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


def _per_head(total: int, width: int, what: str, dims) -> int:
    """Head count of a packed last dim ``total = heads * width``."""
    want(width > 0 and total % width == 0,
         f"(C5) {what} {_fmt(dims)}: last dim {total} is not a multiple of the per-head "
         f"width {width}")
    return total // width


def attention_geom(q, k, v, a) -> AttnGeom:
    """Geometry from Q/K/V dims (static ints) and the payload; OpError naming the rule."""
    h, d = a.num_heads, a.head_dim
    dv = a.v_head_dim if a.v_head_dim is not None else d
    rank = len(q)
    want(2 <= rank <= 4, f"(C3) Attention Q must have rank 2, 3 or 4, got {_fmt(q)}")
    want(len(k) == rank and len(v) == rank,
         f"(C3) Q, K and V must have the same rank, got Q {_fmt(q)}, K {_fmt(k)}, V {_fmt(v)}")
    if rank == 4:
        want(q[3] == d, f"(C4) rank-4 Q {_fmt(q)} must end in head_dim = {d}")
        if q[1] == h:  # RLX: axis 1 equal to num_heads means BHSD (even if S_q == H too)
            layout, batch, s_q = "BHSD", q[0], q[2]
            kvh, s_k, v_heads, v_s = k[1], k[2], v[1], v[2]
        else:
            want(q[2] == h, f"(C4) rank-4 Q {_fmt(q)} has num_heads = {h} neither on axis 1 "
                            f"([B, H, S, D]) nor on axis 2 ([B, S, H, D])")
            layout, batch, s_q = "BSHD", q[0], q[1]
            kvh, s_k, v_heads, v_s = k[2], k[1], v[2], v[1]
        want(k[3] == d, f"(C5) K {_fmt(k)} must end in head_dim = {d}")
        want(v[3] == dv, f"(C5) V {_fmt(v)} must end in the value head width {dv}")
        k_batch, v_batch = k[0], v[0]
    else:
        want(q[-1] == h * d,
             f"(C4) Q last dim ({q[-1]}) must be num_heads * head_dim = {h * d} for the packed "
             f"rank-{rank} layout [{'B, ' if rank == 3 else ''}S, H*D]")
        layout = "BSD" if rank == 3 else "SD"
        batch, s_q = (q[0], q[1]) if rank == 3 else (1, q[0])
        k_batch, v_batch = (k[0], v[0]) if rank == 3 else (1, 1)
        s_k, v_s = k[-2], v[-2]
        kvh = _per_head(k[-1], d, "K", k)
        v_heads = _per_head(v[-1], dv, "V", v)
    want(k_batch == batch and v_batch == batch,
         f"(C5) Q, K and V must share the batch size {batch}, got Q {_fmt(q)}, K {_fmt(k)}, "
         f"V {_fmt(v)}")
    want(v_s == s_k, f"(C5) K and V must have the same key length, got K {_fmt(k)}, V {_fmt(v)}")
    want(v_heads == kvh, f"(C5) K has {kvh} heads but V has {v_heads}")
    want(kvh >= 1 and h % kvh == 0,
         f"(C5) K/V have {kvh} heads, which must be >= 1 and divide num_heads = {h} (GQA)")
    want(s_k > 0 or s_q == 0 or batch == 0,
         f"(C6) K/V have no keys (S_k = 0) but Q has {s_q} queries: softmax over zero keys is "
         f"undefined")
    return AttnGeom(layout, batch, s_q, s_k, h, kvh, d, dv)


def output_dims(q, a) -> tuple:
    """Q's dims with the last one set to the value width (rank 4) or heads * value width."""
    if a.v_head_dim is None or a.v_head_dim == a.head_dim:
        return tuple(q)
    last = a.v_head_dim if len(q) == 4 else a.num_heads * a.v_head_dim
    return tuple(q[:-1]) + (last,)


def to_bhsd(x: np.ndarray, g: AttnGeom, heads: int, width: int) -> np.ndarray:
    """A Q/K/V/output array in g.layout as ``[B, heads, S, width]``."""
    if g.layout == "BHSD":
        return x
    if g.layout == "BSHD":
        return x.transpose(0, 2, 1, 3)
    batch, seq = (x.shape[0], x.shape[1]) if g.layout == "BSD" else (1, x.shape[0])
    return x.reshape(batch, seq, heads, width).transpose(0, 2, 1, 3)


def from_bhsd(o: np.ndarray, g: AttnGeom) -> np.ndarray:
    """Inverse of ``to_bhsd`` for the output ``[B, H, S_q, dv]``."""
    if g.layout == "BHSD":
        return o
    o = o.transpose(0, 2, 1, 3)  # [B, S_q, H, dv]
    if g.layout == "BSHD":
        return o
    o = o.reshape(g.batch, g.s_q, g.heads * g.dv)
    return o if g.layout == "BSD" else o[0]


def synthetic_allowed(mask_kind, s_q: int, s_k: int) -> np.ndarray:
    """``[S_q, S_k]`` bool: which keys each query may see under None/Causal/SlidingWindow.

    Queries sit at the END of the keys (KV-cache decode): query ``qi`` is at absolute
    position ``max(S_k - S_q, 0) + qi``.
    """
    abs_q = max(s_k - s_q, 0) + np.arange(s_q)[:, None]
    ki = np.arange(s_k)[None, :]
    if mask_kind == "Causal":
        return ki <= abs_q
    if isinstance(mask_kind, tuple) and mask_kind[0] == "SlidingWindow":
        w = mask_kind[1]
        return (ki <= abs_q) & (ki >= abs_q - w)
    return np.ones((s_q, s_k), bool)


def check_mask_operand(shape, g: AttnGeom, mask_kind) -> None:
    """The 4th operand: a ``[B, S_k]`` key mask (Custom) or ``[B, H, S_q, S_k]`` bias."""
    dims = tuple(shape.dims)
    if mask_kind == "Custom":
        want(shape.dtype.is_float or shape.dtype.is_bool,
             f"(C7) a Custom mask must be float or bool, got {shape.dtype}")
        want(dims == (g.batch, g.s_k),
             f"(C7) a Custom mask must be [B, S_k] = [{g.batch}, {g.s_k}] (1 = attend, < 0.5 = "
             f"hidden), got {_fmt(dims)}")
    elif mask_kind == "Bias":
        want(shape.dtype.is_float, f"(C7) an attention Bias must be float, got {shape.dtype}")
        expect = (g.batch, g.heads, g.s_q, g.s_k)
        want(dims == expect, f"(C7) an attention Bias must be [B, H, S_q, S_k] = {_fmt(expect)}, "
                             f"got {_fmt(dims)}")


def mask_arity(mask_kind) -> int:
    """3 operands, or 4 when the mask kind reads a tensor (Custom, Bias)."""
    return 4 if mask_kind in ("Custom", "Bias") else 3


__all__ = ["AttnGeom", "MASK_FILL", "MASK_THRESHOLD", "OpError", "attention_geom",
           "check_mask_operand", "from_bhsd", "mask_arity", "output_dims",
           "synthetic_allowed", "to_bhsd"]
