"""Lowering of the Gaussian splat family: GaussianSplatRasterize runs a native per-pixel
kernel (``_splat_kernels``); GaussianSplatPrepare (a few splats of branchy projection and a
conic fit, then a sort) runs on the host through the oracle, declared as such; and
GaussianSplatRender is those two steps in one node (Rasterize ∘ Prepare, as RLX defines it).
"""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType
from ...ops import _splat_bin, _splat_raster
from . import _splat_kernels
from .kernels import compile_kernel
from .lowering import JitCall, Step, lowers

F32 = (DType.F32,)
_HOST = ("projection, the five-point conic fit, tile binning and the sort run on the host "
         "through the oracle (a handful of splats of branchy scalar code)")


def _kernel():
    return compile_kernel(*_splat_kernels.source())


def _count(a, size: int) -> int:
    """N from the prepare buffer's length (the verifier's C4, re-checked at run time)."""
    rest = size - _splat_raster.prep_len(1, a.max_list_entries, a.width, a.height,
                                         a.tile_size)
    if rest < 0 or rest % 15:
        raise ValueError(f"GaussianSplatRasterize: prep holds {size} floats, no prepare-buffer "
                         f"length for {a.width}x{a.height} tile {a.tile_size} list "
                         f"{a.max_list_entries}")
    return 1 + rest // 15


def _raster_consts(a, n: int) -> tuple:
    return (n, a.width, a.height, a.tile_size, a.max_list_entries,
            np.float32(a.alpha_cutoff), np.float32(a.transmittance_threshold))


@lowers("GaussianSplatRasterize", F32)
def lower_splat_rasterize(node, ins, ctx) -> Step:
    a, kernel = node.attrs, _kernel()
    n = _count(a, int(np.prod(ins[0].dims)))
    consts = _raster_consts(a, n)

    def run(out, prep, meta):
        kernel(out.reshape(-1), prep.reshape(-1), meta.reshape(-1), *consts)
    jit = JitCall(kernel.fn, ("{out}.reshape(-1)", "{0}.reshape(-1)", "{1}.reshape(-1)"),
                  consts)
    return Step(run, [kernel], jit=jit)


def _prepare(a, xs):
    """The packed prepare buffer of the oracle (f32, RLX's layout)."""
    flat = [np.asarray(x, np.float32).reshape(-1) for x in xs]
    p, vals, ranges, cam = _splat_raster.prepare(flat[:6], flat[6], a, np.float32)
    return _splat_bin.pack(p, vals, ranges, cam, a, flat[6][12:15], np.float32)


@lowers("GaussianSplatPrepare", F32, path="host", reason=_HOST)
def lower_splat_prepare(node, ins, ctx) -> Step:
    a = node.attrs

    def run(out, *xs):
        out.reshape(-1)[:] = _prepare(a, xs)
    return Step(run, [], note="host reference")


@lowers("GaussianSplatRender", F32, path="host",
        reason=_HOST + "; the compositing runs the native GaussianSplatRasterize kernel")
def lower_splat_render(node, ins, ctx) -> Step:
    a, kernel = node.attrs, _kernel()
    n = int(np.prod(ins[0].dims)) // 3
    consts = _raster_consts(a, n)

    def run(out, *xs):
        prep = _prepare(a, xs)
        kernel(out.reshape(-1), prep, np.asarray(xs[6], np.float32).reshape(-1), *consts)
    return Step(run, [kernel], note="host prepare, native raster")

