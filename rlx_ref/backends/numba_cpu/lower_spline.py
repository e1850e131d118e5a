"""Lowering of the KAN spline kinds (ops/spline): SplineActivation and its backward kinds.

x is read as [rows, C]; the grid constants come from the oracle (``ops.spline.grid``, f32
as RLX) and every basis sum runs in f64, rounded once into the output.
"""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType
from ...ops.spline import grid
from .kernels import compile_kernel
from .lowering import Step, lowers

FLOATS = (DType.F32, DType.F64)
_ONE = "basis sums in f64, rounded once into the output"

SOURCE = '''
_KJ = dict(cache=True, error_model="numpy", nogil=True)


@njit(**_KJ)
def spline_fwd(out, x, coeff, centers, inv_h, rows, c, g):
    for r in range(rows):
        for j in range(c):
            v = np.float64(x[r * c + j])
            acc = 0.0
            for k in range(g):
                z = (v - centers[k]) * inv_h
                acc += np.float64(coeff[j * g + k]) * math.exp(-(z * z))
            out[r * c + j] = acc


@njit(**_KJ)
def spline_bwd_x(out, x, coeff, up, centers, inv_h, rows, c, g):
    for r in range(rows):
        for j in range(c):
            v = np.float64(x[r * c + j])
            acc = 0.0
            for k in range(g):
                z = (v - centers[k]) * inv_h
                acc += np.float64(coeff[j * g + k]) * (-2.0 * inv_h * z) * math.exp(-(z * z))
            out[r * c + j] = np.float64(up[r * c + j]) * acc


@njit(**_KJ)
def spline_bwd_coeff(out, x, up, centers, inv_h, rows, c, g):
    acc = np.zeros(c * g)
    for r in range(rows):
        for j in range(c):
            v = np.float64(x[r * c + j])
            u = np.float64(up[r * c + j])
            for k in range(g):
                z = (v - centers[k]) * inv_h
                acc[j * g + k] += u * math.exp(-(z * z))
    for i in range(c * g):
        out[i] = acc[i]
'''


def _kernel():
    return compile_kernel("spline_fwd", SOURCE)


def _flat(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).reshape(-1)


def _geometry(node, ins):
    centers, inv_h = grid(node.attrs)
    c = int(ins[0].dims[-1])
    return np.ascontiguousarray(centers), inv_h, c, int(node.attrs.num_basis)


def _rows(x: np.ndarray, c: int) -> int:
    return x.size // c if c else 0


def _step(node, ins, name: str) -> Step:
    """The kernel ``name`` over flattened operands (x first), then the grid's geometry."""
    kernel = _kernel()
    fn = kernel.get(name)
    centers, inv_h, c, g = _geometry(node, ins)

    def run(out, x, *rest):
        if out.size:
            fn(out.reshape(-1), _flat(x), *(_flat(r) for r in rest), centers, inv_h,
               _rows(x, c), c, g)
    return Step(run, [kernel])


@lowers("SplineActivation", FLOATS, reason=_ONE)
def lower_spline(node, ins, ctx) -> Step:
    return _step(node, ins, "spline_fwd")


@lowers("SplineActivationBackwardX", FLOATS, reason=_ONE)
def lower_spline_bwd_x(node, ins, ctx) -> Step:
    return _step(node, ins, "spline_bwd_x")


@lowers("SplineActivationBackwardCoeff", FLOATS, reason=_ONE)
def lower_spline_bwd_coeff(node, ins, ctx) -> Step:
    return _step(node, ins, "spline_bwd_coeff")
