"""OpenCL lowerings of the normalization family: LayerNorm, RmsNorm, GroupNorm,
LayerNorm2d and BatchNormInference, on the kernels of ``_reduce_norm``.

LayerNorm/RmsNorm over the last axis and GroupNorm normalize contiguous blocks (a block
per work-item on CPUs, per work-group on GPUs); LayerNorm/RmsNorm over another axis and
LayerNorm2d (channels on axis 1) normalize lines of ``[outer, C, inner]``. Per-feature
operands are read flat, so ``[C]``, ``[1, C]`` and ``[C, 1]`` all work; their element
count is checked when the node is lowered (shapes are static by then).
"""
from __future__ import annotations

import math

from ...ir.dtype import DType
from . import _reduce_c as rc
from . import _reduce_norm
from ._reduce_c import (
    FLOATS,
    cpu_local,
    item_local,
    kernel,
    launcher,
    split3,
    wg_size,
)
from .launch import scalar
from .lowering import Step, accumulates, lowers
from .variant_table import use, use_dev

_WIDE_STATS = "CPU-style kernels compute in double where the device has fp64"
_NARROW = (DType.F32, DType.F16, DType.BF16)


def _check_vectors(node, ins, size: int, names) -> None:
    for s, n in zip(ins[1:], names):
        if math.prod(s.dims) != size:
            raise ValueError(f"{node.kind} operand `{n}` has {math.prod(s.dims)} elements "
                             f"(shape {list(s.dims)}), expected {size} (at %{node.id})")


def _wide(dev) -> bool:
    """Whether the statistics run in double for every dtype (``_reduce_norm.norm_defs``)."""
    return bool(dev.fp64) and not rc.gpu_style(dev)


def _eps(defs: dict, eps: float):
    return scalar(eps, defs["CT"])


def _blocks(node, ins, ctx, rows: int, groups: int, cg: int, s: int, rms: bool) -> Step:
    """Normalize ``rows`` contiguous blocks of ``cg·s`` elements."""
    defs = _reduce_norm.norm_defs([t.dtype for t in ins], ctx.device, rms, _wide(ctx.device))
    dev, q = ctx.device, ctx.queue
    gpu = rc.gpu_style(dev)
    wg = wg_size(dev)
    use_dev("norm.rows", gpu)
    ref = kernel(ctx, _reduce_norm.source("rows_gpu" if gpu else "rows_cpu", defs, wg))
    items, local = (rows * wg, wg) if gpu else (rows, cpu_local(dev, rows))
    items = items if cg * s else 0          # empty blocks: nothing to write
    eps = _eps(defs, node.attrs.eps)
    return Step(lambda out, x, g, b: launcher(ref, q, items, local, [
        out.buf, x.buf, g.buf, b.buf, scalar(rows), scalar(groups), scalar(cg), scalar(s),
        eps]))


def _lines(node, ins, ctx, outer: int, c: int, inner: int, rms: bool) -> Step:
    """Normalize the ``c`` elements of each line of ``[outer, c, inner]``."""
    defs = _reduce_norm.norm_defs([t.dtype for t in ins], ctx.device, rms, _wide(ctx.device))
    dev, q = ctx.device, ctx.queue
    gpu = rc.gpu_style(dev)
    blocks = not gpu
    use_dev("norm.cols", gpu)
    ref = kernel(ctx, _reduce_norm.source("cols_cpu" if blocks else "cols", defs))
    cb = int(defs["VW"]) * _reduce_norm.COL_VECTORS if blocks else 1
    lines = outer * -(-inner // cb) if c else 0
    local = item_local(dev, lines)
    eps = _eps(defs, node.attrs.eps)
    return Step(lambda out, x, g, b: launcher(ref, q, lines, local, [
        out.buf, x.buf, g.buf, b.buf, scalar(outer), scalar(c), scalar(inner), eps]))


def lower_axis_norm(node, ins, ctx) -> Step:
    dims = ins[0].dims
    ax = node.attrs.axis % len(dims)
    outer, c, inner = split3(dims, ax, ax + 1)
    _check_vectors(node, ins, c, ("gamma", "beta"))
    rms = node.kind == "RmsNorm"
    if inner == 1:
        return _blocks(node, ins, ctx, outer, 1, c, 1, rms)
    return _lines(node, ins, ctx, outer, c, inner, rms)


for _kind in ("LayerNorm", "RmsNorm"):
    lowers(_kind, FLOATS)(lower_axis_norm)
    accumulates(_kind, _NARROW, when="cpu_fp64", reason=_WIDE_STATS)(lower_axis_norm)


@accumulates("LayerNorm2d", _NARROW, when="cpu_fp64", reason=_WIDE_STATS)
@lowers("LayerNorm2d", FLOATS)
def lower_layer_norm2d(node, ins, ctx) -> Step:
    outer, c, inner = split3(ins[0].dims, 1, 2)
    _check_vectors(node, ins, c, ("gamma", "beta"))
    if inner == 1:
        return _blocks(node, ins, ctx, outer, 1, c, 1, False)
    return _lines(node, ins, ctx, outer, c, inner, False)


@accumulates("GroupNorm", _NARROW, when="cpu_fp64", reason=_WIDE_STATS)
@lowers("GroupNorm", FLOATS)
def lower_group_norm(node, ins, ctx) -> Step:
    dims = [int(d) for d in ins[0].dims]
    n, c, groups = dims[0], dims[1], node.attrs.num_groups
    if groups <= 0 or c % groups:
        raise ValueError(f"GroupNorm channels ({c}) are not divisible by num_groups "
                         f"({groups}) (at %{node.id})")
    _check_vectors(node, ins, c, ("gamma", "beta"))
    return _blocks(node, ins, ctx, n * groups, groups, c // groups, math.prod(dims[2:]),
                   False)


@lowers("BatchNormInference", FLOATS)
def lower_batch_norm(node, ins, ctx) -> Step:
    dims = ins[0].dims
    c = int(dims[-1])
    _check_vectors(node, ins, c, ("gamma", "beta", "running_mean", "running_var"))
    defs = _reduce_norm.norm_defs([t.dtype for t in ins], ctx.device)
    use("batchnorm")
    ref = kernel(ctx, _reduce_norm.source("batchnorm", defs))
    n = math.prod(dims)
    local = min(256, wg_size(ctx.device))
    eps = _eps(defs, node.attrs.eps)
    return Step(lambda out, x, g, b, m, v: launcher(ref, ctx.queue, n, local, [
        out.buf, x.buf, g.buf, b.buf, m.buf, v.buf, scalar(n), scalar(c), eps]))
