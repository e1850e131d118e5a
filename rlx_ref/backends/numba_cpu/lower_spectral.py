"""Lowering of the spectral and complex families on the kernels of ``_spectral_kernels``.

Fft (F32/F64 2N block and C64 interleaved, every length and norm), FftButterflyStage,
LogMel, LogMelBackward, WelchPeaks, PartitionedConv (a direct f64 sum: the overlap-save
partitioning RLX uses only changes the rounding) and the C64 kinds ComplexNormSq,
ComplexNormSqBackward and Conjugate all run natively; sums and logs are taken in f64 and
rounded once into the output.
"""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType
from ...ops import _spectral_ref
from . import _spectral_kernels as K
from ._reduce_geom import is_parallel, threads
from .kernels import compile_kernel
from .lowering import Step, lowers

C64 = (DType.C64,)
F32 = (DType.F32,)
_F64_FFT = "transforms in f64 and rounds once into the output"


def _kernel():
    return compile_kernel(*K.source())


def _contig(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x)


def _rows2(a: np.ndarray, width: int) -> np.ndarray:
    return a.reshape(-1, width) if width else a.reshape(0, 0)


@lowers("Fft", (DType.F32, DType.F64, DType.C64), reason=_F64_FFT)
def lower_fft(node, ins, ctx) -> Step:
    kernel = _kernel()
    ext = int(ins[0].dims[-1])
    c64 = ins[0].dtype is DType.C64
    n = ext if c64 else ext // 2
    inverse, norm = node.attrs.inverse, node.attrs.norm
    tw, chirp, bf = K.fft_plan(n, inverse)
    tw = K.stage_twiddles(tw)
    rev = K.bit_reversal(tw.shape[1])         # n, or Bluestein's M
    scale = _spectral_ref.output_scale(norm, n, inverse)
    fn = kernel.get("fft_c64" if c64 else "fft_block")
    par = kernel.get("fft_c64_par" if c64 else "fft_block_par")

    def run(out, x):
        if x.size:
            x2, o2 = _rows2(_contig(x), ext), _rows2(out, ext)
            if x2.shape[0] > 1 and is_parallel(x.size):
                par(x2, o2, n, scale, tw, chirp, bf, rev, threads())
            else:
                fn(x2, o2, n, scale, tw, chirp, bf, rev, 0, x2.shape[0])
    return Step(run, [kernel])


@lowers("FftButterflyStage", F32)
def lower_butterfly(node, ins, ctx) -> Step:
    kernel = _kernel()
    fn = kernel.get("butterfly_stage")
    n_fft, stage = node.attrs.n_fft, node.attrs.stage

    def run(out, state, gate, rev, tw_re, tw_im):
        half = n_fft // 2
        for v, name in ((gate, "gate"), (rev, "rev"), (tw_re, "tw_re"), (tw_im, "tw_im")):
            if v.size != half:      # dynamic dims: the verifier could not check
                raise ValueError(f"FftButterflyStage `{name}` has {v.size} values, expected "
                                 f"n_fft/2 = {half}")
        if state.size:
            vecs = [_contig(v).reshape(-1) for v in (gate, rev, tw_re, tw_im)]
            fn(_rows2(_contig(state), 2 * n_fft), *vecs, _rows2(out, 2 * n_fft), n_fft, stage)
    return Step(run, [kernel])


@lowers("LogMel", F32, reason="mel energies and log10 in f64, one rounding")
def lower_log_mel(node, ins, ctx) -> Step:
    kernel = _kernel()
    fn = kernel.get("log_mel")
    ext = int(ins[0].dims[-1])
    n_fft = ext // 2
    floor = float(_spectral_ref.MEL_FLOOR)

    def run(out, spec, filters):
        n_mels = filters.shape[0]
        if out.size:
            fn(_rows2(_contig(spec), ext), _contig(filters), _rows2(out, n_mels), n_fft,
               n_fft // 2 + 1, floor)
    return Step(run, [kernel])


@lowers("LogMelBackward", F32, reason="mel energies, log10 and the VJP in f64, one rounding")
def lower_log_mel_backward(node, ins, ctx) -> Step:
    kernel = _kernel()
    fn = kernel.get("log_mel_backward")
    ext = int(ins[0].dims[-1])
    n_fft = ext // 2
    floor, ln10 = float(_spectral_ref.MEL_FLOOR), float(_spectral_ref.LN10)

    def run(out, spec, filters, dy):
        n_mels = filters.shape[0]
        if out.size:
            fn(_rows2(_contig(spec), ext), _contig(filters), _rows2(_contig(dy), n_mels),
               _rows2(out, ext), n_fft, n_fft // 2 + 1, floor, ln10)
    return Step(run, [kernel])


@lowers("WelchPeaks", F32, reason="the segment-averaged PSD in f64, one rounding")
def lower_welch_peaks(node, ins, ctx) -> Step:
    kernel = _kernel()
    fn = kernel.get("welch_peaks")
    ext = int(ins[0].dims[-1])
    k, n_seg = node.attrs.k, node.attrs.n_segments

    def run(out, spec):
        if spec.shape[0] % n_seg:        # dynamic rows: the verifier could not check
            raise ValueError(f"WelchPeaks rows ({spec.shape[0]}) are not a multiple of "
                             f"n_segments ({n_seg})")
        if out.size:
            fn(_rows2(_contig(spec), ext), out.reshape(-1, 2 * k), ext // 2, n_seg, k)
    return Step(run, [kernel])


@lowers("PartitionedConv", F32, reason="a direct full convolution summed in f64")
def lower_partitioned_conv(node, ins, ctx) -> Step:
    kernel = _kernel()
    fn = kernel.get("conv_full")
    ell = int(ins[0].dims[-1])

    def run(out, x, ir):
        width = out.shape[-1] if out.ndim else 1
        if out.size:
            fn(_rows2(_contig(x), ell), _contig(ir).reshape(-1), _rows2(out, width))
    return Step(run, [kernel])


def _flat(fname: str):
    """A Step running ``fname(*flat inputs, flat out)`` (element-wise complex kernels)."""
    def lower(node, ins, ctx) -> Step:
        kernel = _kernel()
        fn = kernel.get(fname)

        def run(out, *xs):
            if out.size:
                fn(*[_contig(x).reshape(-1) for x in xs], out.reshape(-1))
        return Step(run, [kernel])
    return lower


lowers("ComplexNormSq", F32)(_flat("complex_norm_sq"))
lowers("Conjugate", C64)(_flat("conjugate"))
lowers("ComplexNormSqBackward", C64)(_flat("complex_norm_sq_backward"))
