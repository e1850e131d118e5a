"""The fake-quantization formulas, written once against a math namespace ``m``.

They follow RLX's CPU kernels (``rlx-cpu/src/thunk/ops/quant.rs``: ``exec_fake_quantize``,
``exec_fake_quantize_backward`` and the three LSQ kernels) operation by operation, in f32
as RLX. ``NUMPY`` evaluates them for the references;
``passes/decompose_fake_quant`` evaluates the same functions on graph nodes, so a
decomposition computes what the op computes. Operands support ``+ - * /`` and unary minus
(Python numbers are constants of the operands' dtype); ``m`` supplies the rest.
"""
from __future__ import annotations

import numpy as np

from ._backward_math import NumpyMath
from .elementwise import ieee_max
from .opdef import want

Q_MAX = {8: 127.0, 4: 7.0, 2: 1.0}      # RLX's q_max(bits); other widths panic there
SCALE_FLOOR = float(np.float32(1e-12))   # RLX's `.max(1e-12)` guard (an f32 literal)

_CMP = {"Lt": np.less, "Le": np.less_equal, "Gt": np.greater, "Ge": np.greater_equal}


class FqNumpy(NumpyMath):
    """``m`` for the references: each call is the numpy code of the kind a decomposition
    emits (Compare, Binary Max, Reduce Max)."""

    @staticmethod
    def cmp(op: str, a, b):
        return _CMP[op](a, b)

    @staticmethod
    def maximum(a, b):
        """Binary Max: a NaN operand yields the other (Rust's ``f32::max``)."""
        return ieee_max(a, np.asarray(b, a.dtype))

    @staticmethod
    def where(cond, a, b, like=None):
        """Where; Python numbers take the dtype of the array beside them (or ``like``)."""
        arrays = [v for v in (a, b, like) if isinstance(v, (np.ndarray, np.generic))]
        return np.where(cond, a, b).astype(arrays[0].dtype, copy=False)

    @staticmethod
    def reduce_max(t, axes):
        """Reduce Max over ``axes``, kept as size 1: a NaN never wins, an empty slice is
        -inf."""
        if not axes:
            return t
        return np.fmax.reduce(t, axis=tuple(sorted(axes)), keepdims=True, initial=-np.inf)


NUMPY = FqNumpy()


# ── the channel layout (RLX's `quant_layout`) ─────────────────────────────────

def other_axes(rank: int, axis) -> tuple:
    """The axes a per-channel statistic reduces: all of them when ``axis`` is None."""
    return tuple(i for i in range(rank) if i != axis)


def channels(dims, axis) -> int:
    """C: the channel count (1 per-tensor)."""
    return 1 if axis is None else dims[axis]


def along(m, vec, x, axis):
    """A per-channel vector (any shape holding C elements) shaped to broadcast against x;
    re-checks C at run time, where dynamic dims kept the verifier from it."""
    dims = m.dims(x)
    c = channels(dims, axis)
    n = int(np.prod(m.dims(vec), dtype=np.int64))
    want(n == c, f"(C5) the per-channel operand holds {n} elements, expected {c} "
                 f"(x.dims[axis], or 1 per-tensor)")
    return m.reshape(vec, tuple(d if i == axis else 1 for i, d in enumerate(dims)))


# ── the forward pieces ───────────────────────────────────────────────────────

def batch_scale(m, x, axis, q: float):
    """``max(max|x| / q_max, 1e-12)`` per channel: NaN never wins the max, and the floor
    keeps an all-zero (or all-NaN, or empty) channel's scale positive."""
    mx = m.reduce_max(m.act("Abs", x), other_axes(len(m.dims(x)), axis))
    return m.maximum(mx / q, SCALE_FLOOR)


def floored(m, s):
    """``s.max(1e-12)``: a NaN, zero or negative stored scale becomes 1e-12."""
    return m.maximum(s, SCALE_FLOOR)


def ema_scale(m, x, state, axis, q: float, decay: float):
    """The blended EMA scale: the state where it is > 0 blends with the batch scale
    (``decay·state + (1 - decay)·cur``), a cold (<= 0) state takes the batch scale."""
    cur = batch_scale(m, x, axis, q)
    st = along(m, state, x, axis)
    keep = float(np.float32(1) - np.float32(decay))    # RLX's f32 `1.0 - decay`
    blend = st * decay + cur * keep
    return m.where(m.cmp("Le", st, 0.0), cur, blend)


def round_away(m, v):
    """Round half away from zero (Rust's ``f32::round``), exactly: ``⌊|v|⌋`` plus one when
    the fraction is >= 1/2, with v's sign; ±0 and NaN pass through."""
    a = m.act("Abs", v)
    f = m.act("Floor", a)
    r = m.where(m.cmp("Ge", a - f, 0.5), f + 1.0, f)
    return m.where(m.cmp("Lt", v, 0.0), -r, m.where(m.cmp("Gt", v, 0.0), r, v))


def clamp_q(m, r, q: float):
    """Rust's ``clamp(-q, q)``: NaN stays NaN (unlike Clamp's NaN-ignoring max/min)."""
    return m.where(m.cmp("Lt", r, -q), -q, m.where(m.cmp("Gt", r, q), q, r))


def quantize(m, x, s, q: float):
    """``clamp(round(x / s), -q, q) · s``."""
    return clamp_q(m, round_away(m, x / s), q) * s


# ── the kinds ────────────────────────────────────────────────────────────────

def fake_quantize(m, a, x, state=None):
    """FakeQuantize's output for scale mode PerBatch, EMA or Fixed."""
    q = Q_MAX[a.bits]
    mode = a.scale_mode if isinstance(a.scale_mode, str) else a.scale_mode[0]
    if mode == "PerBatch":
        s = batch_scale(m, x, a.axis, q)
    elif mode == "Fixed":
        s = floored(m, along(m, state, x, a.axis))
    else:
        s = ema_scale(m, x, state, a.axis, q, a.scale_mode[1].decay)
    return quantize(m, x, s, q)


def fake_quantize_backward(m, a, x, dy):
    """dx under the STE ``a.ste``, with the per-batch scale recomputed from x."""
    if a.ste == "Identity":
        return dy
    q = Q_MAX[a.bits]
    s = batch_scale(m, x, a.axis, q)
    if a.ste == "Tanh":
        t = m.act("Tanh", x / s)
        return dy * (1.0 - t * t)
    bound = s * q
    if a.ste == "ClippedIdentity":
        return m.where(m.cmp("Le", m.act("Abs", x), bound), dy, 0.0)
    return dy * m.maximum(1.0 - m.act("Abs", x / bound), 0.0)      # HardTanh


def lsq(m, a, x, scale):
    """FakeQuantizeLSQ: the forward with the learned scale, floored at 1e-12."""
    q = Q_MAX[a.bits]
    return quantize(m, x, floored(m, along(m, scale, x, a.axis)), q)


def _lsq_z(m, a, x, scale):
    return x / floored(m, along(m, scale, x, a.axis))


def lsq_backward_x(m, a, x, scale, dy):
    """dy where ``|x/s| <= q_max`` (a NaN quotient counts as outside), else 0."""
    z = _lsq_z(m, a, x, scale)
    return m.where(m.cmp("Le", m.act("Abs", z), Q_MAX[a.bits]), dy, 0.0)


def lsq_backward_scale(m, a, x, scale, dy):
    """``Σ ψ(x/s)·dy`` per channel, ψ(z) = round(z) - z inside ``|z| <= q_max``, else
    ``+q_max`` for z > 0 and ``-q_max`` otherwise (NaN included); shaped as scale."""
    q = Q_MAX[a.bits]
    z = _lsq_z(m, a, x, scale)
    outside = m.where(m.cmp("Gt", z, 0.0), q, -q, like=z)
    psi = m.where(m.cmp("Le", m.act("Abs", z), q), round_away(m, z) - z, outside)
    total = m.sum(psi * dy, other_axes(len(m.dims(x)), a.axis))
    return m.reshape(total, m.dims(scale))
