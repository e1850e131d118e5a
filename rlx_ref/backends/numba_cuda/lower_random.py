"""RngUniform and RngNormal as CUDA kernels: RLX's Philox stream, bit-exact.

Word ``i`` of a stream is lane ``i % 4`` of Philox block ``i // 4``, so each thread
computes whole blocks on its own (a grid-stride loop over blocks) and the output does not
depend on the launch shape. The stream key is fixed at lowering (``combine_seed(42,
key)``, as the oracle). Floats follow ``ops/_philox.py`` operation by operation in f32:
ln and cos are taken in f64 and rounded once, and every f32 product that an add follows
goes through ``_mul32`` so it is not fused with the add.
"""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType
from ...ops import _philox
from .device import launch_shape
from .kernels import Launch, array_type, compile_kernel
from .lower_reduce import _render
from .lowering import Step, lowers

F32 = (DType.F32,)
_IMPORT = "from rlx_ref.backends.numba_cuda._philox_dev import *  # noqa: F403\n"

_UNIFORM = _IMPORT + '''
def {name}(out, k0, k1, lo, hi):
    n = out.size
    span = hi - lo
    blk = cuda.grid(1)
    step = cuda.gridsize(1)
    while blk < (n + 3) // 4:
        w = _philox_block(blk, k0, k1)
        for lane in range(4):
            j = blk * 4 + lane
            if j < n:
                out[j] = lo + _mul32(_unit24(_philox_lane(w, lane)), span)
        blk += step
'''
_NORMAL = _IMPORT + '''
def {name}(out, k0, k1, mean, scale):
    n = out.size
    blk = cuda.grid(1)
    step = cuda.gridsize(1)
    while blk < (n + 1) // 2:
        w = _philox_block(blk, k0, k1)
        for half in range(2):
            j = blk * 2 + half
            if j < n:
                u1 = _unit24(_philox_lane(w, 2 * half))
                u2 = _unit24(_philox_lane(w, 2 * half + 1))
                if u1 < np.float32({tiny!r}):
                    u1 = np.float32({tiny!r})
                ln = np.float32(math.log(np.float64(u1)))
                r = np.float32(math.sqrt(np.float64(np.float32(-2.0) * ln)))
                theta = _mul32(np.float32({two_pi!r}), u2)
                z = _mul32(r, np.float32(math.cos(np.float64(theta))))
                out[j] = mean + _mul32(scale, z)
        blk += step
'''


def _key(a) -> tuple:
    lo, hi = _philox.seed_key(_philox.combine_seed(_philox.DEFAULT_GLOBAL_SEED, a.key))
    return np.uint64(lo), np.uint64(hi)


def _launch(template: str, prefix: str, **fields) -> Launch:
    from numba import types

    name, source = _render(template, prefix, **fields)
    return Launch(compile_kernel(name, source),
                  (array_type(np.float32), types.uint64, types.uint64, types.float32,
                   types.float32))


def _fill(launch: Launch, per_thread: int, k0, k1, p0, p1) -> Step:
    def run(out, *template):
        if out.size:
            blocks, threads = launch_shape(-(-out.size // per_thread))
            launch(blocks, threads, out, k0, k1, p0, p1)
    return Step(run, [launch])


@lowers("RngUniform", F32)
def lower_uniform(node, ins, ctx) -> Step:
    a = node.attrs
    return _fill(_launch(_UNIFORM, "rnguni"), 4, *_key(a), np.float32(a.low),
                 np.float32(a.high))


@lowers("RngNormal", F32)
def lower_normal(node, ins, ctx) -> Step:
    a = node.attrs
    launch = _launch(_NORMAL, "rngnorm", tiny=float(_philox.F32_MIN_POSITIVE),
                     two_pi=float(_philox.TWO_PI_F32))
    return _fill(launch, 2, *_key(a), np.float32(a.mean), np.float32(a.scale))
