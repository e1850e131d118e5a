"""KV-cache family: KvAppend, RLX's single-row cache write for autoregressive decode.

RLX's native kernels write the row into the cache buffer and return a view of its prefix;
its portable lowering (``LowerKvAppend``) is `concat([narrow(cache, axis, 0, pos), row])`.
An IR value has no identity beyond its contents, so the oracle is that lowering: the
result is a fresh `[..pos+1..]` tensor and the cache operand is left as it was.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.dtype import DType
from ..ir.shape import Dyn
from .codec import USIZE, attr
from .opdef import Caps, OpDef, Sample, register, want


@dataclass(frozen=True)
class KvAppendAttrs:
    axis: int = attr(USIZE, doc="the sequence axis the row is written along")
    pos: int = attr(USIZE, doc="the index on `axis` the row is written at")


def _static(d) -> bool:
    return not isinstance(d, Dyn)


def _infer(shapes, a):
    cache, row = shapes
    want(a.axis < cache.rank, f"(C1) KvAppend axis {a.axis} is out of range for a "
                              f"rank-{cache.rank} cache")
    want(row.rank == cache.rank, f"(C2) KvAppend row rank {row.rank} must equal the cache "
                                 f"rank {cache.rank} (the row is a one-step slice, not a "
                                 "squeezed vector)")
    want(row.dtype == cache.dtype, f"(C3) KvAppend row dtype {row.dtype} must equal the "
                                   f"cache dtype {cache.dtype} (the write is a raw copy)")
    cap = cache.dims[a.axis]
    want(not _static(cap) or a.pos < cap,
         f"(C4) KvAppend pos {a.pos} is past the cache's axis-{a.axis} capacity {cap} (size "
         "the cache to the capacity it grows to)")
    n = row.dims[a.axis]
    want(not _static(n) or n == 1, f"(C5) KvAppend row extent on axis {a.axis} is {n}, "
                                   "must be 1 (one step)")
    for i, (c, r) in enumerate(zip(cache.dims, row.dims)):
        want(i == a.axis or not (_static(c) and _static(r)) or c == r,
             f"(C5) KvAppend row dim {i} is {r} but the cache's is {c}; every axis but "
             f"{a.axis} must match")
    return cache.with_dim(a.axis, a.pos + 1)


def _reference(ctx, cache, row):
    a = ctx.attrs
    past = np.take(cache, np.arange(a.pos), axis=a.axis)
    return np.concatenate([past, row], axis=a.axis).astype(ctx.out_np)


def _samples(rng):
    cache = np.arange(2 * 5 * 3, dtype=np.float32).reshape(2, 5, 3)
    row = np.full((2, 1, 3), -1.0, np.float32)
    hand = np.concatenate([cache[:, :2], row], axis=1)       # rows 0, 1, then the new one
    heads = rng.standard_normal((1, 2, 7, 4)).astype(np.float32)
    return [
        Sample((cache, row), KvAppendAttrs(1, 2), expect=hand, tags=("hand",)),
        Sample((cache, row), KvAppendAttrs(1, 0), expect=row, tags=("pos-0",)),
        Sample((cache, row), KvAppendAttrs(1, 4), tags=("full-capacity", "batch>1")),
        Sample((heads, rng.standard_normal((1, 2, 1, 4)).astype(np.float32)),
               KvAppendAttrs(2, 6), tags=("[B,H,S,D]", "prime-length")),
        Sample((np.arange(4, dtype=np.float32), np.float32([9])), KvAppendAttrs(0, 3),
               expect=np.float32([0, 1, 2, 9]), tags=("rank-1",)),
        Sample((np.zeros((3, 0), np.float32), np.zeros((1, 0), np.float32)),
               KvAppendAttrs(0, 1), tags=("empty",)),
        Sample((np.arange(6, dtype=np.int32).reshape(3, 2), np.int32([[7, 8]])),
               KvAppendAttrs(0, 1), expect=np.int32([[0, 1], [7, 8]]), tags=("int",)),
    ]


register(OpDef(
    kind="KvAppend", family="kv_cache", attrs=KvAppendAttrs, payload="struct", arity=2,
    caps=Caps.NONE, input_names=("cache", "row"), infer=_infer,
    check=lambda s, a, o: _infer(s, a), reference=_reference,
    doc="Writes `row` into `cache` at index `pos` of `axis` and returns the written prefix: "
        "`concat([cache[.., 0:pos, ..], row], axis)`, of cache's shape with `axis` cut to "
        "`pos + 1`. Cache rows at `pos` and after are never read; `pos = 0` gives the row "
        "itself. The write is a raw copy, so any dtype is allowed.",
    constraints=("C1: axis < cache rank.",
                 "C2: row has the cache's rank.",
                 "C3: row has the cache's dtype; the output too.",
                 "C4: pos < the cache's extent on axis (its capacity).",
                 "C5: row's extent on axis is 1 and every other axis equals the cache's."),
    samples=_samples, dtypes=(DType.F32, DType.F64, DType.F16),
    notes="RLX's native kernels alias the output to the cache buffer (the row is written in "
          "place); an IR value here has no buffer identity, so the result is RLX's own "
          "portable lowering (`LowerKvAppend`: narrow + concat), which RLX also applies on "
          "every backend when the prefix is not contiguous (a leading axis > 1). RLX's CPU "
          "thunk comment says the output has the cache's shape; its shape rule "
          "(`kv_append_shape`), verifier and lowering all give `pos + 1` on `axis`, which "
          "is followed here.",
))
