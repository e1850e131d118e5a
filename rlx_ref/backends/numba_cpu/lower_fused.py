"""The fused composites and FKL region kinds (ops/fused, ops/region_batch) on numba-cpu.

FusedSwiGLU, GatedResidual and FusedResidualRmsNorm have native kernels
(``_fused_kernels``: f64 arithmetic, one rounding); FusedMatMulResidual runs the MatMul
kernel into the output and adds the residual in place (no product buffer). FusedConvBiasAct
runs natively in ``lower_fused_conv``. The rest run through their RLX
decompositions (passes/unfuse_composites): the pipeline rewrites them into MatMul, Conv,
Binary, LayerNorm/RmsNorm, Attention, Rope, ElementwiseRegion, Concat and the other
primitive kinds this backend lowers.
"""
from __future__ import annotations

import math

import numpy as np

from ...passes.unfuse_composites import CLAIM_DTYPES, REASON
from . import _fused_kernels
from ._reduce_geom import finish, is_parallel, kernel_out, pick, shadow
from .kernels import compile_kernel
from .lower_linalg import lower_matmul
from .lowering import TABLE, Step, lowers

NATIVE = ("FusedSwiGLU", "GatedResidual", "FusedResidualRmsNorm", "FusedMatMulResidual",
          "FusedConvBiasAct")    # the last: lower_fused_conv
_ONE_ROUNDING = "computed in f64 and rounded once into the output"

for _kind, _dtypes in CLAIM_DTYPES.items():
    if _kind not in NATIVE:
        TABLE.decomposed((_kind,), _dtypes, REASON)


def _kernel(base: str, total: int):
    kernel = compile_kernel(*_fused_kernels.source())
    return kernel, pick(kernel, base, is_parallel(total), f"fused.{base}")


def _dims(shape) -> list:
    return [int(d) for d in shape.dims]


@lowers("FusedSwiGLU", CLAIM_DTYPES["FusedSwiGLU"], reason=_ONE_ROUNDING)
def lower_swiglu(node, ins, ctx) -> Step:
    dims = _dims(ins[0])
    n, rows = dims[-1] // 2, math.prod(dims[:-1])
    kernel, fn = _kernel("swiglu", rows * n)
    gate_first = bool(node.attrs.gate_first)

    def run(out, packed):
        buf, rounded = kernel_out(out)
        if buf.size:
            fn(buf, shadow(packed), rows, n, gate_first)
        finish(out, buf, rounded)
    return Step(run, [kernel])


def gate_rows(x_dims, gate_dims) -> np.ndarray:
    """For each row of x (all axes but the last), the gate row it reads (broadcast)."""
    lead = tuple(gate_dims[:-1])
    ids = np.arange(math.prod(lead), dtype=np.int64).reshape(lead)
    return np.ascontiguousarray(np.broadcast_to(ids, tuple(x_dims[:-1]))).reshape(-1)


@lowers("GatedResidual", CLAIM_DTYPES["GatedResidual"], reason=_ONE_ROUNDING)
def lower_gated_residual(node, ins, ctx) -> Step:
    dims = _dims(ins[0])
    d, rows = dims[-1], math.prod(dims[:-1])
    kernel, fn = _kernel("gated", rows * d)
    table = gate_rows(dims, _dims(ins[2]))

    def run(out, x, y, gate):
        buf, rounded = kernel_out(out)
        if buf.size:
            fn(buf, shadow(x), shadow(y), shadow(gate), table, rows, d)
        finish(out, buf, rounded)
    return Step(run, [kernel])


@lowers("FusedResidualRmsNorm", CLAIM_DTYPES["FusedResidualRmsNorm"], reason=_ONE_ROUNDING)
def lower_residual_rms(node, ins, ctx) -> Step:
    dims = _dims(ins[0])
    d, rows = dims[-1], math.prod(dims[:-1])
    kernel, fn = _kernel("residual_rms", rows * d)
    has_bias, eps = bool(node.attrs.has_bias), float(node.attrs.eps)

    def run(out, x, res, *rest):
        bias, gamma, beta = rest if has_bias else (rest[0][:0], *rest)
        buf, rounded = kernel_out(out)
        if buf.size:
            fn(buf, shadow(x), shadow(res), shadow(np.asarray(bias)), shadow(gamma),
               shadow(beta), rows, d, eps, has_bias)
        finish(out, buf, rounded)
    return Step(run, [kernel])


@lowers("FusedMatMulResidual", CLAIM_DTYPES["FusedMatMulResidual"],
        reason="the MatMul kernel writes the output, the residual is added in place (the "
               "decomposition's two roundings)")
def lower_matmul_residual(node, ins, ctx) -> Step:
    product = lower_matmul(node, ins[:2], ctx)

    def run(out, a, b, res):
        product.fn(out, a, b)
        np.add(out, res, out=out)        # residual has the product's shape (C3)
    return Step(run, product.kernels)
