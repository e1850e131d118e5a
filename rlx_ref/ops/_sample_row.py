"""Sample's per-row algorithm (rlx-cpu ``sample_row``), step by step in f32.

Every sum is sequential in f32 (``np.cumsum``, which accumulates in order), every
product and quotient is one f32 rounding, and ``exp`` is correctly rounded (f64, rounded
once), so a kernel doing the same operations in the same order reproduces it bit for bit.
"""
from __future__ import annotations

import numpy as np

from . import _philox

F32 = np.float32
TINY = F32(np.finfo(np.float32).tiny)      # f32::MIN_POSITIVE
MIN_TEMPERATURE = F32(1e-6)


def sample_seed(seed: int) -> int:
    """The Philox seed of a Sample node: its ``seed``, or 0xDEADBEEF when that is 0."""
    return seed if seed else _philox.SAMPLE_DEFAULT_SEED


def clamp_temperature(t) -> np.float32:
    """``temperature.max(1e-6)``: Rust's f32::max returns the non-NaN operand."""
    t = F32(t)
    return MIN_TEMPERATURE if np.isnan(t) or t < MIN_TEMPERATURE else t


def exp_f32(x: np.ndarray) -> np.ndarray:
    """Correctly rounded f32 exp (RLX calls libm's ``expf``)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.exp(x.astype(np.float64)).astype(F32)


def _seq_sum(x: np.ndarray) -> np.float32:
    return np.cumsum(x, dtype=F32)[-1]


def probabilities(row: np.ndarray, top_k: int, top_p, temp: np.float32) -> np.ndarray:
    """The row's final probabilities after temperature, top-k, softmax and top-p."""
    v = row.size
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        scaled = (row.astype(F32) / temp).astype(F32)
        if 0 < top_k < v:
            if np.isnan(scaled).any():
                raise ValueError("Sample: NaN logits with top-k (RLX's sort panics on NaN)")
            cutoff = np.sort(scaled)[v - top_k]          # the k-th largest value
            scaled = np.where(scaled < cutoff, F32(-np.inf), scaled)
        finite = scaled[~np.isnan(scaled)]               # `x > max` skips NaN
        max_l = finite.max() if finite.size else F32(-np.inf)
        e = exp_f32((scaled - max_l).astype(F32))
        p = (e * (F32(1) / np.fmax(_seq_sum(e), TINY))).astype(F32)
        if F32(top_p) < F32(1):
            if np.isnan(p).any():
                raise ValueError("Sample: NaN probabilities with top-p (RLX's sort panics)")
            order = np.argsort(-p, kind="stable")        # descending, ties by lower index
            cum = np.cumsum(p[order], dtype=F32)
            hit = np.nonzero(cum >= F32(top_p))[0]
            keep = order[:hit[0] + 1] if hit.size else order
            kept = np.zeros(v, F32)
            kept[keep] = p[keep]
            p = (kept * (F32(1) / np.fmax(_seq_sum(kept), TINY))).astype(F32)
    return p


def pick(p: np.ndarray, r: np.float32) -> int:
    """Inverse CDF: the first id whose running sum is >= r; the last id if none is."""
    hit = np.nonzero(r <= np.cumsum(p, dtype=F32))[0]
    return int(hit[0]) if hit.size else p.size - 1


def sample_rows(rows: np.ndarray, top_k: int, top_p, temperature, seed: int) -> np.ndarray:
    """One f32-encoded id per row of ``rows`` [batch, vocab]; row b uses stream word b."""
    batch, vocab = rows.shape
    out = np.zeros(batch, F32)
    if vocab == 0 or batch == 0:
        return out
    draws = _philox.unit_f32(_philox.words(sample_seed(seed), batch))
    temp = clamp_temperature(temperature)
    for b in range(batch):
        out[b] = pick(probabilities(rows[b], top_k, top_p, temp), draws[b])
    return out
