"""Samples of the spectral family: small inputs, edge cases and hand-computed results."""
from __future__ import annotations

import numpy as np

from .opdef import Sample


def _f32(*xs):
    return tuple(np.asarray(v, np.float32) for v in xs)


def _c64(rng, *shape):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def fft_samples(rng, A):
    """Fft: every layout and norm, pow2 / prime / Bluestein-sized lengths, N = 1, empty."""
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    nan = _c64(rng, 2, 4)
    nan[1, 2] = complex(np.nan, np.nan)
    return [
        Sample((r(2, 16),), A(False, "Backward"), tags=("pow2",)),
        Sample((r(3, 10),), A(True, "Forward"), tags=("prime-length", "inverse")),
        Sample((_c64(rng, 2, 12),), A(False, "Ortho"), tags=("c64", "non-pow2")),
        Sample((nan,), A(True, "Backward"), tags=("c64", "inverse", "nan")),
        Sample((r(1, 2, 34),), A(False, "Ortho"), tags=("rank-3", "prime-length", "bluestein")),
        Sample((r(2),), A(True, "Ortho"), tags=("size-1",)),
        Sample((np.zeros((0, 8), np.float32),), A(False, "Forward"), tags=("empty",)),
        # re (1, 2, 3, 4), im 0: X = (10, -2+2i, -2, -2-2i), as one 2N block
        Sample(_f32([1, 2, 3, 4, 0, 0, 0, 0]), A(False, "Backward"), tags=("hand",),
               expect=np.float32([10, -2, -2, -2, 0, 2, 0, -2])),
    ]


def butterfly_samples(rng, A):
    """FftButterflyStage: every stage of n_fft 8, the flat layout, gates off, a hand case."""
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    bits = lambda n: rng.integers(0, 2, n).astype(np.float32)  # noqa: E731

    def vecs(half):
        return bits(half), bits(half), r(half), r(half)
    state = np.float32([[1, 0], [2, 0], [3, 0], [4, 0]])[None]
    return [
        Sample((r(2, 8, 2), *vecs(4)), A(0, 8), tags=("stage-0",)),
        Sample((r(1, 8, 2), *vecs(4)), A(1, 8), tags=("stage-1",)),
        Sample((r(3, 16), *vecs(4)), A(2, 8), tags=("flat-layout", "last-stage")),
        Sample((r(2, 6, 2), *vecs(3)), A(0, 6), tags=("non-pow2",)),
        Sample((r(4, 2, 2), *vecs(1)), A(0, 2), tags=("size-1",)),
        Sample((np.zeros((0, 8, 2), np.float32), *vecs(4)), A(1, 8), tags=("empty",)),
        Sample((state, np.zeros(2, np.float32), np.ones(2, np.float32), r(2), r(2)), A(0, 4),
               tags=("gate-off", "hand"), expect=state),
        # pairs (1, 2) → (3, -1); (3, 4) → (7, -1) swapped by rev = 1 → (-1, 7)
        Sample((state, *_f32([1, 1], [0, 1], [1, 1], [0, 0])), A(0, 4), tags=("hand", "rev"),
               expect=np.float32([[[3, 0], [-1, 0], [-1, 0], [7, 0]]])),
    ]


def _filters(rng, n_mels, n_bins):
    """A non-negative filterbank, as mel filterbanks are."""
    return rng.random((n_mels, n_bins)).astype(np.float32)


def _cubed(f):
    """Spread filter weights over decades (plain products: no libm call, so the inputs,
    and the case ids hashed from them, do not depend on numpy's SIMD code path)."""
    return f * f * f


def log_mel_samples(rng, backward: bool = False):
    """LogMel / LogMelBackward operands (dy appended for the backward)."""
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    wide = r(2, 16)
    wide[0, 1] = 3e3              # one loud bin: the max - 8 floor clamps quiet mels
    wide[1, :] *= 1e-4
    nan = r(2, 16)
    nan[1, 3] = np.nan
    cases = [
        ((r(3, 16), _filters(rng, 4, 5)), ()),
        ((r(2, 2, 20), _filters(rng, 3, 6)), ("rank-3",)),
        ((r(32), _filters(rng, 6, 9)), ("rank-1",)),
        ((wide, _cubed(_filters(rng, 5, 5))), ("floor", "dynamic-range")),
        ((np.zeros((0, 16), np.float32), _filters(rng, 4, 5)), ("empty",)),
        ((np.zeros((2, 8), np.float32), _filters(rng, 2, 3)), ("zeros", "clamp")),
    ]
    if not backward:
        cases.append(((nan, _filters(rng, 3, 5)), ("nan",)))
    out = []
    for ins, tags in cases:
        if backward:
            lead = ins[0].shape[:-1]
            ins = ins + (r(*lead, ins[1].shape[0]),)
        out.append(Sample(ins, None, tags=tags))
    if not backward:
        # identity filters: mel = power (1, 100) → log10 (0, 2), floor -6 → (1, 1.5)
        out.append(Sample(_f32([[1, 10, 0, 0]], [[1, 0], [0, 1]]), None, tags=("hand",),
                          expect=np.float32([[1, 1.5]])))
    return out


def welch_samples(rng, A):
    """WelchPeaks: segment averages, k past the bin count, ties, a hand case."""
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    return [
        Sample((r(4, 16),), A(2, 2), tags=("segments",)),
        Sample((r(3, 32),), A(3, 1), tags=("one-segment",)),
        Sample((r(6, 12),), A(4, 3), tags=("non-pow2", "odd")),
        Sample((r(2, 8),), A(5, 1), tags=("k>bins",)),
        Sample((np.zeros((2, 8), np.float32),), A(2, 2), tags=("ties", "hand"),
               expect=np.float32([[0, 0, 1, 0]])),
        Sample((np.zeros((0, 8), np.float32),), A(2, 1), tags=("empty",)),
        # bins: DC 1² = 1, interior 2·2² = 8, Nyquist 3² = 9 → (2, 9), (1, 8)
        Sample(_f32([[1, 2, 3, 0, 0, 0, 0, 0]]), A(2, 1), tags=("hand",),
               expect=np.float32([[2, 9, 1, 8]])),
    ]


def partitioned_conv_samples(rng, A):
    """PartitionedConv: long and short responses, M > L, size 1, empty, NaN, a hand case."""
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    x = r(2, 9)
    x[1, 4] = np.nan
    return [
        Sample((r(2, 10), r(4)), A(4), tags=("rank-2",)),
        Sample((r(13), r(7)), A(3), tags=("prime-length", "rank-1")),
        Sample((r(2, 1, 5), r(9)), A(8), tags=("rank-3", "ir-longer")),
        Sample((r(1), r(1)), A(1), tags=("size-1",)),
        Sample((np.zeros((0, 5), np.float32), r(3)), A(2), tags=("empty",)),
        Sample((x, r(3)), A(2), tags=("nan",)),
        # (1, 2, 3) * (1, -1) = (1, 2 - 1, 3 - 2, -3)
        Sample(_f32([1, 2, 3], [1, -1]), A(0), tags=("hand", "block-0"),
               expect=np.float32([1, 1, 1, -3])),
    ]
