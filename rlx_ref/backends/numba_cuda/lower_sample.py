"""Sample as CUDA kernels: RLX's per-row top-k → softmax → top-p → draw, bit for bit.

The oracle (``ops/_sample_row.py``) sums in f32 in order, so every sum here is the same
sequential loop, one thread per row. The two order statistics run on the whole batch
through ``lower_sort``'s parallel merge sort: the k-th largest scaled logit is element
``vocab - top_k`` of the ascending row (NaN last, so a NaN shows there), and top-p walks
the probabilities in the stable descending order (ties by lower index, as the oracle's
``argsort(-p, kind="stable")``; NaN first). A row whose NaN would reach one of RLX's
sorts (which panic) draws -1, and the step reports it naming the node, as the oracle.
"""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType
from ...ops import _philox
from ...ops._sample_row import clamp_temperature, sample_seed
from ..codegen.literal import py_float
from .device import import_cuda, launch_shape
from .kernels import Launch, array_type, compile_kernel, int_type
from .lower_random import _IMPORT
from .lower_reduce import _render
from .lower_sort import LineSort
from .lowering import Step, lowers

_TINY = py_float(_philox.F32_MIN_POSITIVE)
_RENORM = '''
        s = np.float32(0.0)
        for k in range(v):
            s = s + p[b * v + k]
        if not s >= np.float32({tiny}):
            s = np.float32({tiny})
        inv = np.float32(1.0) / s
        for k in range(v):
            p[b * v + k] = p[b * v + k] * inv
'''.replace("{tiny}", _TINY)
_SCALE = '''
def {name}(p, x, bad, temp):
    e = cuda.grid(1)
    step = cuda.gridsize(1)
    while e < p.size:
        p[e] = x[e] / temp
        if e < bad.size:
            bad[e] = 0
        e += step
'''
_CUT = '''
def {name}(p, sv, bad, v, top_k):
    b = cuda.grid(1)
    step = cuda.gridsize(1)
    while b < bad.size:
        if sv[b * v + v - 1] != sv[b * v + v - 1]:
            bad[b] = 1
        cutoff = np.float32(sv[b * v + v - top_k])
        for k in range(v):
            if p[b * v + k] < cutoff:
                p[b * v + k] = -math.inf
        b += step
'''
_SOFT = '''
def {name}(p, bad, v):
    b = cuda.grid(1)
    step = cuda.gridsize(1)
    while b < bad.size:
        m = np.float32(-math.inf)
        for k in range(v):
            if p[b * v + k] > m:
                m = p[b * v + k]
        for k in range(v):
            p[b * v + k] = np.float32(math.exp(np.float64(np.float32(p[b * v + k] - m))))
{renorm}
        b += step
'''
_TOPP = '''
def {name}(p, sv, si, bad, v, top_p):
    b = cuda.grid(1)
    step = cuda.gridsize(1)
    while b < bad.size:
        if sv[b * v] != sv[b * v]:
            bad[b] = 1
        cum = np.float32(0.0)
        last = v - 1
        for j in range(v):
            cum = cum + p[b * v + si[b * v + j]]
            if cum >= top_p:
                last = j
                break
        for j in range(last + 1, v):
            p[b * v + si[b * v + j]] = np.float32(0.0)
{renorm}
        b += step
'''
_DRAW = _IMPORT + '''
def {name}(out, p, bad, v, k0, k1):
    b = cuda.grid(1)
    step = cuda.gridsize(1)
    while b < out.size:
        r = _unit24(_philox_word(b, k0, k1))
        acc = np.float32(0.0)
        pick = v - 1
        for k in range(v):
            acc = acc + p[b * v + k]
            if r <= acc:
                pick = k
                break
        out[b] = np.float32(-1.0) if bad[b] else np.float32(pick)
        b += step
'''


def _kernel(template: str, prefix: str, argtypes: tuple) -> Launch:
    name, source = _render(template, prefix, renorm=_RENORM.rstrip())
    return Launch(compile_kernel(name, source), argtypes)


@lowers("Sample", (DType.F32,))
def lower_sample(node, ins, ctx) -> Step:
    from numba import types

    a = node.attrs
    dims = [int(d) for d in ins[0].dims]
    v = dims[-1]
    batch = dims[0] if len(dims) == 2 else 1
    k0, k1 = (np.uint64(w) for w in _philox.seed_key(sample_seed(a.seed)))
    temp, top_p = clamp_temperature(a.temperature), np.float32(a.top_p)
    use_k, use_p = 0 < a.top_k < v, bool(top_p < np.float32(1.0))
    f32, i32, i64 = array_type(np.float32), array_type(np.int32), int_type()
    f64, ix = array_type(np.float64), array_type(np.int64)
    scale = _kernel(_SCALE, "smpscale", (f32, f32, i32, types.float32))
    cut = _kernel(_CUT, "smpcut", (f32, f64, i32, i64, i64))
    soft = _kernel(_SOFT, "smpsoft", (f32, i32, i64))
    topp = _kernel(_TOPP, "smptopp", (f32, f64, ix, i32, i64, types.float32))
    draw = _kernel(_DRAW, "smpdraw", (f32, f32, i32, i64, types.uint64, types.uint64))
    asc, desc = LineSort(DType.F32, False), LineSort(DType.F32, True)
    launches = [scale, soft, draw] + (asc.launches + [cut] if use_k else []) + \
        (desc.launches + [topp] if use_p else [])
    scratch: list = []          # the row probabilities and the rows' NaN flags

    def run(out, x):
        if not out.size:
            return
        cuda = import_cuda()
        if v == 0:
            out.copy_to_device(np.zeros(batch, np.float32))
            return
        if not scratch:
            scratch.extend((cuda.device_array(batch * v, np.float32),
                            cuda.device_array(batch, np.int32)))
        p, bad = scratch
        blocks, threads = launch_shape(batch * v)
        scale(blocks, threads, p, x, bad, temp)
        rb, rt = launch_shape(batch)
        if use_k:
            sv, _ = asc(p, batch * v, v, 1)
            cut(rb, rt, p, sv, bad, v, a.top_k)
        soft(rb, rt, p, bad, v)
        if use_p:
            sv, si = desc(p, batch * v, v, 1)
            topp(rb, rt, p, sv, si, bad, v, top_p)
        draw(rb, rt, out, p, bad, v, k0, k1)
        if (use_k or use_p) and (out.copy_to_host() < 0).any():
            raise ValueError(f"Sample %{node.id}: NaN logits or probabilities reach a sort "
                             f"(top_k={a.top_k}, top_p={a.top_p}); RLX's sort panics on NaN")
    return Step(run, launches)
