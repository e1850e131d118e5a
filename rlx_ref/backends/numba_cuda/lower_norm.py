"""LayerNorm and RmsNorm as CUDA kernels: one block per normalized row.

The block sums the row (LayerNorm: then the squared deviations from the mean; RmsNorm:
the squares) in f64 through a shared-memory tree, then every thread writes its strided
share of the row scaled by gamma and shifted by beta, indexed by the feature number.
"""
from __future__ import annotations

import numpy as np

from .device import block_threads, device_dtype, rows_shape
from .geometry import read_expr, split3, store_expr
from .kernels import Launch, array_type, compile_kernel, float_type, int_type
from .lower_reduce import FLOAT_KINDS, _render
from .lowering import SIXTEEN_NOTE, Step, lowers

_NORM = '''
def {name}(out, x, g, b, k_len, inner, eps):
    sm = cuda.shared.array({T}, np.float64)
    t = cuda.threadIdx.x
    rows = out.size // k_len
    r = cuda.blockIdx.x
    while r < rows:
        o = r // inner
        base = o * k_len * inner + (r - o * inner)
        total = np.float64(0.0)
        k = t
        while k < k_len:
            v = {read}
            total += {first}
            k += {T}
        mean = _block_sum(sm, total) / k_len
        total = np.float64(0.0)
        k = t
        while k < k_len:
            v = {read}
            total += {second}
            k += {T}
        inv = 1.0 / math.sqrt(_block_sum(sm, total) / k_len + eps)
        k = t
        while k < k_len:
            v = {read}
            y = {normalized} * {gamma} + {beta}
            out[base + k * inner] = {store}
            k += {T}
        r += cuda.gridDim.x
'''
# (first pass term, second pass term, normalized value); RmsNorm skips the first pass
_TERMS = {"LayerNorm": ("v", "(v - mean) * (v - mean)", "(v - mean) * inv"),
          "RmsNorm": ("0.0", "v * v", "v * inv")}


@lowers("LayerNorm", FLOAT_KINDS, reason=SIXTEEN_NOTE)
@lowers("RmsNorm", FLOAT_KINDS, reason=SIXTEEN_NOTE)
def lower_axis_norm(node, ins, ctx) -> Step:
    dt = node.shape.dtype
    ax = node.attrs.axis % ins[0].rank
    outer, k, inner = split3(ins[0].dims, ax, ax + 1)
    first, second, normalized = _TERMS[node.kind]
    name, source = _render(
        _NORM, "norm", T=block_threads(), read=read_expr(dt, "x[base + k * inner]"),
        first=first, second=second, normalized=normalized, store=store_expr(dt, "y"),
        gamma=read_expr(ins[1].dtype, "g[k]"), beta=read_expr(ins[2].dtype, "b[k]"))
    types = [array_type(device_dtype(s.dtype)) for s in [node.shape] + list(ins)]
    launch = Launch(compile_kernel(name, source),
                    tuple(types) + (int_type(), int_type(), float_type()))
    eps = float(np.float32(node.attrs.eps))         # the attr is an f32, as the oracle
    rows = outer * inner

    def run(out, x, g, b):
        if rows and k:
            blocks, t = rows_shape(rows, block_threads())
            launch(blocks, t, out, x, g, b, k, inner, eps)
    return Step(run, [launch])
