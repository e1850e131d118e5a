"""FFT and signal family: Fft, FftButterflyStage, LogMel, LogMelBackward, WelchPeaks and
PartitionedConv (RLX's ``fft.rs``, ``audio.rs`` and the rlx-cpu signal thunks).

Spectra use RLX's layouts (``_spectral_ref``): the 2N real block for F32/F64 and
interleaved pairs for C64. The audio kinds read F32 2N-block spectra.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..conformance.accuracy import reduction
from ..ir.dtype import DType
from ..ir.shape import Dyn, Shape
from . import _spectral_ref as R
from . import _spectral_samples as S
from .codec import BOOL, U32, USIZE, Enum, attr
from .opdef import Caps, OpDef, register, want

FFT_DTYPES = (DType.F32, DType.F64, DType.C64)
F32_ONLY = (DType.F32,)


def _static(d) -> bool:
    return not isinstance(d, Dyn)


def _f32_operands(shapes, kind: str, names) -> None:
    for s, n in zip(shapes, names):
        want(s.dtype is DType.F32, f"(C1) {kind} operand `{n}` must be F32, got {s.dtype}")


def _last(s: Shape):
    return s.dims[-1] if s.rank else None


def _rows(x: np.ndarray) -> np.ndarray:
    return x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1)


def _work(ctx):
    return np.float64 if ctx.float64 else np.float32


# ── Fft ──────────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class FftAttrs:
    inverse: bool = attr(BOOL, doc="false: exp(-2πi·nk/N); true: exp(+2πi·nk/N)")
    norm: str = attr(Enum("FftNorm", units=R.NORMS),
                     doc="Backward: no scaling; Forward: 1/N on the inverse; Ortho: 1/√N")


def _check_fft(shapes, a, out):
    x = shapes[0]
    want(x.dtype in FFT_DTYPES, f"(C1) Fft takes F32, F64 (2N real block) or C64 "
                                f"(interleaved) tensors, got {x.dtype}")
    want(x.rank >= 1, "(C2) Fft transforms the last axis: x must have rank >= 1, got a 0-d "
                      "tensor")
    ext = _last(x)
    if _static(ext) and x.dtype.is_float:
        want(ext >= 2 and ext % 2 == 0, f"(C3) an {x.dtype} Fft row is the 2N real block "
                                         f"[re_0..re_N-1, im_0..im_N-1]: the last dim must "
                                         f"be even and >= 2, got {ext}")
    elif _static(ext):
        want(ext >= 1, "(C3) a C64 Fft row needs at least one complex element, got 0")


def _ref_fft(ctx, x):
    z = R.dft(R.to_complex(x), ctx.attrs.inverse, ctx.attrs.norm)
    return R.from_complex(z, x.shape, ctx.out_np)


def _fft_terms(a, s) -> int:
    ext = s[0].dims[-1]
    return ext if s[0].dtype is DType.C64 else ext // 2


register(OpDef(
    kind="Fft", family="spectral", attrs=FftAttrs, payload="struct", arity=1,
    caps=Caps.NONE, infer=lambda s, a: s[0], check=_check_fft, reference=_ref_fft,
    input_names=("x",),
    doc="1-D discrete Fourier transform of every row along the last axis, any length N "
        "(not only powers of two). Forward `X[k] = Σ_n x[n]·exp(-2πi·nk/N)`, inverse the "
        "same with `+2πi`; both unnormalized under `norm = Backward` (so "
        "`ifft(fft(x)) = N·x`), `Forward` scales the inverse by `1/N`, `Ortho` scales both "
        "by `1/√N`. F32/F64 rows are the 2N real block `[re_0..re_{N-1}, im_0..im_{N-1}]`; "
        "C64 rows are N interleaved complex elements. The output has x's shape and layout.",
    constraints=("C1: x is F32, F64 or C64; the output has x's shape and dtype.",
                 "C2: x has rank >= 1 (the last axis is transformed; the rest are a batch).",
                 "C3: F32/F64: the last dim is even and >= 2 (N = dim/2); C64: it is >= 1."),
    samples=lambda rng: S.fft_samples(rng, FftAttrs), dtypes=FFT_DTYPES,
    accuracy=reduction(2, _fft_terms, "all",
                       reason="every output mixes all N inputs of its row; radix-2, "
                              "Bluestein and direct DFTs stay within c·eps·N·max|X|"),
    notes="RLX's shape rule returns None for Fft (the declared shape is authoritative) while "
          "every executor writes a tensor of the input's shape and layout; here the output "
          "shape is inferred as x's. RLX's CPU uses radix-4/radix-2 for powers of two, a "
          "direct DFT for other N <= 16 and Bluestein above; the oracle is numpy.fft "
          "(pocketfft) in complex128.",
))


# ── FftButterflyStage ────────────────────────────────────────────────────

@dataclass(frozen=True)
class ButterflyAttrs:
    stage: int = attr(U32, doc="butterfly distance 2^stage within each group")
    n_fft: int = attr(U32, doc="complex elements per state row")


_BF_NAMES = ("state", "gate", "rev", "tw_re", "tw_im")


def _check_butterfly(shapes, a, out):
    _f32_operands(shapes, "FftButterflyStage", _BF_NAMES)
    n, st = a.n_fft, shapes[0]
    want(n >= 2 and n % 2 == 0, f"(C2) FftButterflyStage n_fft must be even and >= 2, got {n}")
    half = n // 2
    want(a.stage < 32 and half % (1 << a.stage) == 0,
         f"(C2) 2^stage ({'2^' + str(a.stage)}) must divide n_fft/2 = {half}, or a butterfly's "
         f"pair would leave the row")
    want(st.rank >= 2, f"(C3) state is [batch, n_fft, 2] (or [batch, 2·n_fft]), got rank "
                       f"{st.rank}")
    if st.is_static:
        per = math.prod(st.dims[1:])
        want(per == 2 * n, f"(C3) each state row must hold 2·n_fft = {2 * n} floats, got "
                           f"{per} ({st.dims_text()})")
    for s, name in zip(shapes[1:], _BF_NAMES[1:]):
        if s.is_static:
            want(s.numel == half, f"(C4) `{name}` must hold n_fft/2 = {half} values, got "
                                  f"{s.numel}")


def _ref_butterfly(ctx, state, gate, rev, tw_re, tw_im):
    a = ctx.attrs
    out = R.butterfly_stage(state, gate, rev, tw_re, tw_im, a.stage, a.n_fft, _work(ctx))
    return out.reshape(state.shape).astype(ctx.out_np)


register(OpDef(
    kind="FftButterflyStage", family="spectral", attrs=ButterflyAttrs, payload="struct",
    arity=5, caps=Caps.NONE, infer=lambda s, a: s[0], check=_check_butterfly,
    reference=_ref_butterfly, input_names=_BF_NAMES,
    doc="One ternary-pruned radix-2 butterfly stage on interleaved complex rows "
        "`[batch, n_fft, 2]`. Butterfly `b` (0 <= b < n_fft/2) pairs `i0 = (b div s)·2s + "
        "b mod s` with `i1 = i0 + s`, `s = 2^stage`: when `gate[b] != 0` it writes "
        "`top = x[i0] + w·x[i1]` to i0 and `bot = x[i0] - w·x[i1]` to i1 with "
        "`w = tw_re[b] + i·tw_im[b]`, swapped when `rev[b] >= 0.5`; when `gate[b] == 0` the "
        "pair passes through unchanged. A sequence of stages with bit-reversed input and "
        "`w = exp(-2πi·k/2s)` is a radix-2 FFT.",
    constraints=("C1: all five operands are F32; the output has the state's shape.",
                 "C2: n_fft is even and >= 2, and 2^stage divides n_fft/2.",
                 "C3: state has rank >= 2 (dim 0 the batch) and 2·n_fft floats per row.",
                 "C4: gate, rev, tw_re and tw_im hold n_fft/2 values each."),
    samples=lambda rng: S.butterfly_samples(rng, ButterflyAttrs), dtypes=F32_ONLY,
    accuracy=reduction(2, 2, "all", reason="one complex multiply-add per element"),
    notes="RLX's shape rule returns None (declared shape authoritative) and no verifier rule "
          "checks the stage, n_fft or the vector lengths; its kernels index out of the row "
          "when 2^stage does not divide n_fft/2, so C2-C4 are rejected here instead.",
))


# ── LogMel, LogMelBackward ───────────────────────────────────────────────

def _check_log_mel(shapes, kind: str, names):
    _f32_operands(shapes, kind, names)
    spec, filt = shapes[0], shapes[1]
    want(spec.rank >= 1, f"(C2) {kind} spectrum must have rank >= 1 ([..., 2·n_fft])")
    want(filt.rank == 2, f"(C3) {kind} filters must be [n_mels, n_bins], got rank {filt.rank}")
    ext = _last(spec)
    if _static(ext):
        want(ext >= 2 and ext % 2 == 0, f"(C2) {kind} spectrum's last dim is 2·n_fft (re "
                                         f"plane, im plane): even and >= 2, got {ext}")
        if _static(filt.dims[1]):
            bins = ext // 4 + 1
            want(filt.dims[1] == bins, f"(C3) {kind} filters second dim {filt.dims[1]} != "
                                       f"n_bins = n_fft/2 + 1 = {bins} (n_fft = {ext // 2})")


def _infer_log_mel(shapes, a):
    return shapes[0].with_dim(shapes[0].rank - 1, shapes[1].dims[0])


def _ref_log_mel(ctx, spec, filters):
    out, *_ = R.log_mel_rows(_rows(spec), filters, _work(ctx))
    return out.reshape(spec.shape[:-1] + (filters.shape[0],)).astype(ctx.out_np)


def _check_log_mel_backward(shapes, a, out):
    _check_log_mel(shapes, "LogMelBackward", ("spectrum", "filters", "dy"))
    want_dy = _infer_log_mel(shapes, a)
    dy = shapes[2]
    want(dy.rank == want_dy.rank and all(x == y or not (_static(x) and _static(y))
                                         for x, y in zip(dy.dims, want_dy.dims)),
         f"(C4) LogMelBackward dy must be LogMel's output shape {want_dy.dims_text()}, got "
         f"{dy.dims_text()}")


def _ref_log_mel_backward(ctx, spec, filters, dy):
    d = R.log_mel_vjp_rows(_rows(spec), filters, _rows(dy), _work(ctx))
    return d.reshape(spec.shape).astype(ctx.out_np)


_LM_C = ("C1: spectrum and filters are F32; the output is F32.",
         "C2: spectrum is [..., 2·n_fft] (rank >= 1, last dim even and >= 2).",
         "C3: filters are [n_mels, n_bins] with n_bins = n_fft/2 + 1.")

register(OpDef(
    kind="LogMel", family="spectral", arity=2, caps=Caps.NONE, infer=_infer_log_mel,
    check=lambda s, a, o: _check_log_mel(s, "LogMel", ("spectrum", "filters")),
    reference=_ref_log_mel, input_names=("spectrum", "filters"),
    doc="Whisper's log-mel features from a 2N-block FFT spectrum. Per frame (row): "
        "`power[k] = re[k]² + im[k]²` for the one-sided bins k < n_fft/2 + 1, "
        "`mel[m] = Σ_k filters[m, k]·power[k]`, `v = log10(max(mel, 1e-10))`, then "
        "Whisper's dynamic-range compression `(max(v, max_m v - 8) + 4) / 4` with the "
        "maximum taken over the frame's mels. Output `[..., n_mels]`.",
    constraints=_LM_C, samples=lambda rng: S.log_mel_samples(rng), dtypes=F32_ONLY,
    accuracy=reduction(2, lambda a, s: s[0].dims[-1] // 4 + 8, "all",
                       reason="a mel sum over n_bins, then log10 and an affine step"),
    notes="Whisper's own `log_mel_spectrogram` takes the max - 8 floor over the whole "
          "spectrogram; RLX (and this reference) floor each frame by its own maximum. A NaN "
          "mel energy becomes 1e-10 (RLX clamps with f32::max, which drops NaN).",
))

register(OpDef(
    kind="LogMelBackward", family="spectral", arity=3, caps=Caps.NONE,
    infer=lambda s, a: s[0], check=_check_log_mel_backward, reference=_ref_log_mel_backward,
    input_names=("spectrum", "filters", "dy"),
    doc="VJP of LogMel w.r.t. the spectrum, as RLX's `log_mel_vjp_frame`: a mel whose "
        "compressed value sits on the frame's floor (within 1e-6) gets no gradient, the "
        "others `dy/4`; mels with energy <= 1e-10 contribute nothing; otherwise "
        "`d_power[k] = Σ_m d_mel[m] / (mel[m]·ln 10) · filters[m, k]` and "
        "`d_re[k] = 2·re[k]·d_power[k]`, `d_im[k] = 2·im[k]·d_power[k]` for the one-sided "
        "bins; the other bins get 0. Output has the spectrum's shape.",
    constraints=_LM_C + ("C4: dy is F32 of LogMel's output shape [..., n_mels].",),
    samples=lambda rng: S.log_mel_samples(rng, backward=True), dtypes=F32_ONLY,
    accuracy=reduction(2, lambda a, s: s[0].dims[-1] // 4 + s[1].dims[0] + 8, "all",
                       reason="mel sums over n_bins, then a sum over n_mels"),
    notes="The floor max - 8 depends on the frame's maximum, but RLX's VJP (followed here) "
          "treats it as a constant: the maximal mel's gradient omits that path.",
))


from . import _spectral_signal  # noqa: E402,F401  (registers WelchPeaks, PartitionedConv)
