"""Fft and FftButterflyStage as CUDA kernels: one launch per radix-2 stage over all rows.

Fft follows the numba-cpu kernel's math in f64 on split (re, im) scratch rows: a
power-of-two N is loaded in bit-reversed order, then ``log2 N`` stage launches each run
every butterfly of every row (the butterflies of a stage are disjoint, so they work in
place). Any other N is Bluestein's chirp-z as on numba-cpu: load times the chirp,
zero-padded to a power of two M >= 2N - 1 and bit-reversed; M's stages; a pointwise
product with the chirp filter's spectrum, conjugated and bit-reversed into the second
scratch pair; M's stages again; then the conjugate over M times the chirp. The twiddle,
chirp and filter tables are the numba-cpu plan's, uploaded on first use. The output is
rounded once after the norm's scale. FftButterflyStage computes in f32 as RLX, with every
product that an add follows rounded on its own (``_mul32``), so it matches the oracle bit
for bit.
"""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType
from ...ops import _spectral_ref
from ..numba_cpu._spectral_kernels import fft_plan
from .device import device_dtype, import_cuda, launch_shape
from .geometry import read_expr, store_expr
from .kernels import Launch, array_type, compile_kernel, float_type, int_type
from .lower_reduce import _render
from .lowering import Step, lowers

_F64_FFT = "transforms in f64 on split scratch rows and rounds once into the output"
_MUL32 = "from rlx_ref.backends.numba_cuda._philox_dev import _mul32\n"

# bit-reverses ``p`` over ``bits`` bits into ``k`` (the source of destination ``p``)
_BITREV = '''
        k = 0
        v = p
        for _ in range(bits):
            k = (k << 1) | (v & 1)
            v >>= 1'''
_LOAD = '''
def {name}(re, im, x, chirp, n, m, bits):
    e = cuda.grid(1)
    step = cuda.gridsize(1)
    while e < re.size:
        row = e // m
        p = e - row * m''' + _BITREV + '''
        if k < n:
            xr = {read_re}
            xi = {read_im}
            {chirp}
            re[e] = xr
            im[e] = xi
        else:
            re[e] = 0.0
            im[e] = 0.0
        e += step
'''
_CHIRP_IN = ("cr = chirp[k]\n            ci = chirp[n + k]\n"
             "            xr, xi = xr * cr - xi * ci, xr * ci + xi * cr")
_STAGE = '''
def {name}(re, im, tw, m, half):
    e = cuda.grid(1)
    step = cuda.gridsize(1)
    h = m // 2
    stride = m // (2 * half)
    while e < re.size // 2:
        row = e // h
        b = e - row * h
        g = b // half
        k = b - g * half
        a = row * m + g * 2 * half + k
        c = a + half
        wr = tw[k * stride]
        wi = tw[h + k * stride]
        tr = wr * re[c] - wi * im[c]
        ti = wr * im[c] + wi * re[c]
        re[c] = re[a] - tr
        im[c] = im[a] - ti
        re[a] = re[a] + tr
        im[a] = im[a] + ti
        e += step
'''
_MID = '''
def {name}(dre, dim, sre, sim, bf, m, bits):
    e = cuda.grid(1)
    step = cuda.gridsize(1)
    while e < dre.size:
        row = e // m
        p = e - row * m''' + _BITREV + '''
        s = row * m + k
        fr = bf[k]
        fi = bf[m + k]
        dre[e] = sre[s] * fr - sim[s] * fi
        dim[e] = -(sre[s] * fi + sim[s] * fr)
        e += step
'''
_OUT = '''
def {name}(out, re, im, chirp, total, n, m, scale):
    e = cuda.grid(1)
    step = cuda.gridsize(1)
    while e < total:
        row = e // n
        k = e - row * n
        s = row * m + k
        yr = re[s]
        yi = im[s]
        {chirp}
        {store}
        e += step
'''
_CHIRP_OUT = ("yr = yr / m\n        yi = -yi / m\n        cr = chirp[k]\n"
              "        ci = chirp[n + k]\n"
              "        yr, yi = yr * cr - yi * ci, yr * ci + yi * cr")
_BUTTERFLY = _MUL32 + '''
def {name}(out, st, gate, rev, twr, twi, total, n_fft, stride):
    e = cuda.grid(1)
    step = cuda.gridsize(1)
    half = n_fft // 2
    while e < total:
        row = e // half
        f = e - row * half
        i0 = 2 * (row * n_fft + (f // stride) * 2 * stride + f % stride)
        i1 = i0 + 2 * stride
        ar = st[i0]
        ai = st[i0 + 1]
        br = st[i1]
        bi = st[i1 + 1]
        if gate[f] != 0:
            wr = twr[f]
            wi = twi[f]
            tr = _mul32(br, wr) - _mul32(bi, wi)
            ti = _mul32(br, wi) + _mul32(bi, wr)
            if rev[f] >= 0.5:
                ar, ai, br, bi = ar - tr, ai - ti, ar + tr, ai + ti
            else:
                ar, ai, br, bi = ar + tr, ai + ti, ar - tr, ai - ti
        out[i0] = ar
        out[i0 + 1] = ai
        out[i1] = br
        out[i1 + 1] = bi
        e += step
'''


def _io(dt: DType) -> tuple[str, str, str]:
    """(read re, read im, store) for a row of the layout of ``dt`` (2N block or C64)."""
    if dt is DType.C64:
        return ("np.float64(x[row * n + k].real)", "np.float64(x[row * n + k].imag)",
                "out[row * n + k] = np.complex64(complex(yr * scale, yi * scale))")
    at = "row * 2 * n + k"
    return (read_expr(dt, f"x[{at}]"), read_expr(dt, f"x[{at} + n]"),
            f"out[{at}] = {store_expr(dt, 'yr * scale')}\n"
            f"        out[{at} + n] = {store_expr(dt, 'yi * scale')}")


class FftPlan:
    """The launches of an N-point row transform and its tables (uploaded on first use)."""

    def __init__(self, dt: DType, n: int, inverse: bool):
        tw, chirp, bf = fft_plan(n, inverse)
        self.n, self.blue = n, chirp.shape[1] > 0
        self.m = bf.shape[1] if self.blue else n
        self.bits = self.m.bit_length() - 1
        # a one-element stand-in where a table is empty (n = 1, radix-2's unused chirp)
        self.host = [np.ascontiguousarray(t, np.float64).reshape(-1) if t.size else
                     np.zeros(1) for t in (tw, chirp, bf)]
        i64, f64, arr = int_type(), float_type(), array_type(np.float64)
        io = array_type(device_dtype(dt))
        read_re, read_im, store = _io(dt)
        name, src = _render(_LOAD, "fftload", read_re=read_re, read_im=read_im,
                            chirp=_CHIRP_IN if self.blue else "pass")
        self.load = Launch(compile_kernel(name, src), (arr, arr, io, arr, i64, i64, i64))
        name, src = _render(_STAGE, "fftstage")
        self.stage = Launch(compile_kernel(name, src), (arr, arr, arr, i64, i64))
        name, src = _render(_MID, "fftmid")
        self.mid = Launch(compile_kernel(name, src), (arr,) * 5 + (i64, i64))
        name, src = _render(_OUT, "fftout", store=store,
                            chirp=_CHIRP_OUT if self.blue else "pass")
        self.out = Launch(compile_kernel(name, src), (io, arr, arr, arr, i64, i64, i64, f64))
        self.launches = [self.load, self.stage] + ([self.mid] if self.blue else []) + \
            [self.out]
        self._dev: list = []            # tw, chirp, bf tables on the device
        self._scratch: dict = {}        # rows → the (re, im) scratch pairs

    def _buffers(self, rows: int) -> tuple:
        if not self._dev:
            cuda = import_cuda()
            self._dev.extend(cuda.to_device(t) for t in self.host)
        if rows not in self._scratch:
            cuda = import_cuda()
            self._scratch = {rows: [cuda.device_array(rows * self.m, np.float64)
                                    for _ in range(4 if self.blue else 2)]}
        return (*self._dev, *self._scratch[rows])

    def _stages(self, re, im, tw, rows: int) -> None:
        blocks, threads = launch_shape(rows * self.m // 2)
        half = 1
        while half < self.m:
            self.stage(blocks, threads, re, im, tw, self.m, half)
            half *= 2

    def __call__(self, out, x, rows: int, scale: float) -> None:
        tw, chirp, bf, re, im, *more = self._buffers(rows)
        n, m, bits = self.n, self.m, self.bits
        blocks, threads = launch_shape(rows * m)
        self.load(blocks, threads, re, im, x, chirp, n, m, bits)
        self._stages(re, im, tw, rows)
        if self.blue:
            self.mid(blocks, threads, *more, re, im, bf, m, bits)
            re, im = more
            self._stages(re, im, tw, rows)
        blocks, threads = launch_shape(rows * n)
        self.out(blocks, threads, out, re, im, chirp, rows * n, n, m, scale)


@lowers("Fft", (DType.F32, DType.F64, DType.C64), reason=_F64_FFT)
def lower_fft(node, ins, ctx) -> Step:
    dt = ins[0].dtype
    ext = int(ins[0].dims[-1])
    n = ext if dt is DType.C64 else ext // 2
    plan = FftPlan(dt, n, node.attrs.inverse)
    scale = float(_spectral_ref.output_scale(node.attrs.norm, n, node.attrs.inverse))

    def run(out, x):
        if x.size:
            plan(out, x, x.size // ext, scale)
    return Step(run, plan.launches)


@lowers("FftButterflyStage", (DType.F32,))
def lower_butterfly(node, ins, ctx) -> Step:
    n_fft, stride = node.attrs.n_fft, 1 << node.attrs.stage
    half = n_fft // 2
    name, src = _render(_BUTTERFLY, "fftbfly")
    arr, i64 = array_type(np.float32), int_type()
    launch = Launch(compile_kernel(name, src), (arr,) * 6 + (i64,) * 3)

    def run(out, state, gate, rev, tw_re, tw_im):
        for v, vname in ((gate, "gate"), (rev, "rev"), (tw_re, "tw_re"), (tw_im, "tw_im")):
            if v.size != half:      # dynamic dims: the verifier could not check
                raise ValueError(f"FftButterflyStage `{vname}` has {v.size} values, "
                                 f"expected n_fft/2 = {half}")
        total = state.size // 4     # rows · n_fft/2 butterflies
        if total:
            blocks, threads = launch_shape(total)
            launch(blocks, threads, out, state, gate, rev, tw_re, tw_im, total, n_fft, stride)
    return Step(run, [launch])
