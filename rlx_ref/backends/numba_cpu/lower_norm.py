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
    SIXTEEN,
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
from .lower_reduce import FLOATS16, NARROW
from .lowering import JitCall, Step, accumulates, lowers

_F64_STATS = "mean and variance in f64, the affine step in f64, one rounding"


def _norm_kernel():
    return compile_kernel(*_reduce_norm.source())


def _vectors(kind: str, names, arrays, size: int) -> list:
    for v, n in zip(arrays, names):
        check_vector(v, size, n, kind)
    return [shadow(v) for v in arrays]


def _step(node, ins, kernel, c: int, fn, extra: tuple, names=("gamma", "beta"),
          check=None) -> Step:
    """A Step that checks (``check()``, then the per-feature vectors) and flattens its
    operands, then runs ``fn(out, x, *vectors, *extra)``; with a JitCall unless 16-bit
    shadows or a ``check`` are involved."""
    kind = node.kind

    def run(out, x, *vecs):
        if check is not None:
            check()
        vs = _vectors(kind, names, vecs, c)
        buf, rounded = kernel_out(out)
        if buf.size:
            fn(buf, shadow(x), *vs, *extra)
        finish(out, buf, rounded)
    jit = None
    plain = all(s.dtype not in SIXTEEN for s in [node.shape, *ins])
    if plain and check is None and math.prod(node.shape.dims) and \
            all(math.prod(s.dims) == c for s in ins[1:]):
        jit = JitCall(fn, ("{out}.reshape(-1)", *(f"{{{i}}}.reshape(-1)"
                                                   for i in range(len(ins)))), extra)
    return Step(run, [kernel], jit=jit)


def _feature_norm(node, ins, outer: int, c: int, inner: int, eps: float, rms: bool):
    """Normalize over the middle extent ``c`` of [outer, c, inner] (blocks when inner=1)."""
    kernel = _norm_kernel()
    par = is_parallel(outer * c * inner)
    if inner == 1:
        fn = pick(kernel, "norm_blocks", par, "norm.blocks")
        extra = (1, c, 1, eps, rms, row_tasks(outer, par))
    else:
        fn = pick(kernel, "norm_cols", par, "norm.cols")
        extra = (c, inner, eps, rms, tile_columns(outer, inner, par))
    return _step(node, ins, kernel, c, fn, extra)


def lower_axis_norm(node, ins, ctx) -> Step:
    dims = ins[0].dims
    ax = node.attrs.axis % len(dims)
    outer, c, inner = split3(dims, ax, ax + 1)
    return _feature_norm(node, ins, outer, c, inner, float(node.attrs.eps),
                         node.kind == "RmsNorm")


for _kind in ("LayerNorm", "RmsNorm"):
    lowers(_kind, FLOATS16, reason=SHADOW_NOTE)(lower_axis_norm)
    accumulates(_kind, NARROW, "f64", reason=_F64_STATS)(lower_axis_norm)


@accumulates("LayerNorm2d", NARROW, "f64", reason=_F64_STATS)
@lowers("LayerNorm2d", FLOATS16, reason=SHADOW_NOTE)
def lower_layer_norm2d(node, ins, ctx) -> Step:
    outer, c, inner = split3(ins[0].dims, 1, 2)
    return _feature_norm(node, ins, outer, c, inner, float(node.attrs.eps), False)


@accumulates("GroupNorm", NARROW, "f64", reason=_F64_STATS)
@lowers("GroupNorm", FLOATS16, reason=SHADOW_NOTE)
def lower_group_norm(node, ins, ctx) -> Step:
    dims = [int(d) for d in ins[0].dims]
    n, c, groups = dims[0], dims[1], node.attrs.num_groups
    s = math.prod(dims[2:])
    eps = float(node.attrs.eps)
    kernel = _norm_kernel()
    par = is_parallel(n * c * s)
    fn = pick(kernel, "norm_blocks", par, "norm.blocks")

    def check():
        if groups <= 0 or c % groups:     # dynamic channels: the verifier could not check
            raise ValueError(f"GroupNorm channels ({c}) are not divisible by num_groups "
                             f"({groups})")
    if groups <= 0 or c % groups:
        return _step(node, ins, kernel, c, fn, (), check=check)
    return _step(node, ins, kernel, c, fn,
                 (groups, c // groups, s, eps, False, row_tasks(n * groups, par)))


@lowers("BatchNormInference", FLOATS16, reason=SHADOW_NOTE)
def lower_batch_norm(node, ins, ctx) -> Step:
    dims = ins[0].dims
    c = int(dims[-1])
    kernel = _norm_kernel()
    par = is_parallel(math.prod(dims))
    fn = pick(kernel, "batchnorm", par, "batchnorm")
    eps = float(node.attrs.eps)
    return _step(node, ins, kernel, c, fn, (eps, row_tasks(math.prod(dims[:-1]), par)),
                 ("gamma", "beta", "running_mean", "running_var"))
