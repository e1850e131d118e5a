"""Samples of the random family: RngNormal, RngUniform and Sample."""
from __future__ import annotations

import numpy as np

from ..ir.dtype import DType
from ..ir.shape import Shape
from .opdef import Sample

KEY = 0x5EED1234ABCD0001         # the key RLX's RNG parity tests use


def _out(*dims) -> Shape:
    return Shape(dims, DType.F32)


def rng_samples(kind: str, attrs_cls):
    """Shapes, the template input, a degenerate range and empties."""
    normal = kind == "RngNormal"

    def a(p, q, key=KEY, op_seed=None):
        return attrs_cls(p, q, key, op_seed)

    def samples(rng):
        tmpl = rng.standard_normal(5).astype(np.float32)
        flat = a(0.0, 1.0)
        const = a(2.5, 0.0) if normal else a(-1.5, -1.5)
        return [
            Sample((), flat, out=_out(2, 3), tags=("no-input",)),
            Sample((tmpl,), a(1.0, 0.5) if normal else a(-1.0, 3.0), out=_out(5),
                   tags=("template",)),
            Sample((), a(0.0, 1.0, key=0), out=_out(3, 7, 2), tags=("key-0", "prime-length")),
            Sample((), a(-3.0, 2.0, key=2**64 - 1, op_seed=7.0), out=_out(9),
                   tags=("key-max", "op_seed")),
            Sample((), const, out=_out(4), tags=("degenerate", "hand"),
                   expect=np.full(4, 2.5 if normal else -1.5, np.float32)),
            Sample((), flat, out=_out(), tags=("0-d",)),
            Sample((), flat, out=_out(0, 3), tags=("empty",),
                   expect=np.zeros((0, 3), np.float32)),
        ]
    return samples


def sample_samples(attrs_cls):
    """Filters on and off, their edges, temperature 0, seed 0, batch shapes."""
    def s(logits, k=0, p=1.0, t=1.0, seed=1234, **kw):
        x = np.asarray(logits, np.float32)
        batch = x.shape[0] if x.ndim == 2 else 1
        return Sample((x,), attrs_cls(k, p, t, seed), out=_out(batch), **kw)

    def samples(rng):
        x = rng.standard_normal((4, 11)).astype(np.float32) * np.float32(2)
        peaked = [[0.1, 2.0, 0.3, -1.0], [5.0, 4.0, 4.5, -9.0]]
        return [
            s(x, tags=("plain", "prime-length")),
            s(x, k=3, p=0.8, t=0.7, tags=("top-k", "top-p")),
            s(peaked, k=1, tags=("k=1", "hand"), expect=np.array([1, 0], np.float32)),
            s(peaked, t=0.0, seed=99, tags=("temperature-0", "hand"),
              expect=np.array([1, 0], np.float32)),
            s(peaked, p=0.0, tags=("p=0", "hand"), expect=np.array([1, 0], np.float32)),
            s(x[:2], k=20, p=1.5, t=3.0, seed=0, tags=("k>vocab", "p>1", "seed-0")),
            s([7.0], tags=("vocab-1", "rank-1", "hand"), expect=np.zeros(1, np.float32)),
            s(np.zeros((0, 6), np.float32), k=2, tags=("empty",)),
        ]
    return samples
