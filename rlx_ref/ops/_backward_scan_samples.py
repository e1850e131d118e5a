"""Samples of ScanBackward / ScanBackwardXs, with body_vjp graphs written out by hand.

Each body_vjp is the gradient of a small forward body (the one rlx_ref's ``grad`` would
build, up to node order); trajectories are the forward Scan's own values, computed here
with numpy in the same order, so checkpoint recomputation agrees with the saved rows.
"""
from __future__ import annotations

import numpy as np

from ..ir.dtype import DType
from ..ir.shape import Shape
from ._control_bodies import binary, make_body
from .backward_scan import SEED, ScanBackwardAttrs, ScanBackwardXsAttrs
from .control import ScanAttrs, scan_kept_steps
from .opdef import Sample

F, D = DType.F32, DType.F64
VJP_NAMES = ["carry", "a", "b", SEED]


def cumsum_vjp(dt=F, n=3):
    """Gradient of ``c + x``: (c, x, d) -> (d, d)."""
    s = Shape([n], dt)
    return make_body("cumsum_vjp", [s, s, s], lambda g, c, x, d: [d, d],
                     names=["carry", "x", SEED])


def fma_body(dt=F, n=3):
    """The forward body ``c·a_t + b_t`` (two per-step operands)."""
    s = Shape([n], dt)
    return make_body("fma", [s, s, s], lambda g, c, a, b: binary(g, "Add",
                                                               binary(g, "Mul", c, a), b))


def fma_vjp(dt=F, n=3):
    """Gradient of ``c·a + b``: (c, a, b, d) -> (d·a, d·c, d)."""
    s = Shape([n], dt)
    return make_body("fma_vjp", [s] * 4, lambda g, c, a, b, d: [
        binary(g, "Mul", d, a), binary(g, "Mul", d, c), d], names=VJP_NAMES)


def square_vjp(dt=F):
    """Gradient of ``c·c`` on a 0-d carry: (c, d) -> d·(c + c)."""
    s = Shape([], dt)
    return make_body("square_vjp", [s, s], lambda g, c, d: binary(
        g, "Mul", d, binary(g, "Add", c, c)), names=["carry", SEED])


def fma_forward(init, a, b):
    """Every carry of the fma Scan: row t is the carry after step t+1."""
    out, c = [], init
    for t in range(len(a)):
        c = c * a[t] + b[t]
        out.append(c)
    return np.stack(out) if out else np.zeros((0,) + init.shape, init.dtype)


def fma_backward(init, a, b, up, length, k=0, save=True):
    """(dinit, da, db) of the fma Scan by the walk the ops define, in the same order."""
    full = fma_forward(init, a, b)
    carries = [init] + list(full[:-1])
    rows = {t: r for r, t in enumerate(scan_kept_steps(ScanAttrs(None, length, save, 0, 2,
                                                                  k)))}
    d = np.zeros_like(init) if save else up
    da, db = np.zeros_like(a), np.zeros_like(b)
    for t in reversed(range(length)):
        if save and t in rows:
            d = d + up[rows[t]]
        da[t], db[t] = d * carries[t], d
        d = d * a[t]
    return d, da, db


def _fma_case(rng, length, k=0, save=True, dt=np.float32):
    """Inputs (init, trajectory, upstream, a, b) of the fma Scan, dyadic where f32."""
    def draw(*shape):
        v = rng.standard_normal(shape)
        return (v if dt == np.float64 else np.round(v * 4) / 4).astype(dt)
    init, a, b = draw(3), draw(length, 3), draw(length, 3)
    full = fma_forward(init, a, b)
    keep = scan_kept_steps(ScanAttrs(None, length, True, 0, 2, k))
    traj = full[keep]
    up = draw(*traj.shape) if save else draw(3)
    return (init, traj, up, a, b), fma_backward(init, a, b, up, length, k, save)


def scan_backward_samples(rng):
    x = np.arange(12, dtype=np.float32).reshape(4, 3) / 4
    init = np.array([1, 0, -1], np.float32)
    traj = init + np.cumsum(x, 0)
    up = np.array([[1, -2, 0.5], [0.25, 0, 1], [-1, 1, 2], [3, 0.5, -0.25]], np.float32)
    cum = ScanBackwardAttrs(cumsum_vjp(), 4, True, 1, 0, None)
    cum_final = ScanBackwardAttrs(cumsum_vjp(), 4, False, 1, 0, None)
    fma = ScanBackwardAttrs(fma_vjp(), 5, True, 2, 0, None)
    fma_k = ScanBackwardAttrs(fma_vjp(), 5, True, 2, 2, fma_body())
    fma_k7 = ScanBackwardAttrs(fma_vjp(), 7, True, 2, 3, fma_body())
    fma_kl = ScanBackwardAttrs(fma_vjp(), 5, True, 2, 5, None)
    one = ScanBackwardAttrs(fma_vjp(), 1, False, 2, 0, None)
    e3 = np.zeros((0, 3), np.float32)
    c0 = np.float32(1.5)
    sq = np.array([c0 * c0, (c0 * c0) ** 2, (c0 * c0) ** 4], np.float32)
    f64_in, f64_out = _fma_case(rng, 4, dt=np.float64)
    samples = [
        Sample((init, traj, up, x), cum, tags=("trajectory",), expect=up[::-1].sum(0)),
        Sample((init, traj, up[0], x), cum_final, expect=up[0]),
        Sample((init, e3, e3, e3), ScanBackwardAttrs(cumsum_vjp(), 0, True, 1, 0, None),
               tags=("empty",), expect=np.zeros(3, np.float32)),
        Sample((init, e3, up[1], e3), ScanBackwardAttrs(cumsum_vjp(), 0, False, 1, 0, None),
               tags=("empty",), expect=up[1]),
        Sample((c0, sq, np.float32(1)), ScanBackwardAttrs(square_vjp(), 3, False, 0, 0,
                                                          None),
               tags=("0-d", "no-xs"), expect=np.float32(8 * c0 ** 7)),
        Sample(f64_in, ScanBackwardAttrs(fma_vjp(D), 4, True, 2, 0, None), tags=("f64",),
               expect=f64_out[0]),
    ]
    for attrs, length, k, save, tags in (
            (fma, 5, 0, True, ("xs",)), (fma_k, 5, 2, True, ("checkpoints",)),
            (fma_k7, 7, 3, True, ("checkpoints", "prime-length")),
            (fma_kl, 5, 5, True, ("checkpoints",)), (one, 1, 0, False, ("size-1",))):
        ins, outs = _fma_case(rng, length, k, save)
        samples.append(Sample(ins, attrs, tags=tags, expect=outs[0]))
    return samples


def scan_backward_xs_samples(rng):
    x = np.arange(12, dtype=np.float32).reshape(4, 3) / 4
    init = np.array([1, 0, -1], np.float32)
    traj = init + np.cumsum(x, 0)
    up = np.array([[1, -2, 0.5], [0.25, 0, 1], [-1, 1, 2], [3, 0.5, -0.25]], np.float32)
    suffix = np.cumsum(up[::-1], 0)[::-1]          # dx_t = Σ_{s >= t} upstream[s]
    e3 = np.zeros((0, 3), np.float32)

    def fma(length, idx, k=0, save=True, fwd=None):
        return ScanBackwardXsAttrs(fma_vjp(), length, save, 2, idx, k, fwd)
    samples = [
        Sample((init, traj, up, x), ScanBackwardXsAttrs(cumsum_vjp(), 4, True, 1, 0, 0, None),
               tags=("trajectory",), expect=suffix),
        Sample((init, traj, up[0], x), ScanBackwardXsAttrs(cumsum_vjp(), 4, False, 1, 0, 0,
                                                            None),
               expect=np.broadcast_to(up[0], (4, 3))),
        Sample((init, e3, e3, e3), ScanBackwardXsAttrs(cumsum_vjp(), 0, True, 1, 0, 0, None),
               tags=("empty",), expect=e3),
    ]
    for attrs, length, k, save, idx, tags in (
            (fma(5, 0), 5, 0, True, 0, ("xs",)), (fma(5, 1), 5, 0, True, 1, ("xs",)),
            (fma(5, 0, 2, fwd=fma_body()), 5, 2, True, 0, ("checkpoints",)),
            (fma(7, 1, 3, fwd=fma_body()), 7, 3, True, 1, ("checkpoints", "prime-length")),
            (fma(1, 0, save=False), 1, 0, False, 0, ("size-1",))):
        ins, outs = _fma_case(rng, length, k, save)
        samples.append(Sample(ins, attrs, tags=tags, expect=outs[1 + idx]))
    f64_in, f64_out = _fma_case(rng, 4, dt=np.float64)
    samples.append(Sample(f64_in, ScanBackwardXsAttrs(fma_vjp(D), 4, True, 2, 0, 0, None),
                          tags=("f64",), expect=f64_out[1]))
    return samples
