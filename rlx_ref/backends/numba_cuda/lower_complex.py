"""ComplexNormSq, ComplexNormSqBackward and Conjugate as element-wise CUDA kernels on C64.

C64 buffers are complex64 device arrays (interleaved f32 pairs). Every result is an f32
operation of the oracle's complex64 working type; the squares of ``|z|²`` go through
``_mul32`` so NVVM does not fuse one with the add, which keeps them bit for bit.
"""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType
from .device import launch_shape
from .kernels import Launch, array_type, compile_kernel
from .lower_reduce import _render
from .lowering import Step, lowers

_NORM_SQ = '''from rlx_ref.backends.numba_cuda._philox_dev import _mul32

def {name}(out, z):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < out.size:
        out[i] = _mul32(z[i].real, z[i].real) + _mul32(z[i].imag, z[i].imag)
        i += step
'''
_CONJ = '''
def {name}(out, z):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < out.size:
        out[i] = np.complex64(complex(z[i].real, -z[i].imag))
        i += step
'''
_NORM_SQ_BWD = '''
def {name}(out, z, g):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < out.size:
        s = np.float32(g[i])
        out[i] = np.complex64(complex(s * np.float32(z[i].real), s * np.float32(z[i].imag)))
        i += step
'''


def _flat(template: str, prefix: str, out_np, *in_np):
    """A lowering running ``template`` once over the flat output."""
    def lower(node, ins, ctx) -> Step:
        name, src = _render(template, prefix)
        launch = Launch(compile_kernel(name, src),
                        tuple(array_type(t) for t in (out_np, *in_np)))

        def run(out, *xs):
            if out.size:
                blocks, threads = launch_shape(out.size)
                launch(blocks, threads, out, *xs)
        return Step(run, [launch])
    return lower


lowers("ComplexNormSq", (DType.F32,))(_flat(_NORM_SQ, "cnormsq", np.float32, np.complex64))
lowers("Conjugate", (DType.C64,))(_flat(_CONJ, "conj", np.complex64, np.complex64))
lowers("ComplexNormSqBackward", (DType.C64,))(
    _flat(_NORM_SQ_BWD, "cnormsqbwd", np.complex64, np.complex64, np.float32))
