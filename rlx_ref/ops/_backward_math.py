"""The few operations the backward formulas are written in, evaluated with numpy.

Each backward kind's formula is written once, as a function of its operands and a math
namespace ``m``: operands support ``+ - * /`` and unary minus (Python numbers are
constants of the operands' dtype), and ``m`` supplies the rest. The reference runs the
formula with ``NUMPY`` on arrays; the decompositions (``passes/decompose_backward_norm``)
run the same formula on graph nodes, with a namespace that appends Activation, Compare,
Where, Reduce and Reshape nodes, so a decomposition computes exactly what the op does.
"""
from __future__ import annotations

import math

import numpy as np

from .elementwise import ACTIVATIONS, ieee_min


class NumpyMath:
    """``m`` for the references: every operation is the numpy code of the forward kind
    a decomposition would emit (the Activation table, Reduce Sum, Where, Compare Gt)."""

    @staticmethod
    def act(name: str, x):
        return np.asarray(ACTIVATIONS[name][1](x)).astype(x.dtype, copy=False)

    @staticmethod
    def gt(a, b):
        return np.greater(a, b)

    @staticmethod
    def minimum(a, b):
        """Binary Min: a NaN operand yields the other."""
        return ieee_min(a, np.asarray(b, a.dtype))

    @staticmethod
    def where(cond, a, b):
        return np.where(cond, a, b)

    @staticmethod
    def sum(t, axes):
        """Sum over ``axes``, each kept as size 1 (as Reduce Sum with ``keep_dim``)."""
        return np.sum(t, axis=tuple(sorted(axes)), keepdims=True, dtype=t.dtype)

    @staticmethod
    def mean(t, axes):
        """Sum / count over ``axes``, kept (an empty slice gives NaN, as Reduce Mean)."""
        count = math.prod(t.shape[a] for a in axes)
        return NumpyMath.sum(t, axes) / t.dtype.type(count)

    @staticmethod
    def reshape(t, dims):
        return np.reshape(t, tuple(dims))

    @staticmethod
    def dims(t) -> tuple:
        return np.shape(t)


NUMPY = NumpyMath()


def work_arrays(*arrays):
    """The operands in one arithmetic dtype: f64 if any is f64, else f32 (16-bit floats
    are computed in f32 and the result rounded once, as RLX computes them)."""
    wide = any(np.asarray(a).dtype == np.float64 for a in arrays)
    dt = np.float64 if wide else np.float32
    return [np.asarray(a).astype(dt) for a in arrays]
