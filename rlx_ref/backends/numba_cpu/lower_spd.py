"""Lowering of the SPD-manifold kinds (ops/spd, ops/spd_backward): every kind natively, f64
only (as RLX), on the kernels of ``_spd_kernels`` — one eigendecomposition routine
(LAPACK dsyevd through Numba's ``np.linalg.eigh``, reading the lower triangle, eigenvector
signs fixed as the oracle fixes them) and one Daleckii–Krein adjoint shared by all.

The matrices are tiny (covariance descriptors), so each step loops over its batch in one
thread; the work per matrix is a handful of n×n products and one or two eigh calls.
"""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType
from ._spd_kernels import FN, MATFN, spd_kernel
from .lowering import Step, lowers

F64 = (DType.F64,)


def _c(a):
    return np.ascontiguousarray(a, np.float64)


def _step(fname: str, consts=(), pre=None) -> Step:
    """A Step running kernel function ``fname(out, *operands, *consts)``; ``pre`` reshapes
    the operands first when the kernel wants another view of them."""
    kernel = spd_kernel()
    fn = kernel.get(fname)

    def run(out, *ins):
        arrays = [_c(a) for a in ins]
        if pre is not None:
            arrays = pre(arrays)
        fn(out, *arrays, *consts)
    return Step(run, [kernel])


def _eps(node) -> float:
    return float(node.attrs.eps)


@lowers("BiMap", F64)
def lower_bimap(node, ins, ctx) -> Step:
    return _step("bimap")


@lowers("ReEig", F64)
def lower_reeig(node, ins, ctx) -> Step:
    return _step("spectral_packed", (FN["max_eps"], _eps(node)))


@lowers("LogEig", F64)
def lower_logeig(node, ins, ctx) -> Step:
    return _step("spectral_packed", (FN["log_eps"], _eps(node)))


def _flat_bwd(arrays):
    lam, u, dy = arrays
    return [lam, u.reshape(-1), dy.reshape(-1)]


@lowers("ReEigBackward", F64)
def lower_reeig_bwd(node, ins, ctx) -> Step:
    return _step("spectral_bwd", (FN["max_eps"], _eps(node)), _flat_bwd)


@lowers("LogEigBackward", F64)
def lower_logeig_bwd(node, ins, ctx) -> Step:
    return _step("spectral_bwd", (FN["log_eps"], _eps(node)), _flat_bwd)


@lowers("SpdBatchNorm", F64)
def lower_bn(node, ins, ctx) -> Step:
    return _step("bn", (_eps(node),))


@lowers("SpdBatchNormBackwardX", F64)
def lower_bn_x(node, ins, ctx) -> Step:
    return _step("bn_bwd_x", (_eps(node),))


@lowers("SpdBatchNormBackwardG", F64)
def lower_bn_g(node, ins, ctx) -> Step:
    return _step("bn_bwd_g", (_eps(node),))


@lowers("SpdKarcherMean", F64)
def lower_karcher(node, ins, ctx) -> Step:
    a = node.attrs
    return _step("karcher", (False, int(a.iters), float(a.tol)),
                 lambda arr: [arr[0], np.ones(arr[0].shape[0])])


@lowers("SpdKarcherMeanWeighted", F64)
def lower_karcher_weighted(node, ins, ctx) -> Step:
    a = node.attrs

    def weights(arrays):
        x, w = arrays
        s = float(np.sum(w))     # RLX normalizes on the host side of its loop, so do we
        wbar = np.full(len(w), 1.0 / max(len(w), 1)) if abs(s) < 1e-300 else w / s
        return [x, _c(wbar)]
    return _step("karcher", (True, int(a.iters), float(a.tol)), weights)


@lowers("SpdLogMap", F64)
def lower_log_map(node, ins, ctx) -> Step:
    return _step("amap", (FN["log"],))


@lowers("SpdExpMap", F64)
def lower_exp_map(node, ins, ctx) -> Step:
    return _step("amap", (FN["exp"],))


@lowers("SpdParallelTransport", F64)
def lower_transport(node, ins, ctx) -> Step:
    return _step("transport")


@lowers("SpdLogMapBackward", F64)
def lower_log_map_bwd(node, ins, ctx) -> Step:
    return _step("amap_bwd", (FN["log"],))


@lowers("SpdExpMapBackward", F64)
def lower_exp_map_bwd(node, ins, ctx) -> Step:
    return _step("amap_bwd", (FN["exp"],))


@lowers("SpdParallelTransportBackward", F64)
def lower_transport_bwd(node, ins, ctx) -> Step:
    return _step("transport_bwd")


@lowers("SpdMatrixFnBatch", F64)
def lower_matfn(node, ins, ctx) -> Step:
    return _step("matfn_batch", (MATFN[node.attrs.kind],))


@lowers("SpdMatrixFnBatchBackward", F64)
def lower_matfn_bwd(node, ins, ctx) -> Step:
    return _step("matfn_batch_bwd", (MATFN[node.attrs.kind],))
