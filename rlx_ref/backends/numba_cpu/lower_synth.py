"""Lowering of the weight-synthesis kinds (ops/synth): SynthMatMul, SynthMatMulBackward and
SynthReconstruct.

The weight is never built: each kernel reads `codebook[indices[j, kb]]` in its inner loop
(as RLX's), sums in f64 and rounds once into the output. The host checks the indices
against the codebook first, with the oracle's error.
"""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType
from ...ops.synth import weight
from .kernels import compile_kernel
from .lowering import Step, lowers

FLOATS = (DType.F32, DType.F64)
_ONE = "sums in f64, rounded once into the output"

SOURCE = '''
_KJ = dict(cache=True, error_model="numpy", nogil=True)


@njit(**_KJ)
def synth_mm(out, x, idx, cb, m, n, kb, ed):
    for i in range(m):
        for j in range(n):
            acc = 0.0
            for b in range(kb):
                e = np.int64(idx[j, b])
                for t in range(ed):
                    acc += np.float64(x[i, b * ed + t]) * np.float64(cb[e, t])
            out[i, j] = acc


@njit(**_KJ)
def synth_dx(out, up, idx, cb, m, n, kb, ed):
    for i in range(m):
        for b in range(kb):
            for t in range(ed):
                acc = 0.0
                for j in range(n):
                    acc += np.float64(up[i, j]) * np.float64(cb[np.int64(idx[j, b]), t])
                out[i, b * ed + t] = acc


@njit(**_KJ)
def synth_dcb(out, x, up, idx, m, n, kb, ed, ne):
    acc = np.zeros((ne, ed))
    for j in range(n):
        for b in range(kb):
            e = np.int64(idx[j, b])
            for t in range(ed):
                s = 0.0
                for i in range(m):
                    s += np.float64(up[i, j]) * np.float64(x[i, b * ed + t])
                acc[e, t] += s
    for e in range(ne):
        for t in range(ed):
            out[e, t] = acc[e, t]


@njit(**_KJ)
def synth_rec(out, idx, cb, n, kb, ed):
    for j in range(n):
        for b in range(kb):
            e = np.int64(idx[j, b])
            for t in range(ed):
                out[j, b * ed + t] = cb[e, t]
'''


def _kernel():
    return compile_kernel("synth_mm", SOURCE)


def _c(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a)


def _check(kind: str, idx: np.ndarray, cb: np.ndarray, cid: str = "C4") -> None:
    """The oracle's index check (an index past the codebook is an OpError)."""
    if idx.size and int(idx.max()) >= cb.shape[0]:
        weight(kind, idx, cb, cid)


@lowers("SynthMatMul", FLOATS, reason=_ONE)
def lower_synth_mm(node, ins, ctx) -> Step:
    kernel = _kernel()
    fn = kernel.get("synth_mm")

    def run(out, x, idx, cb):
        _check("SynthMatMul", idx, cb)
        (m, n), (kb, ed) = out.shape, (idx.shape[1], cb.shape[1])
        if out.size:
            fn(out, _c(x), _c(idx), _c(cb), m, n, kb, ed)
    return Step(run, [kernel])


@lowers("SynthMatMulBackward", FLOATS, reason=_ONE)
def lower_synth_bwd(node, ins, ctx) -> Step:
    kernel = _kernel()
    dx = node.attrs.wrt == "Dx"
    fn = kernel.get("synth_dx" if dx else "synth_dcb")

    def run(out, x, idx, cb, up):
        _check("SynthMatMulBackward", idx, cb, "C5")
        (m, n), (kb, ed) = up.shape, (idx.shape[1], cb.shape[1])
        if dx:
            if out.size:
                fn(out, _c(up), _c(idx), _c(cb), m, n, kb, ed)
        elif out.size:
            fn(out, _c(x), _c(up), _c(idx), m, n, kb, ed, cb.shape[0])
    return Step(run, [kernel])


@lowers("SynthReconstruct", FLOATS)
def lower_synth_rec(node, ins, ctx) -> Step:
    kernel = _kernel()
    fn = kernel.get("synth_rec")

    def run(out, idx, cb):
        _check("SynthReconstruct", idx, cb)
        if out.size:
            fn(out, _c(idx), _c(cb), idx.shape[0], idx.shape[1], cb.shape[1])
    return Step(run, [kernel])
