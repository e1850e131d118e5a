"""Lowering of the normalization family: LayerNorm, RmsNorm, GroupNorm, LayerNorm2d and
BatchNormInference, all on the kernels of ``_reduce_norm`` (statistics in f64).

LayerNorm/RmsNorm over the last axis and GroupNorm normalize contiguous blocks;
LayerNorm/RmsNorm over another axis and LayerNorm2d (channels on axis 1) normalize
columns of [outer, C, inner]. Per-feature vectors are re-checked at run time (dynamic
dims) and read flat, so `[C]`, `[1, C]` and `[C, 1]` all work.
"""
from __future__ import annotations

import math

from . import _reduce_norm
from ._reduce_geom import (
    SHADOW_NOTE,
    check_vector,
    finish,
    is_parallel,
    kernel_out,
    pick,
    row_tasks,
    shadow,
    split3,
    tile_columns,
)
from .kernels import compile_kernel
from .lower_reduce import FLOATS16
from .lowering import Step, lowers


def _norm_kernel():
    return compile_kernel(*_reduce_norm.source())


def _vectors(kind: str, names, arrays, size: int) -> list:
    for v, n in zip(arrays, names):
        check_vector(v, size, n, kind)
    return [shadow(v) for v in arrays]


def _step(kernel, kind: str, c: int, call, names=("gamma", "beta")) -> Step:
    """A Step that checks and flattens the per-feature vectors, then runs ``call``."""
    def run(out, x, *vecs):
        vs = _vectors(kind, names, vecs, c)
        buf, rounded = kernel_out(out)
        if buf.size:
            call(buf, shadow(x), *vs)
        finish(out, buf, rounded)
    return Step(run, [kernel])


def _feature_norm(kind: str, outer: int, c: int, inner: int, eps: float, rms: bool):
    """Normalize over the middle extent ``c`` of [outer, c, inner] (blocks when inner=1)."""
    kernel = _norm_kernel()
    par = is_parallel(outer * c * inner)
    if inner == 1:
        fn = pick(kernel, "norm_blocks", par)
        nt = row_tasks(outer, par)
        call = lambda buf, x, g, b: fn(buf, x, g, b, 1, c, 1, eps, rms, nt)
    else:
        ib = tile_columns(outer, inner, par)
        fn = pick(kernel, "norm_cols", par)
        call = lambda buf, x, g, b: fn(buf, x, g, b, c, inner, eps, rms, ib)
    return _step(kernel, kind, c, call)


def lower_axis_norm(node, ins, ctx) -> Step:
    dims = ins[0].dims
    ax = node.attrs.axis % len(dims)
    outer, c, inner = split3(dims, ax, ax + 1)
    return _feature_norm(node.kind, outer, c, inner, float(node.attrs.eps),
                         node.kind == "RmsNorm")


for _kind in ("LayerNorm", "RmsNorm"):
    lowers(_kind, FLOATS16, reason=SHADOW_NOTE)(lower_axis_norm)


@lowers("LayerNorm2d", FLOATS16, reason=SHADOW_NOTE)
def lower_layer_norm2d(node, ins, ctx) -> Step:
    outer, c, inner = split3(ins[0].dims, 1, 2)
    return _feature_norm("LayerNorm2d", outer, c, inner, float(node.attrs.eps), False)


@lowers("GroupNorm", FLOATS16, reason=SHADOW_NOTE)
def lower_group_norm(node, ins, ctx) -> Step:
    dims = [int(d) for d in ins[0].dims]
    n, c, groups = dims[0], dims[1], node.attrs.num_groups
    s = math.prod(dims[2:])
    eps = float(node.attrs.eps)
    kernel = _norm_kernel()
    par = is_parallel(n * c * s)
    fn = pick(kernel, "norm_blocks", par)
    nt = row_tasks(n * groups, par)
    def call(buf, x, g, b):
        if groups <= 0 or c % groups:     # dynamic channels: the verifier could not check
            raise ValueError(f"GroupNorm channels ({c}) are not divisible by num_groups "
                             f"({groups})")
        fn(buf, x, g, b, groups, c // groups, s, eps, False, nt)
    return _step(kernel, "GroupNorm", c, call)


@lowers("BatchNormInference", FLOATS16, reason=SHADOW_NOTE)
def lower_batch_norm(node, ins, ctx) -> Step:
    dims = ins[0].dims
    c = int(dims[-1])
    kernel = _norm_kernel()
    par = is_parallel(math.prod(dims))
    fn = pick(kernel, "batchnorm", par)
    eps = float(node.attrs.eps)
    nt = row_tasks(math.prod(dims[:-1]), par)
    call = lambda buf, x, g, b, m, v: fn(buf, x, g, b, m, v, eps, nt)
    return _step(kernel, "BatchNormInference", c, call,
                 ("gamma", "beta", "running_mean", "running_var"))
