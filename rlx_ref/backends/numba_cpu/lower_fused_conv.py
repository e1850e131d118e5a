"""FusedConvBiasAct on numba-cpu: the Conv kernel (``lower_conv``: 1×1 GEMM, whole-image
GEMM, channels-last blocks or the depthwise loop) writes the output, then one epilogue
pass over it adds the channel bias and the residual and applies the activation.

The epilogue runs per (image, channel) plane, in parallel over planes when large enough,
in the output's dtype and the decomposition's order (``(conv + bias) + residual``, then
the activation), so it adds no rounding the decomposition does not have. Relu, HardSwish
and HardSigmoid (and no activation) are compiled into the loop; any other activation is
applied after it on the host with the oracle's numpy function. A residual that only
broadcasts to the output is materialised first.
"""
from __future__ import annotations

import math

import numpy as np

from ...ops.elementwise import ACTIVATIONS
from ._reduce_geom import is_parallel, pick
from .kernels import compile_kernel
from .lower_conv import lower_conv
from .lowering import FLOATS, Step, lowers

# activation -> the statements mapping ``v`` (constants: z = 0, three, six, half, one)
_ACTS = {
    None: "",
    "Relu": "v = v if v > z else z",
    "HardSwish": "t = v + three\n{i}if t < z:\n{i}    t = z\n{i}elif t > six:\n{i}    t = six\n"
                 "{i}v = v * t / six",
    "HardSigmoid": "v = v / six + half\n{i}if v < z:\n{i}    v = z\n{i}elif v > one:\n"
                   "{i}    v = one",
}
_NAMES = {None: "none", "Relu": "relu", "HardSwish": "hswish", "HardSigmoid": "hsig"}

_EPILOGUE = '''
@njit(cache=True{par})
def epi_{name}{sfx}(out, bias, res, k, planes, c, hw, has_res):
    z, three, six, half, one = k[0], k[1], k[2], k[3], k[4]
    for p in {rng}(planes):
        b = bias[p % c]
        base = p * hw
        if has_res:
            for i in range(hw):
                v = out[base + i] + b + res[base + i]
                {act}
                out[base + i] = v
        else:
            for i in range(hw):
                v = out[base + i] + b
                {act}
                out[base + i] = v
'''


def source() -> tuple[str, str]:
    """(kernel name, Numba source) of the epilogues: one per activation, serial and par."""
    parts = []
    for act, name in _NAMES.items():
        body = _ACTS[act]
        for sfx, rng, par in (("", "range", ""), ("_par", "prange", ", parallel=True")):
            parts.append(_EPILOGUE.format(
                name=name, sfx=sfx, rng=rng, par=par, act=body.format(i=" " * 16)))
    parts.append("conv_epilogue = epi_none\n")      # the module's named entry
    return "conv_epilogue", "\n".join(parts)


@lowers("FusedConvBiasAct", FLOATS,
        reason="the conv kernel into the output, then one pass adding bias and residual "
               "and applying the activation in the output's dtype")
def lower_fused_conv(node, ins, ctx) -> Step:
    a = node.attrs
    conv = lower_conv(node, ins[:2], ctx)      # the payload carries Conv's geometry
    dims = tuple(int(d) for d in node.shape.dims)
    planes, c = dims[0] * dims[1], dims[1]
    hw = math.prod(dims[2:])
    native = a.activation in _ACTS
    kernel = compile_kernel(*source())
    fn = pick(kernel, "epi_" + _NAMES[a.activation if native else None],
              is_parallel(planes * hw), "fused.conv_epilogue")
    host_act = None if native else ACTIVATIONS[a.activation][1]
    dt = node.shape.dtype.np
    k = np.array([0.0, 3.0, 6.0, 0.5, 1.0], dt)
    none = np.zeros(1, dt)

    def run(out, x, w, bias, *residual):
        conv.fn(out, x, w)
        if out.size == 0:
            return
        has_res = bool(residual)
        res = none
        if has_res:
            res = np.ascontiguousarray(np.broadcast_to(residual[0], dims), dt).reshape(-1)
        fn(out.reshape(-1), np.ascontiguousarray(bias, dt), res, k, planes, c, hw, has_res)
        if host_act is not None:
            out[...] = host_act(out)
    return Step(run, conv.kernels + [kernel])
