"""Lowering of the random family: RngNormal, RngUniform and Sample (``_random_src``).

The stream key is fixed at lowering (``combine_seed(42, key)`` for the fills, the Sample
seed or 0xDEADBEEF); the kernels compute Philox blocks in place, so the result is
bit-exact with the oracle and independent of the thread count. Sample runs one row per
task; a row whose NaN would reach one of RLX's sorts (which panic) is reported as an
error naming the node, as the oracle does.
"""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType
from ...ops import _philox
from ...ops._sample_row import clamp_temperature, sample_seed
from ._reduce_geom import is_parallel
from .kernels import compile_kernel
from .lowering import Step, lowers
from ._random_src import source

F32 = (DType.F32,)


def _kernel():
    return compile_kernel(*source())


def _fn(kernel, base: str, total: int):
    return kernel.get(base + "_par" if is_parallel(total) else base)


def _key(seed: int) -> tuple:
    lo, hi = _philox.seed_key(seed)
    return np.uint64(lo), np.uint64(hi)


@lowers("RngUniform", F32)
def lower_uniform(node, ins, ctx) -> Step:
    a = node.attrs
    k0, k1 = _key(_philox.combine_seed(_philox.DEFAULT_GLOBAL_SEED, a.key))
    kernel = _kernel()
    lo, hi = np.float32(a.low), np.float32(a.high)

    def run(out, *template):
        flat = out.reshape(-1)
        if flat.size:
            with np.errstate(over="ignore", invalid="ignore"):
                _fn(kernel, "uniform_fill", flat.size)(flat, k0, k1, lo, hi)
    return Step(run, [kernel])


@lowers("RngNormal", F32)
def lower_normal(node, ins, ctx) -> Step:
    a = node.attrs
    k0, k1 = _key(_philox.combine_seed(_philox.DEFAULT_GLOBAL_SEED, a.key))
    kernel = _kernel()
    mean, scale = np.float32(a.mean), np.float32(a.scale)

    def run(out, *template):
        flat = out.reshape(-1)
        if flat.size:
            _fn(kernel, "normal_fill", flat.size)(flat, k0, k1, mean, scale)
    return Step(run, [kernel])


@lowers("Sample", F32)
def lower_sample(node, ins, ctx) -> Step:
    a = node.attrs
    k0, k1 = _key(sample_seed(a.seed))
    kernel = _kernel()
    temp = clamp_temperature(a.temperature)
    top_p = np.float32(a.top_p)
    use_p = bool(top_p < np.float32(1.0))
    dims = ins[0].dims
    fn = _fn(kernel, "sample_rows", int(np.prod(dims)))

    def run(out, x):
        rows = np.ascontiguousarray(x, np.float32).reshape(-1, dims[-1] if dims else 1)
        if out.size == 0:
            return
        if rows.shape[1] == 0:
            out[...] = 0
            return
        with np.errstate(all="ignore"):
            fn(out.reshape(-1), rows, k0, k1, a.top_k, top_p, use_p, temp)
        if (out < 0).any():
            raise ValueError(f"Sample %{node.id}: NaN logits or probabilities reach a sort "
                             f"(top_k={a.top_k}, top_p={a.top_p}); RLX's sort panics on NaN")
    return Step(run, [kernel])
