"""Samples of AttentionBackward (every wrt × every mask kind, layouts, GQA, edge cases) and
AttentionBackwardAll (self-attention shapes, every mask kind)."""
from __future__ import annotations

import numpy as np

from .backward_attention import AttentionBackwardAllAttrs, AttentionBackwardAttrs
from .opdef import Sample

_F = np.float32
SW1, SW0 = ("SlidingWindow", 1), ("SlidingWindow", 0)


def _geometries(rng):
    """(q, k, v, mask or None, heads, head_dim, mask_kind, tags): one forward each."""
    r = lambda *s: rng.standard_normal(s).astype(_F)  # noqa: E731
    m = np.array([[1, 1, 0, 1, 0], [0, 0, 0, 0, 0]], _F)
    return [
        (r(2, 3, 8), r(2, 3, 8), r(2, 3, 8), None, 2, 4, "None", ("packed", "odd")),
        (r(1, 2, 3, 4), r(1, 2, 3, 4), r(1, 2, 3, 4), None, 2, 4, "Causal", ("BHSD",)),
        (r(1, 3, 2, 4), r(1, 5, 2, 4), r(1, 5, 2, 4), None, 2, 4, "Causal",
         ("BSHD", "kv-cache", "prime-length")),
        (r(5, 8), r(5, 8), r(5, 8), None, 2, 4, SW1, ("rank-2", "sliding-window")),
        (r(1, 4, 4), r(1, 6, 4), r(1, 6, 4), None, 1, 4, SW0, ("sliding-window", "w=0")),
        (r(1, 3, 4), r(1, 2, 4), r(1, 2, 4), None, 1, 4, "Causal", ("S_k<S_q",)),
        (r(2, 3, 4), r(2, 5, 4), r(2, 5, 4), m, 1, 4, "Custom",
         ("custom-mask", "fully-masked")),
        (r(1, 2, 4), r(1, 3, 4), r(1, 3, 4), np.array([[True, False, True]]), 2, 2, "Custom",
         ("custom-mask", "bool")),
        (r(1, 2, 3, 4), r(1, 2, 3, 4), r(1, 2, 3, 4), r(1, 2, 3, 3), 2, 4, "Bias",
         ("bias", "BHSD")),
        (r(1, 3, 4, 2), r(1, 3, 2, 2), r(1, 3, 2, 2), None, 4, 2, "Causal", ("GQA", "BSHD")),
        (r(2, 3, 12), r(2, 4, 4), r(2, 4, 4), None, 3, 4, "None", ("MQA", "packed")),
    ]


def _edges(rng):
    r = lambda *s: rng.standard_normal(s).astype(_F)  # noqa: E731
    nan = r(1, 2, 4)
    nan[0, 0, 0] = np.nan
    return [
        (rng.standard_normal((1, 3, 8)), rng.standard_normal((1, 4, 8)),
         rng.standard_normal((1, 4, 8)), None, 2, 4, "Causal", ("f64",)),
        tuple(r(1, 3, 8).astype(np.float16) for _ in range(3)) + (None, 2, 4, "Causal",
                                                                   ("f16",)),
        (r(1, 0, 8), r(1, 3, 8), r(1, 3, 8), None, 2, 4, "Causal", ("empty",)),
        (nan, r(1, 2, 4), r(1, 2, 4), None, 1, 4, "None", ("nan",)),
    ]


def _dy_for(rng, q):
    """A cotangent of the forward output (Q's shape, as v_head_dim = head_dim)."""
    return rng.standard_normal(q.shape).astype(q.dtype)


def attention_backward_samples(rng):
    A = AttentionBackwardAttrs
    out = []
    for wrt in ("Query", "Key", "Value"):
        for q, k, v, mask, h, d, mk, tags in _geometries(rng) + _edges(rng):
            ops = (q, k, v, _dy_for(rng, q)) + ((mask,) if mask is not None else ())
            out.append(Sample(ops, A(h, d, mk, wrt), tags=(wrt,) + tags))
    # one key: P = 1, so dV sums dY over the queries and dQ is exactly 0
    q, k, v = (rng.standard_normal(s).astype(_F) for s in ((1, 2, 4), (1, 1, 4), (1, 1, 4)))
    dy = np.array([[[1, 2, 3, 4], [10, 20, 30, 40]]], _F)
    out += [
        Sample((q, k, v, dy), A(1, 4, "None", "Value"), tags=("hand", "size-1"),
               expect=np.array([[[11, 22, 33, 44]]], _F)),
        Sample((q, k, v, dy), A(1, 4, "None", "Query"), tags=("hand", "size-1"),
               expect=np.zeros((1, 2, 4), _F)),
    ]
    return out


def attention_backward_all_samples(rng):
    A = AttentionBackwardAllAttrs
    out = []
    for q, k, v, mask, h, d, mk, tags in _geometries(rng) + _edges(rng):
        if q.shape == k.shape == v.shape:
            ops = (q, k, v, _dy_for(rng, q)) + ((mask,) if mask is not None else ())
            out.append(Sample(ops, A(h, d, mk), tags=tags))
    r = lambda *s: rng.standard_normal(s).astype(_F)  # noqa: E731
    out.append(Sample((r(2, 3, 4), r(2, 3, 4), r(2, 3, 4), r(2, 3, 4),
                       np.array([[1, 0, 1], [0, 0, 0]], _F)), A(1, 4, "Custom"),
                      tags=("custom-mask", "fully-masked")))
    return out
