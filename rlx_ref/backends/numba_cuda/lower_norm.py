"""The normalization kinds as CUDA kernels.

LayerNorm, RmsNorm and GroupNorm give each normalized row one block: the block sums the
row (LayerNorm, GroupNorm: then the squared deviations from the mean; RmsNorm: the
squares) in f64 through a shared-memory tree, then every thread writes its strided share
of the row scaled by gamma and shifted by beta. A GroupNorm row is one (sample, group):
C/groups channels times the spatial positions, contiguous, its affine indexed by channel.
LayerNorm2d normalizes over the channels at each (sample, position): rows whose elements
sit a whole plane apart, so each thread takes one row and neighbouring threads read
neighbouring positions (coalesced) instead of a block striding across planes.
BatchNormInference is elementwise with per-channel (last axis) statistics, in f64.
"""
from __future__ import annotations

import math

import numpy as np

from .device import block_threads, device_dtype, launch_shape, rows_shape
from .geometry import read_expr, split3, store_expr
from .kernels import Launch, array_type, compile_kernel, float_type, int_type
from .lower_reduce import FLOAT_KINDS, _render
from .lowering import SIXTEEN_NOTE, Step, lowers

_NORM = '''
def {name}(out, x, g, b, k_len, inner, eps, groups, spatial):
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
    ax = node.attrs.axis % ins[0].rank
    return _row_norm(node, ins, *split3(ins[0].dims, ax, ax + 1), "k", 1, 1)


@lowers("GroupNorm", FLOAT_KINDS, reason=SIXTEEN_NOTE)
def lower_group_norm(node, ins, ctx) -> Step:
    dims = [int(d) for d in ins[0].dims]
    groups = node.attrs.num_groups
    per_group = dims[1] // groups
    spatial = math.prod(dims[2:])
    channel = "(r % groups) * (k_len // spatial) + k // spatial"
    return _row_norm(node, ins, dims[0] * groups, per_group * spatial, 1, channel, groups,
                     max(spatial, 1))


def _row_norm(node, ins, outer: int, k: int, inner: int, feature: str, groups: int,
              spatial: int) -> Step:
    """One block per row of ``k`` elements ``inner`` apart; gamma/beta at ``feature``."""
    dt = node.shape.dtype
    first, second, normalized = _TERMS["RmsNorm" if node.kind == "RmsNorm" else "LayerNorm"]
    name, source = _render(
        _NORM, "norm", T=block_threads(), read=read_expr(dt, "x[base + k * inner]"),
        first=first, second=second, normalized=normalized, store=store_expr(dt, "y"),
        gamma=read_expr(ins[1].dtype, f"g[{feature}]"),
        beta=read_expr(ins[2].dtype, f"b[{feature}]"))
    types = [array_type(device_dtype(s.dtype)) for s in [node.shape] + list(ins)]
    i64 = int_type()
    launch = Launch(compile_kernel(name, source),
                    tuple(types) + (i64, i64, float_type(), i64, i64))
    eps = float(np.float32(node.attrs.eps))         # the attr is an f32, as the oracle
    rows = outer * inner

    def run(out, x, g, b):
        if rows and k:
            blocks, t = rows_shape(rows, block_threads())
            launch(blocks, t, out, x, g, b, k, inner, eps, groups, spatial)
    return Step(run, [launch])


_COLUMN_NORM = '''
def {name}(out, x, g, b, k_len, inner, eps):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < out.size // k_len:
        o = i // inner
        base = o * k_len * inner + (i - o * inner)
        total = np.float64(0.0)
        for k in range(k_len):
            total += {read}
        mean = total / k_len
        total = np.float64(0.0)
        for k in range(k_len):
            v = {read}
            total += (v - mean) * (v - mean)
        inv = 1.0 / math.sqrt(total / k_len + eps)
        for k in range(k_len):
            y = ({read} - mean) * inv * {gamma} + {beta}
            out[base + k * inner] = {store}
        i += step
'''


@lowers("LayerNorm2d", FLOAT_KINDS, reason=SIXTEEN_NOTE)
def lower_layer_norm2d(node, ins, ctx) -> Step:
    dt = node.shape.dtype
    outer, k, inner = split3(ins[0].dims, 1, 2)
    name, source = _render(
        _COLUMN_NORM, "colnorm", read=read_expr(dt, "x[base + k * inner]"),
        store=store_expr(dt, "y"), gamma=read_expr(ins[1].dtype, "g[k]"),
        beta=read_expr(ins[2].dtype, "b[k]"))
    types = [array_type(device_dtype(s.dtype)) for s in [node.shape] + list(ins)]
    launch = Launch(compile_kernel(name, source),
                    tuple(types) + (int_type(), int_type(), float_type()))
    eps = float(np.float32(node.attrs.eps))
    rows = outer * inner

    def run(out, x, g, b):
        if rows and k:
            blocks, t = launch_shape(rows)
            launch(blocks, t, out, x, g, b, k, inner, eps)
    return Step(run, [launch])


_BATCH_NORM = '''
def {name}(out, x, g, b, mu, var, channels, eps):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < out.size:
        c = i % channels
        y = {gamma} * ({read} - {mean}) / math.sqrt({var} + eps) + {beta}
        out[i] = {store}
        i += step
'''


@lowers("BatchNormInference", FLOAT_KINDS, reason=SIXTEEN_NOTE)
def lower_batch_norm(node, ins, ctx) -> Step:
    dt = node.shape.dtype
    vec = [read_expr(s.dtype, f"{n}[c]") for s, n in zip(ins[1:], ("g", "b", "mu", "var"))]
    name, source = _render(_BATCH_NORM, "batchnorm", read=read_expr(dt, "x[i]"),
                           gamma=vec[0], beta=vec[1], mean=vec[2], var=vec[3],
                           store=store_expr(dt, "y"))
    types = [array_type(device_dtype(s.dtype)) for s in [node.shape] + list(ins)]
    launch = Launch(compile_kernel(name, source), tuple(types) + (int_type(), float_type()))
    eps = float(np.float32(node.attrs.eps))
    n, channels = node.shape.numel, int(ins[0].dims[-1]) if ins[0].rank else 1

    def run(out, x, g, b, mu, var):
        if n:
            blocks, t = launch_shape(n)
            launch(blocks, t, out, x, g, b, mu, var, channels, eps)
    return Step(run, [launch])
