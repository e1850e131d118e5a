"""Numba source of the spectral and complex kinds, and the FFT plans they read.

The FFT works in f64 on split (re, im) rows for every layout: powers of two by an
iterative radix-2 decimation-in-time (rows read through a bit-reversal table, then log2 N
butterfly passes, each reading its own contiguous twiddle table, the passes up to 16384
points block by block in L2), other lengths by Bluestein's chirp-z (a power-of-two
circular convolution of length M >= 2N - 1); rows in prange when large. Plans (twiddles,
chirp, the chirp filter's spectrum) are host constants computed once per lowering in f64
with exact ``k² mod 2N`` phases.
"""
from __future__ import annotations

import math

import numpy as np

SOURCE = '''
_KJ = dict(cache=True, error_model="numpy", nogil=True)
BLOCK = 16384


@njit(**_KJ)
def _stage(re, im, tw_re, tw_im, lo, hi, length):
    # the butterflies of one DIT pass over [lo, hi); W_length^k sits at tw[half + k]
    half = length // 2
    for start in range(lo, hi, length):
        for k in range(half):
            wr = tw_re[half + k]
            wi = tw_im[half + k]
            a = start + k
            b = a + half
            tr = wr * re[b] - wi * im[b]
            ti = wr * im[b] + wi * re[b]
            re[b] = re[a] - tr
            im[b] = im[a] - ti
            re[a] = re[a] + tr
            im[a] = im[a] + ti


@njit(**_KJ)
def _stage_pair(re, im, tw_re, tw_im, lo, hi, length):
    # the passes of ``length`` and ``2·length`` in one sweep: each quad (p0, p1, p2, p3)
    # takes pass one's butterflies (p0, p1), (p2, p3) then pass two's (p0, p2), (p1, p3),
    # the same operations on the same operands as two sweeps, with half the traffic
    half = length // 2
    for start in range(lo, hi, 2 * length):
        for k in range(half):
            w1r = tw_re[half + k]
            w1i = tw_im[half + k]
            w2r = tw_re[length + k]
            w2i = tw_im[length + k]
            w3r = tw_re[length + half + k]
            w3i = tw_im[length + half + k]
            p0 = start + k
            p1 = p0 + half
            p2 = p0 + length
            p3 = p2 + half
            tr = w1r * re[p1] - w1i * im[p1]
            ti = w1r * im[p1] + w1i * re[p1]
            a1r = re[p0] - tr
            a1i = im[p0] - ti
            a0r = re[p0] + tr
            a0i = im[p0] + ti
            tr = w1r * re[p3] - w1i * im[p3]
            ti = w1r * im[p3] + w1i * re[p3]
            a3r = re[p2] - tr
            a3i = im[p2] - ti
            a2r = re[p2] + tr
            a2i = im[p2] + ti
            tr = w2r * a2r - w2i * a2i
            ti = w2r * a2i + w2i * a2r
            re[p2] = a0r - tr
            im[p2] = a0i - ti
            re[p0] = a0r + tr
            im[p0] = a0i + ti
            tr = w3r * a3r - w3i * a3i
            ti = w3r * a3i + w3i * a3r
            re[p3] = a1r - tr
            im[p3] = a1i - ti
            re[p1] = a1r + tr
            im[p1] = a1i + ti


@njit(**_KJ)
def _sweep(re, im, tw_re, tw_im, lo, hi, length, last):
    # the passes length, 2·length, ..., last over [lo, hi), two per sweep
    while length <= last:
        if 2 * length <= last:
            _stage_pair(re, im, tw_re, tw_im, lo, hi, length)
            length *= 4
        else:
            _stage(re, im, tw_re, tw_im, lo, hi, length)
            length *= 2


@njit(**_KJ)
def _passes(re, im, tw_re, tw_im):
    # every DIT pass on bit-reversed rows; the passes up to BLOCK points run block by block
    # while the block is in cache (a pass only mixes points within its length, so each
    # butterfly sees the same operands as pass-by-pass)
    n = re.size
    blk = min(n, BLOCK)
    for lo in range(0, n, blk):
        _sweep(re, im, tw_re, tw_im, lo, lo + blk, 2, blk)
    _sweep(re, im, tw_re, tw_im, 0, n, 2 * blk, n)


@njit(**_KJ)
def _tiles(n):
    # (t, m) with n = 2^(2t + m): the bit-reversed gather walks 2^t × 2^t tiles, so both its
    # reads and writes stay within 2^t runs of 2^t neighbours (one long run per row below
    # 2^12 points, where the row is in cache anyway)
    lg = 0
    while (1 << lg) < n:
        lg += 1
    t = 5 if lg >= 12 else 0
    return t, lg - 2 * t


@njit(**_KJ)
def _radix2(re, im, tw_re, tw_im, rev):
    for i in range(re.size):
        j = rev[i]
        if i < j:
            re[i], re[j] = re[j], re[i]
            im[i], im[j] = im[j], im[i]
    _passes(re, im, tw_re, tw_im)


@njit(**_KJ)
def _transform(re, im, plan_tw, chirp, bf, ar, ai, rev):
    """One row in place by Bluestein (powers of two are read in bit-reversed order and
    go straight to ``_passes``)."""
    n = re.size
    m = ar.size
    for k in range(m):
        ar[k] = 0.0
        ai[k] = 0.0
    for k in range(n):
        ar[k] = re[k] * chirp[0, k] - im[k] * chirp[1, k]
        ai[k] = re[k] * chirp[1, k] + im[k] * chirp[0, k]
    _radix2(ar, ai, plan_tw[0], plan_tw[1], rev)
    for k in range(m):
        xr = ar[k] * bf[0, k] - ai[k] * bf[1, k]
        xi = ar[k] * bf[1, k] + ai[k] * bf[0, k]
        ar[k] = xr
        ai[k] = -xi           # conj: the inverse transform as a forward one
    _radix2(ar, ai, plan_tw[0], plan_tw[1], rev)
    for k in range(n):
        yr = ar[k] / m
        yi = -ai[k] / m
        re[k] = yr * chirp[0, k] - yi * chirp[1, k]
        im[k] = yr * chirp[1, k] + yi * chirp[0, k]


@njit(**_KJ)
def fft_block(x, out, n, scale, plan_tw, chirp, bf, rev, r0, r1):
    """2N real-block rows [r0, r1) of [outer, 2n] (f32 or f64) → the same layout."""
    re = np.empty(n)
    im = np.empty(n)
    ar = np.empty(bf.shape[1])
    ai = np.empty(bf.shape[1])
    pow2 = chirp.shape[1] == 0
    for r in range(r0, r1):
        if pow2:
            tb, mb = _tiles(n)
            for m in range(1 << mb):
                for h in range(1 << tb):
                    base = (h << (mb + tb)) | (m << tb)
                    for k in range(base, base + (1 << tb)):
                        j = rev[k]
                        re[k] = x[r, j]
                        im[k] = x[r, n + j]
            _passes(re, im, plan_tw[0], plan_tw[1])
        else:
            for k in range(n):
                re[k] = x[r, k]
                im[k] = x[r, n + k]
            _transform(re, im, plan_tw, chirp, bf, ar, ai, rev)
        for k in range(n):
            out[r, k] = re[k] * scale
            out[r, n + k] = im[k] * scale


@njit(**_KJ)
def fft_c64(x, out, n, scale, plan_tw, chirp, bf, rev, r0, r1):
    """Interleaved complex rows [r0, r1) of [outer, n] → the same layout."""
    re = np.empty(n)
    im = np.empty(n)
    ar = np.empty(bf.shape[1])
    ai = np.empty(bf.shape[1])
    pow2 = chirp.shape[1] == 0
    for r in range(r0, r1):
        if pow2:
            tb, mb = _tiles(n)
            for m in range(1 << mb):
                for h in range(1 << tb):
                    base = (h << (mb + tb)) | (m << tb)
                    for k in range(base, base + (1 << tb)):
                        j = rev[k]
                        re[k] = x[r, j].real
                        im[k] = x[r, j].imag
            _passes(re, im, plan_tw[0], plan_tw[1])
        else:
            for k in range(n):
                re[k] = x[r, k].real
                im[k] = x[r, k].imag
            _transform(re, im, plan_tw, chirp, bf, ar, ai, rev)
        for k in range(n):
            out[r, k] = complex(re[k] * scale, im[k] * scale)


@njit(parallel=True, **_KJ)
def fft_block_par(x, out, n, scale, plan_tw, chirp, bf, rev, nch):
    """fft_block with the rows split into ``nch`` contiguous chunks, one per thread."""
    step = (x.shape[0] + nch - 1) // nch
    for c in prange(nch):
        r0 = min(x.shape[0], c * step)
        fft_block(x, out, n, scale, plan_tw, chirp, bf, rev, r0, min(x.shape[0], r0 + step))


@njit(parallel=True, **_KJ)
def fft_c64_par(x, out, n, scale, plan_tw, chirp, bf, rev, nch):
    """fft_c64 with the rows split into ``nch`` contiguous chunks, one per thread."""
    step = (x.shape[0] + nch - 1) // nch
    for c in prange(nch):
        r0 = min(x.shape[0], c * step)
        fft_c64(x, out, n, scale, plan_tw, chirp, bf, rev, r0, min(x.shape[0], r0 + step))


@njit(**_KJ)
def butterfly_stage(st, gate, rev, tw_re, tw_im, out, n_fft, stage):
    """RLX's ternary radix-2 stage on [batch, 2·n_fft] interleaved rows, in f32 as RLX."""
    half = n_fft // 2
    stride = 1 << stage
    for b in range(st.shape[0]):
        for i in range(2 * n_fft):
            out[b, i] = st[b, i]
        for f in range(half):
            if gate[f] == 0:
                continue
            i0 = (f // stride) * 2 * stride + f % stride
            i1 = i0 + stride
            wr = tw_re[f]
            wi = tw_im[f]
            br = st[b, 2 * i1]
            bi = st[b, 2 * i1 + 1]
            tr = br * wr - bi * wi
            ti = br * wi + bi * wr
            ar = st[b, 2 * i0]
            ai = st[b, 2 * i0 + 1]
            if rev[f] >= 0.5:
                out[b, 2 * i0] = ar - tr
                out[b, 2 * i0 + 1] = ai - ti
                out[b, 2 * i1] = ar + tr
                out[b, 2 * i1 + 1] = ai + ti
            else:
                out[b, 2 * i0] = ar + tr
                out[b, 2 * i0 + 1] = ai + ti
                out[b, 2 * i1] = ar - tr
                out[b, 2 * i1 + 1] = ai - ti


@njit(**_KJ)
def log_mel(spec, filt, out, n_fft, n_bins, mel_floor):
    """Whisper log-mel per frame; energies in f64, NaN energy clamped as RLX's f32::max."""
    n_mels = filt.shape[0]
    power = np.empty(n_bins)
    raw = np.empty(n_mels)
    for r in range(spec.shape[0]):
        for k in range(n_bins):
            re = np.float64(spec[r, k])
            im = np.float64(spec[r, n_fft + k])
            power[k] = re * re + im * im
        top = -np.inf
        for m in range(n_mels):
            acc = 0.0
            for k in range(n_bins):
                acc += np.float64(filt[m, k]) * power[k]
            if not acc > mel_floor:
                acc = mel_floor
            v = math.log10(acc)
            raw[m] = v
            if v > top:
                top = v
        floor = top - 8.0
        for m in range(n_mels):
            v = raw[m] if raw[m] > floor else floor
            out[r, m] = (v + 4.0) / 4.0


@njit(**_KJ)
def log_mel_backward(spec, filt, dy, out, n_fft, n_bins, mel_floor, ln10):
    """RLX's log_mel_vjp_frame per row, in f64."""
    n_mels = filt.shape[0]
    power = np.empty(n_bins)
    d_pow = np.empty(n_bins)
    energy = np.empty(n_mels)
    raw = np.empty(n_mels)
    for r in range(spec.shape[0]):
        for k in range(n_bins):
            re = np.float64(spec[r, k])
            im = np.float64(spec[r, n_fft + k])
            power[k] = re * re + im * im
            d_pow[k] = 0.0
        top = -np.inf
        for m in range(n_mels):
            acc = 0.0
            for k in range(n_bins):
                acc += np.float64(filt[m, k]) * power[k]
            energy[m] = acc
            raw[m] = math.log10(acc if acc > mel_floor else mel_floor)
            if raw[m] > top:
                top = raw[m]
        floor = top - 8.0
        for m in range(n_mels):
            c = raw[m] if raw[m] > floor else floor
            d_mel = 0.0 if abs(c - floor) <= 1e-6 else np.float64(dy[r, m]) * 0.25
            if energy[m] <= mel_floor:        # NaN energy stays live, as RLX
                continue
            d_log = d_mel / (energy[m] * ln10)
            for k in range(n_bins):
                d_pow[k] += d_log * np.float64(filt[m, k])
        for i in range(2 * n_fft):
            out[r, i] = 0.0
        for k in range(n_bins):
            out[r, k] = d_pow[k] * 2.0 * np.float64(spec[r, k])
            out[r, n_fft + k] = d_pow[k] * 2.0 * np.float64(spec[r, n_fft + k])


@njit(**_KJ)
def welch_peaks(spec, out, n_fft, n_seg, k):
    """Segment-averaged one-sided PSD (f64), then the k largest, ties to the lower bin."""
    n_bins = n_fft // 2 + 1
    psd = np.empty(n_bins)
    used = np.empty(n_bins, np.bool_)
    inv = 1.0 / n_seg
    for b in range(spec.shape[0] // n_seg):
        for j in range(n_bins):
            psd[j] = 0.0
            used[j] = False
        for s in range(n_seg):
            row = b * n_seg + s
            for j in range(n_bins):
                re = np.float64(spec[row, j])
                im = np.float64(spec[row, n_fft + j])
                p = re * re + im * im
                if 0 < j < n_bins - 1:
                    p *= 2.0
                psd[j] += p * inv
        for i in range(2 * k):
            out[b, i] = 0.0
        for i in range(min(k, n_bins)):
            best = -1
            for j in range(n_bins):
                if used[j]:
                    continue
                if best < 0 or psd[j] > psd[best] or (psd[best] != psd[best]
                                                        and psd[j] == psd[j]):
                    best = j
            used[best] = True
            out[b, 2 * i] = best
            out[b, 2 * i + 1] = psd[best]


@njit(**_KJ)
def conv_full(x, h, out):
    """Direct full convolution of rows [rows, L] with h [M], summed in f64."""
    ell = x.shape[1]
    m = h.size
    for r in range(x.shape[0]):
        for i in range(ell + m - 1):
            acc = 0.0
            for k in range(max(0, i - ell + 1), min(m - 1, i) + 1):
                acc += np.float64(h[k]) * np.float64(x[r, i - k])
            out[r, i] = acc


@njit(**_KJ)
def complex_norm_sq(z, out):
    for i in range(z.size):
        out[i] = z[i].real * z[i].real + z[i].imag * z[i].imag


@njit(**_KJ)
def conjugate(z, out):
    for i in range(z.size):
        out[i] = complex(z[i].real, -z[i].imag)


@njit(**_KJ)
def complex_norm_sq_backward(z, g, out):
    for i in range(z.size):
        out[i] = complex(g[i] * z[i].real, g[i] * z[i].imag)
'''


def source():
    """(kernel name, source) for ``compile_kernel``."""
    return "fft_block", SOURCE


def _twiddles(n: int, sign: float) -> np.ndarray:
    """[2, n/2]: exp(sign·2πi·k/n), k < n/2 (direct cos/sin, no recurrence drift)."""
    k = np.arange(max(n // 2, 0))
    ang = sign * 2.0 * math.pi * k / max(n, 1)
    return np.ascontiguousarray(np.stack([np.cos(ang), np.sin(ang)]))


def stage_twiddles(tw: np.ndarray) -> np.ndarray:
    """[2, n/2] twiddles of an n-point transform → [2, max(n, 1)] with every pass's table
    contiguous: W_L^k (the same values, tw[k·n/L]) at [L/2 + k] for L = 2, 4, ..., n."""
    half_n = tw.shape[1]
    out = np.zeros((2, max(2 * half_n, 1)))
    half = 1
    while half <= half_n:
        out[:, half:2 * half] = tw[:, ::half_n // half][:, :half]
        half *= 2
    return out


def bit_reversal(m: int) -> np.ndarray:
    """The bit-reversal permutation of a power of two ``m`` (int32 while it fits): a row
    gathered through it replaces the in-place swap loop (4x faster at 2^20 points)."""
    idx = np.arange(max(m, 1), dtype=np.int64)
    rev = np.zeros_like(idx)
    bits = max(m, 1).bit_length() - 1
    for b in range(bits):
        rev |= ((idx >> b) & 1) << (bits - 1 - b)
    return rev.astype(np.int32) if m < 2 ** 31 else rev


def fft_plan(n: int, inverse: bool):
    """(twiddles, chirp, chirp filter spectrum) for an N-point row transform."""
    sign = 1.0 if inverse else -1.0
    empty = np.zeros((2, 0))
    if n & (n - 1) == 0:                      # 1 and the powers of two
        return _twiddles(n, sign), empty, empty
    m = 1 << (2 * n - 2).bit_length()         # next power of two >= 2n - 1
    k = np.arange(n, dtype=np.int64)
    ang = sign * math.pi * ((k * k) % (2 * n)) / n   # k² mod 2N keeps the phase exact
    chirp = np.stack([np.cos(ang), np.sin(ang)])
    b = np.zeros(m, np.complex128)
    b[:n] = chirp[0] - 1j * chirp[1]
    b[m - n + 1:] = b[1:n][::-1]
    spec = np.fft.fft(b)
    bf = np.ascontiguousarray(np.stack([spec.real, spec.imag]))
    return _twiddles(m, -1.0), np.ascontiguousarray(chirp), bf
