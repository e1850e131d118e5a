"""Readable numpy references of the spectral family (RLX's ``fft.rs`` and ``audio.rs``).

Layouts. An F32/F64 spectrum row is RLX's "2N real block": the last axis holds
``[re_0 .. re_{N-1}, im_0 .. im_{N-1}]``; a C64 row is N interleaved ``(re, im)`` pairs
(numpy's complex64). ``to_complex`` / ``from_complex`` convert between a layout and
complex rows ``[outer, N]``.
"""
from __future__ import annotations

import math

import numpy as np

NORMS = ("Backward", "Forward", "Ortho")
MEL_FLOOR = np.float32(1e-10)     # RLX clamps mel energy at this f32 literal before log10
LN10 = np.float32(math.log(10.0))


def output_scale(norm: str, n: int, inverse: bool) -> float:
    """RLX's ``FftNorm::output_scale``: the factor applied after the transform."""
    if norm == "Forward":
        return 1.0 / n if inverse else 1.0
    if norm == "Ortho":
        return 1.0 / math.sqrt(n)
    return 1.0


def to_complex(x: np.ndarray) -> np.ndarray:
    """Rows ``[outer, N]`` of complex128 from either layout (2N block or C64)."""
    x = np.asarray(x)
    if x.dtype.kind == "c":
        return x.reshape(-1, x.shape[-1]).astype(np.complex128)
    n = x.shape[-1] // 2
    rows = x.reshape(-1, 2 * n).astype(np.float64)
    return rows[:, :n] + 1j * rows[:, n:]


def from_complex(z: np.ndarray, shape, np_dtype) -> np.ndarray:
    """Complex rows back into ``shape`` in the layout of ``np_dtype``."""
    if np.dtype(np_dtype).kind == "c":
        return z.astype(np_dtype).reshape(shape)
    return np.concatenate([z.real, z.imag], axis=1).astype(np_dtype).reshape(shape)


def dft(z: np.ndarray, inverse: bool, norm: str) -> np.ndarray:
    """Unnormalized DFT of each row (sign -1 forward, +1 inverse) times RLX's norm scale.

    The inverse is ``conj(fft(conj(z)))``: numpy's ``ifft`` would divide by N first.
    """
    n = z.shape[-1]
    with np.errstate(all="ignore"):
        y = np.conj(np.fft.fft(np.conj(z), axis=-1)) if inverse else np.fft.fft(z, axis=-1)
        return y * output_scale(norm, n, inverse)


def butterfly_stage(state, gate, rev, tw_re, tw_im, stage: int, n_fft: int, work):
    """RLX's ternary radix-2 butterfly stage on ``[batch, n_fft, 2]`` interleaved rows."""
    s = np.asarray(state).astype(work).reshape(-1, n_fft, 2)
    gate, rev, tw_re, tw_im = (np.asarray(v).astype(work).reshape(-1)
                               for v in (gate, rev, tw_re, tw_im))
    out = s.copy()
    stride = 1 << stage
    bf = np.arange(n_fft // 2)
    i0 = (bf // stride) * 2 * stride + bf % stride
    i1 = i0 + stride
    on = gate != 0                       # gate 0: the pair passes through untouched
    i0, i1, swap = i0[on], i1[on], rev[on] >= 0.5
    w_re, w_im = tw_re[on], tw_im[on]
    a_re, a_im, b_re, b_im = s[:, i0, 0], s[:, i0, 1], s[:, i1, 0], s[:, i1, 1]
    with np.errstate(all="ignore"):
        t_re = b_re * w_re - b_im * w_im
        t_im = b_re * w_im + b_im * w_re
        top = (a_re + t_re, a_im + t_im)
        bot = (a_re - t_re, a_im - t_im)
    out[:, i0, 0] = np.where(swap, bot[0], top[0])
    out[:, i0, 1] = np.where(swap, bot[1], top[1])
    out[:, i1, 0] = np.where(swap, top[0], bot[0])
    out[:, i1, 1] = np.where(swap, top[1], bot[1])
    return out


def one_sided_power(spec: np.ndarray, n_fft: int, work) -> np.ndarray:
    """``re² + im²`` of the first ``n_fft/2 + 1`` bins of 2N-block rows ``[outer, 2n]``."""
    n_bins = n_fft // 2 + 1
    re = spec[:, :n_bins].astype(work)
    im = spec[:, n_fft:n_fft + n_bins].astype(work)
    return re * re + im * im


def log_mel_rows(spec, filters, work):
    """Whisper compression per frame: ``(max(log10(max(mel, 1e-10)), max - 8) + 4) / 4``.

    Returns (output, mel energy, log10 before the floor, per-row floor). NaN energy
    clamps to 1e-10 (RLX's ``f32::max`` drops NaN); the floor is per frame, as RLX.
    """
    n_fft = spec.shape[1] // 2
    with np.errstate(all="ignore"):
        power = one_sided_power(spec, n_fft, work)
        energy = power @ np.asarray(filters, work).T
        raw = np.log10(np.fmax(energy, work(MEL_FLOOR)))
        floor = (raw.max(axis=1, initial=-np.inf) - work(8))[:, None]
        out = (np.maximum(raw, floor) + work(4)) / work(4)
    return out, energy, raw, floor


def log_mel_vjp_rows(spec, filters, dy, work):
    """RLX's ``log_mel_vjp_frame`` for every row: gradient w.r.t. the 2N-block spectrum."""
    n_fft = spec.shape[1] // 2
    n_bins = n_fft // 2 + 1
    f = np.asarray(filters, work)
    _, energy, raw, floor = log_mel_rows(spec, f, work)
    with np.errstate(all="ignore"):
        clamped = np.maximum(raw, floor)
        # a mel at (or clamped to) the floor gets no gradient; the floor's own
        # dependence on the row maximum is ignored, as RLX does
        d_mel = np.where(np.abs(clamped - floor) <= work(1e-6), work(0),
                         np.asarray(dy, work) * work(0.25))
        live = ~(energy <= work(MEL_FLOOR))          # NaN energy stays live, as RLX
        d_log = np.where(live, d_mel / (energy * work(LN10)), work(0))
        d_power = d_log @ f                           # [outer, n_bins]
        d = np.zeros(spec.shape, work)
        d[:, :n_bins] = d_power * work(2) * spec[:, :n_bins].astype(work)
        d[:, n_fft:n_fft + n_bins] = d_power * work(2) * spec[:, n_fft:n_fft + n_bins]
    return d


def welch_psd(spec, n_segments: int, work) -> np.ndarray:
    """Segment-averaged one-sided PSD ``[batch, n_bins]`` (interior bins doubled)."""
    n_fft = spec.shape[1] // 2
    n_bins = n_fft // 2 + 1
    with np.errstate(all="ignore"):
        p = one_sided_power(spec, n_fft, work)
        if n_bins > 2:
            p[:, 1:n_bins - 1] *= work(2)
        p = p * work(1.0 / n_segments)
        return p.reshape(-1, n_segments, n_bins).sum(axis=1)


def top_peaks(psd: np.ndarray, k: int, work) -> np.ndarray:
    """``[batch, 2k]`` of (bin, power), largest power first, ties to the lower bin.

    RLX keeps a running top-k with strict comparisons and a stable final sort, which is
    this stable descending order. Fewer than k bins leave the tail zero.
    """
    out = np.zeros((psd.shape[0], 2 * k), work)
    take = min(k, psd.shape[1])
    order = np.argsort(-psd, axis=1, kind="stable")[:, :take]
    out[:, 0:2 * take:2] = order
    out[:, 1:2 * take:2] = np.take_along_axis(psd, order, axis=1)
    return out


def full_convolution(x: np.ndarray, ir: np.ndarray, work) -> np.ndarray:
    """``y[.., n] = Σ_k ir[k]·x[.., n-k]`` along the last axis, length ``L + M - 1``."""
    rows = np.asarray(x, np.float64).reshape(-1, x.shape[-1])
    h = np.asarray(ir, np.float64)
    with np.errstate(all="ignore"):
        y = np.stack([np.convolve(r, h) for r in rows]) if rows.shape[0] else \
            np.zeros((0, x.shape[-1] + h.size - 1))
    return y.reshape(x.shape[:-1] + (x.shape[-1] + h.size - 1,)).astype(work)
