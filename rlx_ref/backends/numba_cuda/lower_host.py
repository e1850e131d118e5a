"""The host path: kinds without a CUDA kernel yet run their registry reference on the host.

The step copies its inputs to the host, runs the op's numpy reference (the oracle's own
code) and copies the result back into the node's device buffer. It is declared per kind
with ``path="host"`` and the reason, so the dispatch and coverage reports show it; it is
never a silent fallback. This file is imported last: every kind the kernel families did
not register is declared here.
"""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType
from ...ops._spd_checks import KINDS as SPD_KINDS
from ...ops.opdef import RefCtx, all_opdefs, get
from .device import device_to_host_layout, host_to_device_layout
from .lowering import LOWERINGS, Step, lowers

ANY = tuple(DType)
_WHY = {
    "Custom": "user-registered custom ops have only a reference implementation",
    "DenseSolve": "LU with pivoting is sequential per matrix; small systems run on the host",
    "BatchedDenseSolve": "LU with pivoting is sequential per matrix; small systems run on "
                         "the host",
}
_SPD_WHY = ("f64 eigendecompositions of tiny SPD matrices run LAPACK on the host, as "
            "RLX's GPU backends host-fall-back its SPD kinds to rlx_cpu::spd")
_WHY.update({k: _SPD_WHY for k in SPD_KINDS})
DEFAULT_WHY = "no CUDA kernel yet; the registry reference runs on the host between copies"


def host_step(node, ins, note: str = "host reference") -> Step:
    """A step running ``node``'s registry reference on host copies of its inputs."""
    ref, shape = get(node.kind).reference, node.shape
    dims, dt = tuple(shape.dims), shape.dtype
    metas = [(s.dtype, tuple(s.dims)) for s in ins]
    ctx = RefCtx(node.attrs, shape, node=node)

    def run(out, *xs):
        host = [device_to_host_layout(x.copy_to_host(), d, sh) for x, (d, sh) in zip(xs, metas)]
        y = np.asarray(ref(ctx, *host))
        if y.shape != dims:
            raise ValueError(f"{node.kind} reference returned shape {list(y.shape)}, "
                             f"declared {list(dims)}")
        if y.size:
            out.copy_to_device(host_to_device_layout(y, dt))
    return Step(run, [], note=note)


def _register_rest() -> None:
    for d in all_opdefs():
        if d.kind in LOWERINGS:
            continue
        lowers(d.kind, ANY, path="host", reason=_WHY.get(d.kind, DEFAULT_WHY))(
            lambda node, ins, ctx: host_step(node, ins))


_register_rest()
