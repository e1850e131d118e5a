"""Histogram family: Histogram, equal-width bucket counts over a fixed range."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..ir.dtype import DType
from ..ir.shape import Shape
from .codec import F32, USIZE, attr
from .opdef import Caps, OpDef, Sample, register, want

FLOATS = (DType.F32, DType.F64, DType.F16, DType.BF16)


@dataclass(frozen=True)
class HistogramAttrs:
    bins: int = attr(USIZE, doc="number of equal-width buckets")
    min: float = attr(F32, doc="lower edge of the first bucket")
    max: float = attr(F32, doc="upper edge of the last bucket (inclusive)")

    def __post_init__(self):
        for f in ("min", "max"):
            object.__setattr__(self, f, F32.normalize(getattr(self, f)))


def _check(shapes, a):
    x = shapes[0]
    want(x.dtype in FLOATS, f"(C1) Histogram input must be a float tensor, got {x.dtype}")
    want(a.bins >= 1, "(C2) Histogram needs at least one bin, got bins = 0")
    want(math.isfinite(a.min) and math.isfinite(a.max) and a.min < a.max,
         f"(C3) Histogram range must be finite with min < max, got [{a.min}, {a.max}]")


def _infer(shapes, a):
    _check(shapes, a)
    return Shape((a.bins,), DType.F32)


def edges(a) -> np.ndarray:
    """The bins + 1 bucket edges as RLX builds them, in f32 (returned as f64):
    `lo_b = min + b·width` with `width = (max − min)/bins`, the top edge the next f32
    above `max`."""
    f = np.float32
    width = f(f(a.max) - f(a.min)) / f(a.bins)
    lo = f(a.min) + np.arange(a.bins, dtype=f) * width
    top = np.nextafter(f(a.max), f(np.inf))
    e = np.concatenate([lo, [top]]).astype(f)
    return e.astype(np.float64)


def counts(x: np.ndarray, a) -> np.ndarray:
    """Bucket counts in f64: bucket b counts `e_b <= v < e_{b+1}` (NaN compares false)."""
    x = np.asarray(x)
    e = edges(a)
    v = x.astype(np.float64).reshape(-1)
    v = v[(v >= e[0]) & (v < e[-1])]
    b = np.searchsorted(e, v, side="right") - 1      # edges ascend: one bucket per value
    return np.bincount(b, minlength=a.bins)[:a.bins].astype(np.float64)


def _reference(ctx, x):
    return counts(x, ctx.attrs).astype(ctx.out_np)


def _samples(rng):
    x = np.float32([0.0, 0.1, 0.5, 0.99, 1.0, 2.0, -0.5, 0.25])
    # buckets of [0, 1] / 4: [0,.25) {0, .1}, [.25,.5) {.25}, [.5,.75) {.5}, [.75,1] {.99, 1}
    hand = np.float32([2, 1, 1, 2])
    specials = np.float32([np.nan, np.inf, -np.inf, 3.0, 3.0, -1.0])
    return [
        Sample((x,), HistogramAttrs(4, 0.0, 1.0), expect=hand, tags=("hand", "edges")),
        Sample((specials,), HistogramAttrs(2, -1.0, 3.0), expect=np.float32([1, 2]),
               tags=("nan", "inf", "max-inclusive")),
        Sample((rng.standard_normal((3, 5, 7)).astype(np.float32),),
               HistogramAttrs(7, -2.0, 2.0), tags=("rank-3", "prime")),
        Sample((np.float32(0.3),), HistogramAttrs(1, 0.0, 1.0), expect=np.float32([1]),
               tags=("0-d", "one-bin")),
        Sample((np.zeros((0, 4), np.float32),), HistogramAttrs(3, 0.0, 1.0),
               expect=np.zeros(3, np.float32), tags=("empty",)),
        Sample((rng.uniform(-1, 1, 64),), HistogramAttrs(5, -1.0, 1.0), tags=("f64",)),
    ]


register(OpDef(
    kind="Histogram", family="histogram", attrs=HistogramAttrs, payload="struct", arity=1,
    caps=Caps.NONE, input_names=("x",), infer=_infer,
    check=lambda s, a, o: _check(s, a), reference=_reference,
    doc="Counts the elements of `x` (any shape, read flat) into `bins` equal-width buckets "
        "over `[min, max]`: bucket `b` counts `e_b <= v < e_{b+1}` with the f32 edges "
        "`e_b = min + b·width`, `width = (max − min)/bins`, except that the top edge is the "
        "next f32 above `max`, so `v == max` lands in the last bucket (as "
        "`numpy.histogram`). Values are compared with the f32 edges exactly. Values outside "
        "the range, ±inf and NaN are dropped. The output is a 1-D f32 `[bins]` of counts "
        "(exact up to 2^24 per bucket).",
    constraints=("C1: x is a float tensor (f32, f64, f16, bf16); the output is f32 [bins].",
                 "C2: bins >= 1.",
                 "C3: min and max are finite and min < max."),
    samples=_samples, dtypes=(DType.F32, DType.F64),
    notes="RLX's doc fixes the buckets (half-open, closed at the top, as numpy.histogram) "
          "and says the CPU kernel is native and other backends lower it to Compare + "
          "Reduce Sum (`LowerHistogram`, documented to match the CPU kernel); the edges "
          "here are that lowering's, f32 arithmetic and the top edge nudged to "
          "nextafter(max), so a value on an edge goes to the bucket it opens. That lowering "
          "builds its edge constants in the input's dtype, so for f16/bf16 the top edge "
          "rounds back to max and drops `x == max`, against RLX's stated rule; here the "
          "f32 edges are compared exactly for every dtype (the rule holds). RLX accepts "
          "any payload; bins = 0 and an empty or non-finite range are verifier errors here. Non-differentiable (discrete counts), as RLX says.",
))
