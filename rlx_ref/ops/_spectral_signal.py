"""Spectral family, part two: WelchPeaks and PartitionedConv (registered by ``spectral``)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..conformance.accuracy import reduction
from ..ir.dtype import DType
from ..ir.shape import Dyn, Shape
from . import _spectral_ref as R
from . import _spectral_samples as S
from .codec import USIZE, attr
from .opdef import Caps, OpDef, register, want


def _work(ctx):
    return np.float64 if ctx.float64 else np.float32


# ── WelchPeaks ───────────────────────────────────────────────────────────

@dataclass(frozen=True)
class WelchAttrs:
    k: int = attr(USIZE, doc="peaks kept per batch row")
    n_segments: int = attr(USIZE, doc="consecutive spectrum rows averaged into one PSD")


def _infer_welch(shapes, a):
    spec = shapes[0]
    want(spec.rank == 2, f"(C2) WelchPeaks spectrum must be [batch·n_segments, 2·n_fft], got "
                         f"rank {spec.rank}")
    want(a.k >= 1 and a.n_segments >= 1, f"(C3) WelchPeaks needs k >= 1 and n_segments >= 1, "
                                         f"got k={a.k}, n_segments={a.n_segments}")
    outer = spec.dims[0]
    batch = outer if isinstance(outer, Dyn) else outer // a.n_segments
    return Shape((batch, 2 * a.k), DType.F32)


def _check_welch(shapes, a, out):
    spec = shapes[0]
    want(spec.dtype is DType.F32, f"(C1) WelchPeaks spectrum must be F32, got {spec.dtype}")
    _infer_welch(shapes, a)
    outer, ext = spec.dims
    if not isinstance(ext, Dyn):
        want(ext >= 2 and ext % 2 == 0, f"(C2) WelchPeaks spectrum's last dim is 2·n_fft: "
                                         f"even and >= 2, got {ext}")
    if not isinstance(outer, Dyn):
        want(outer % a.n_segments == 0, f"(C3) WelchPeaks rows ({outer}) must be a multiple "
                                        f"of n_segments ({a.n_segments})")


def _ref_welch(ctx, spec):
    a, work = ctx.attrs, _work(ctx)
    want(spec.shape[0] % a.n_segments == 0, f"(C3) WelchPeaks rows ({spec.shape[0]}) must be "
                                            f"a multiple of n_segments ({a.n_segments})")
    psd = R.welch_psd(spec, a.n_segments, work)
    return R.top_peaks(psd, a.k, work).astype(ctx.out_np)


register(OpDef(
    kind="WelchPeaks", family="spectral", attrs=WelchAttrs, payload="struct", arity=1,
    caps=Caps.NONE, infer=_infer_welch, check=_check_welch, reference=_ref_welch,
    input_names=("spectrum",),
    doc="Top-k peaks of Welch power spectra. Each run of `n_segments` consecutive 2N-block "
        "rows is one batch row; its one-sided PSD over bins k < n_fft/2 + 1 is the mean "
        "over segments of `re² + im²`, doubled for the interior bins (not DC, not the last "
        "bin). Output `[batch, 2k]` holds `(bin, power)` pairs, largest power first, equal "
        "powers in ascending bin order; rows with fewer than k bins end in zeros.",
    constraints=("C1: spectrum is F32; the output is F32 [batch, 2·k] (bins as floats).",
                 "C2: spectrum is rank 2 [batch·n_segments, 2·n_fft], last dim even >= 2.",
                 "C3: k >= 1, n_segments >= 1, and n_segments divides the row count."),
    samples=lambda rng: S.welch_samples(rng, WelchAttrs), dtypes=(DType.F32,),
    accuracy=reduction(2, lambda a, s: a.n_segments + 4, "all",
                       reason="a mean of n_segments powers per bin; bins are exact"),
    notes="RLX's running top-k (strict `>` with a stable final sort) equals a stable "
          "descending sort, used here. It leaves output slots past n_bins unwritten when "
          "k > n_fft/2 + 1; they are zeros here. NaN powers compare as equal in RLX's "
          "partial_cmp fallback and their order is not specified here either.",
))


# ── PartitionedConv ──────────────────────────────────────────────────────

@dataclass(frozen=True)
class PartitionedConvAttrs:
    block: int = attr(USIZE, doc="partition size; the FFT size is 2·next_pow2(max(block, 1))")


def _infer_pconv(shapes, a):
    x, ir = shapes
    want(x.rank >= 1, "(C2) PartitionedConv x must have rank >= 1 ([.., L])")
    want(ir.rank == 1, f"(C2) PartitionedConv ir must be rank-1 [M], got rank {ir.rank}")
    ell, m = x.dims[-1], ir.dims[0]
    if isinstance(ell, Dyn) or isinstance(m, Dyn):
        return None
    want(ell >= 1 and m >= 1, f"(C3) PartitionedConv needs L >= 1 and M >= 1, got L={ell}, "
                              f"M={m}")
    return x.with_dim(x.rank - 1, ell + m - 1)


def _check_pconv(shapes, a, out):
    for s, n in zip(shapes, ("x", "ir")):
        want(s.dtype is DType.F32, f"(C1) PartitionedConv operand `{n}` must be F32, got "
                                   f"{s.dtype}")
    _infer_pconv(shapes, a)


def _ref_pconv(ctx, x, ir):
    want(x.shape[-1] >= 1 and ir.size >= 1, "(C3) PartitionedConv needs L >= 1 and M >= 1")
    return R.full_convolution(x, ir, ctx.out_np)


register(OpDef(
    kind="PartitionedConv", family="spectral", attrs=PartitionedConvAttrs, payload="struct",
    arity=2, caps=Caps.FUSED, infer=_infer_pconv, check=_check_pconv, reference=_ref_pconv,
    input_names=("x", "ir"),
    doc="Full linear convolution of every row of `x [.., L]` with the impulse response "
        "`ir [M]`: `y[.., n] = Σ_k ir[k]·x[.., n - k]`, output `[.., L + M - 1]` (numpy "
        "`convolve(x, ir, 'full')`). RLX evaluates it by uniform-partitioned overlap-save "
        "(`block`-sized partitions, FFT size 2·next_pow2(block)); `block` changes only the "
        "rounding, not the result.",
    constraints=("C1: x and ir are F32; the output is F32.",
                 "C2: x has rank >= 1 and ir is rank-1.",
                 "C3: L >= 1 and M >= 1."),
    samples=lambda rng: S.partitioned_conv_samples(rng, PartitionedConvAttrs),
    dtypes=(DType.F32,),
    accuracy=reduction(2, lambda a, s: s[1].dims[0] + 16, "rss",
                       reason="a sum of M products (the FFT path adds O(log block))"),
    notes="RLX's CPU expands the kind (`unfuse`) into rfft → batched complex matmul over "
          "partitions → irfft before running; the reference is the direct sum it "
          "approximates. RLX's builder needs F32 (its rfft asserts F32).",
))
