"""LogMel and LogMelBackward as CUDA kernels, in f64 as numba-cpu, one rounding per output.

One thread per (frame, mel) takes the mel's energy (the one-sided power summed against
its filter row, in bin order) and its log10 into f64 scratch; a second launch, again per
(frame, mel), finds the frame's maximum, so every thread knows the floor: LogMel writes
the compressed value, LogMelBackward the mel's ``d_mel / (energy·ln 10)`` (0 where the
energy is at the floor). A last backward launch, one thread per spectrum element, sums
those over the mels in order for its bin, skipping dead mels as numba-cpu does.
"""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType
from ...ops import _spectral_ref
from .device import import_cuda, launch_shape
from .kernels import Launch, array_type, compile_kernel, float_type, int_type
from .lower_reduce import _render
from .lowering import Step, lowers

F32 = (DType.F32,)
_ENERGY = '''
def {name}(energy, raw, spec, filt, total, n_fft, n_bins, n_mels, mel_floor):
    e = cuda.grid(1)
    step = cuda.gridsize(1)
    while e < total:
        r = e // n_mels
        m = e - r * n_mels
        acc = 0.0
        for k in range(n_bins):
            re = np.float64(spec[r * 2 * n_fft + k])
            im = np.float64(spec[r * 2 * n_fft + n_fft + k])
            acc += np.float64(filt[m * n_bins + k]) * (re * re + im * im)
        energy[e] = acc
        if not acc > mel_floor:             # NaN energy clamps too, as RLX's f32::max
            acc = mel_floor
        raw[e] = math.log10(acc)
        e += step
'''
# the frame's floor: its largest log10 energy less 8
_FLOOR = '''
        top = -np.inf
        for j in range(n_mels):
            if raw[r * n_mels + j] > top:
                top = raw[r * n_mels + j]
        floor = top - 8.0
        c = raw[e] if raw[e] > floor else floor'''
_COMPRESS = '''
def {name}(out, raw, total, n_mels):
    e = cuda.grid(1)
    step = cuda.gridsize(1)
    while e < total:
        r = e // n_mels''' + _FLOOR + '''
        out[e] = np.float32((c + 4.0) / 4.0)
        e += step
'''
_DLOG = '''
def {name}(dlog, energy, raw, dy, total, n_mels, mel_floor, ln10):
    e = cuda.grid(1)
    step = cuda.gridsize(1)
    while e < total:
        r = e // n_mels''' + _FLOOR + '''
        d_mel = 0.0 if abs(c - floor) <= 1e-6 else np.float64(dy[e]) * 0.25
        live = not energy[e] <= mel_floor          # NaN energy stays live, as RLX
        dlog[e] = d_mel / (energy[e] * ln10) if live else 0.0
        e += step
'''
_GRAD = '''
def {name}(out, spec, filt, dlog, energy, total, n_fft, n_bins, n_mels, mel_floor):
    e = cuda.grid(1)
    step = cuda.gridsize(1)
    while e < total:
        r = e // (2 * n_fft)
        i = e - r * 2 * n_fft
        k = i if i < n_fft else i - n_fft
        if k < n_bins:
            d_pow = 0.0
            for m in range(n_mels):
                if not energy[r * n_mels + m] <= mel_floor:    # NaN energy stays live
                    d_pow += dlog[r * n_mels + m] * np.float64(filt[m * n_bins + k])
            out[e] = np.float32(d_pow * 2.0 * np.float64(spec[e]))
        else:
            out[e] = np.float32(0.0)
        e += step
'''


def _launch(template: str, prefix: str, arrays: str, n_ints: int, n_floats: int) -> Launch:
    """A launch whose array arguments have the dtypes ``arrays`` spells (s: f32, d: f64)."""
    name, src = _render(template, prefix)
    arr = {"s": array_type(np.float32), "d": array_type(np.float64)}
    return Launch(compile_kernel(name, src), tuple(arr[c] for c in arrays)
                  + (int_type(),) * n_ints + (float_type(),) * n_floats)


class MelEnergy:
    """The energy and log10 launch, with its [frames, n_mels] f64 scratch."""

    def __init__(self, ext: int):
        self.n_fft = ext // 2
        self.n_bins = self.n_fft // 2 + 1
        self.floor = float(_spectral_ref.MEL_FLOOR)
        self.launch = _launch(_ENERGY, "melnrg", "ddss", 4, 1)
        self._scratch: dict = {}

    def __call__(self, spec, filters, rows: int, n_mels: int) -> tuple:
        """(energy, raw log10) of every (frame, mel), on the device."""
        total = rows * n_mels
        if total not in self._scratch:
            cuda = import_cuda()
            self._scratch = {total: [cuda.device_array(total, np.float64) for _ in range(3)]}
        energy, raw, extra = self._scratch[total]
        blocks, threads = launch_shape(total)
        self.launch(blocks, threads, energy, raw, spec, filters, total, self.n_fft,
                    self.n_bins, n_mels, self.floor)
        return energy, raw, extra


@lowers("LogMel", F32, reason="mel energies and log10 in f64, one rounding")
def lower_log_mel(node, ins, ctx) -> Step:
    ext = int(ins[0].dims[-1])
    nrg = MelEnergy(ext)
    out_launch = _launch(_COMPRESS, "melout", "sd", 2, 0)

    def run(out, spec, filters):
        if out.size:
            rows = spec.size // ext
            _, raw, _ = nrg(spec, filters, rows, out.size // rows)
            blocks, threads = launch_shape(out.size)
            out_launch(blocks, threads, out, raw, out.size, out.size // rows)
    return Step(run, [nrg.launch, out_launch])


@lowers("LogMelBackward", F32, reason="mel energies, log10 and the VJP in f64, one rounding")
def lower_log_mel_backward(node, ins, ctx) -> Step:
    ext = int(ins[0].dims[-1])
    nrg = MelEnergy(ext)
    dlog_launch = _launch(_DLOG, "meldlog", "ddds", 2, 2)
    grad = _launch(_GRAD, "melgrad", "sssdd", 4, 1)
    ln10 = float(_spectral_ref.LN10)

    def run(out, spec, filters, dy):
        if not out.size:
            return
        rows = spec.size // ext
        n_mels = dy.size // rows
        total = rows * n_mels
        if total:
            energy, raw, dlog = nrg(spec, filters, rows, n_mels)
            blocks, threads = launch_shape(total)
            dlog_launch(blocks, threads, dlog, energy, raw, dy, total, n_mels, nrg.floor, ln10)
        else:                       # no mels: every bin's gradient sums nothing
            energy = dlog = import_cuda().to_device(np.zeros(1))
        blocks, threads = launch_shape(out.size)
        grad(blocks, threads, out, spec, filters, dlog, energy, out.size, nrg.n_fft,
             nrg.n_bins, n_mels, nrg.floor)
    return Step(run, [nrg.launch, dlog_launch, grad])
