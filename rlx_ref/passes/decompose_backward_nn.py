"""Decompositions of RopeBackward, CumsumBackward, GatherBackward and the cross-entropy
kinds into differentiable primitives (so a backend without their kernels runs them, and a
second reverse-mode pass can differentiate through them).

16-bit floats are widened to f32 first and rounded once at the end, as the oracles compute.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.dtype import DType
from ..ir.graph import Graph
from ..ir.shape import Shape
from .decompose import _binary, _reshape, _reverse, _static, _transpose, constant, decomposes

LOW = (DType.F16, DType.BF16)


def widen(g: Graph, x: int) -> int:
    """``x`` in its working dtype: f16/bf16 become f32 (exact), others stay."""
    return g.op("Cast", (x,), to=DType.F32) if g.shape(x).dtype in LOW else x


def narrow_to(g: Graph, x: int, dt: DType) -> int:
    """``x`` rounded once to the node's dtype when it was widened."""
    return g.op("Cast", (x,), to=dt) if g.shape(x).dtype != dt else x


@decomposes("RopeBackward", ("Rope", "Activation"))
def lower_rope_backward(g: Graph, node, ins) -> int | None:
    """Rope of dy with the sin table negated: the inverse rotation (negation is exact)."""
    dy, cos, sin = ins
    a = node.attrs
    neg = g.op("Activation", (sin,), op="Neg")
    return g.op("Rope", (dy, cos, neg), head_dim=a.head_dim, n_rot=a.n_rot, style=a.style)


@decomposes("CumsumBackward", ("Reverse", "Cumsum"))
def lower_cumsum_backward(g: Graph, node, ins) -> int | None:
    """Reverse, scan (same ``exclusive``), reverse back: the sum from the end."""
    (dy,) = ins
    ax = node.attrs.axis % g.shape(dy).rank
    scanned = g.op("Cumsum", (_reverse(g, dy, ax),), axis=ax, exclusive=node.attrs.exclusive)
    return _reverse(g, scanned, ax)


@decomposes("GatherBackward", ("Transpose", "Reshape", "ScatterAdd"))
def lower_gather_backward(g: Graph, node, ins) -> int | None:
    """Bring dy's index dims to the front, flatten them to one row per index, ScatterAdd
    into ``[table.dims[axis], ...other table dims]`` and move that axis back. Rows reach
    each target in row-major order of the index positions, as the oracle adds them."""
    dy, idx = ins
    if not _static(g, ins) or not node.shape.is_static:
        return None
    table = node.shape.dims
    rank, r = len(table), g.shape(idx).rank
    ax = node.attrs.axis % rank
    lead = list(range(ax, ax + r))
    moved = _transpose(g, dy, lead + list(range(ax)) + list(range(ax + r, g.shape(dy).rank)))
    rest = table[:ax] + table[ax + 1:]
    n_idx = math.prod(g.shape(idx).dims)
    rows = _reshape(g, moved, (n_idx,) + rest)
    flat = _reshape(g, idx, (n_idx,))
    summed = g.op("ScatterAdd", (rows, flat), shape=Shape((table[ax],) + rest, node.shape.dtype))
    return _transpose(g, summed, list(range(1, ax + 1)) + [0] + list(range(ax + 1, rank)))


# ── cross-entropy ──────────────────────────────────────────────────────────

def _reduce(g, x, op, keep=False):
    return g.op("Reduce", (x,), op=op, axes=(1,), keep_dim=keep)


def _log_sum_exp(g, x):
    """``[N]``: row max + log Σ exp(x − row max)."""
    m = _reduce(g, x, "Max", keep=True)
    e = g.op("Activation", (_binary(g, "Sub", x, m),), op="Exp")
    log_sum = g.op("Activation", (_reduce(g, e, "Sum"),), op="Log")
    return _binary(g, "Add", _reshape(g, m, (g.shape(x).dims[0],)), log_sum)


def _one_hot(g, labels, n: int, c: int) -> int:
    """``[N, C]`` bool: column == label. Labels compare as f32 (exact for class ids)."""
    lab = labels if g.shape(labels).dtype is DType.F32 else \
        g.op("Cast", (labels,), to=DType.F32)
    lab = _reshape(g, lab, (n, 1))
    classes = constant(g, np.arange(c, dtype=np.float32).reshape(1, c), DType.F32)
    return g.op("Compare", (lab, classes), op="Eq")


_SCE_NOTE = ("row sums run in Reduce's order, not numpy's pairwise one (last-bit "
             "differences in f32); labels are not range-checked after decomposition: an "
             "out-of-range label selects no class")


@decomposes("SoftmaxCrossEntropyWithLogits",
            ("Cast", "Reduce", "Binary", "Activation", "Reshape", "Constant", "Compare",
             "Where"), exact=False, note=_SCE_NOTE)
def lower_sce_labels(g: Graph, node, ins) -> int | None:
    """logsumexp(x) − Σ_c where(c == label, x, 0)."""
    logits, labels = ins
    if not _static(g, ins):
        return None
    x = widen(g, logits)
    n, c = g.shape(x).dims
    zero = constant(g, 0, g.shape(x).dtype)
    picked = _reduce(g, g.op("Where", (_one_hot(g, labels, n, c), x, zero)), "Sum")
    return narrow_to(g, _binary(g, "Sub", _log_sum_exp(g, x), picked), node.shape.dtype)


@decomposes("SoftmaxCrossEntropy", ("Cast", "Reduce", "Binary", "Activation", "Reshape"),
            exact=False, note=_SCE_NOTE.split(";")[0])
def lower_sce_dense(g: Graph, node, ins) -> int | None:
    """logsumexp(x) − Σ_c targets·x (RLX's formula)."""
    logits, targets = ins
    if not _static(g, ins):
        return None
    x, t = widen(g, logits), widen(g, targets)
    dot = _reduce(g, _binary(g, "Mul", t, x), "Sum")
    return narrow_to(g, _binary(g, "Sub", _log_sum_exp(g, x), dot), node.shape.dtype)


@decomposes("SoftmaxCrossEntropyBackward",
            ("Cast", "Softmax", "Binary", "Reshape", "Constant", "Compare"), exact=False,
            note="the Softmax kernel's rounding differs from the oracle's in the last bit; "
                 + _SCE_NOTE.split("; ")[1])
def lower_sce_backward(g: Graph, node, ins) -> int | None:
    """(softmax(x) − one_hot(labels)) · d_loss[:, None]."""
    logits, labels, d_loss = ins
    if not _static(g, ins):
        return None
    x = widen(g, logits)
    n, c = g.shape(x).dims
    hot = g.op("Cast", (_one_hot(g, labels, n, c),), to=g.shape(x).dtype)
    diff = _binary(g, "Sub", g.op("Softmax", (x,), axis=1), hot)
    scaled = _binary(g, "Mul", diff, _reshape(g, widen(g, d_loss), (n, 1)))
    return narrow_to(g, scaled, node.shape.dtype)
