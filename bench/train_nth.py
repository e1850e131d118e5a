"""``nth_order_grad`` of ``sum(x³)`` over N floats, orders 1-3, in a process of its own
(``bench/train_step.py`` starts it with empty kernel caches, so compile times are cold
except for kernels a lower order already built): transform, compile (Session.compile plus
the first run, where kernels are built) and run times on numba-cpu and OpenCL, each
order's result checked against 3x², 6x, 6; jax.grad and torch.autograd run beside.

    python bench/train_nth.py --threads 1 --out n.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from train_worker import opencl_usable, set_threads  # noqa: E402


def _median_run(fn, runs: int) -> float:
    fn()
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def run_nth(a) -> dict:
    """rlx_ref's orders 1-3 on each device, then jax.grad and torch.autograd (run only)."""
    import numpy as np

    import rlx_ref
    from rlx_ref.autodiff import nth_order_grad
    from rlx_ref.runtime.session import Session
    from train_step import NTH_N

    n_el = 1000 if a.quick else NTH_N
    g = rlx_ref.Graph("cube")
    x = g.input("x", [n_el])
    g.set_outputs([g.sum(g.mul(g.mul(x, x), x), [0])])
    xv = np.random.default_rng(0).uniform(-2, 2, n_el).astype(np.float32)
    exact = {1: 3 * xv.astype(np.float64) ** 2, 2: 6 * xv.astype(np.float64),
             3: np.full(n_el, 6.0)}
    devices = ["numba-cpu"] + (["opencl"] if a.opencl and opencl_usable() else [])
    out = {}
    for dev in devices:
        for n in (1, 2, 3):
            t = time.perf_counter()
            gn = nth_order_grad(g, "x", n)
            transform = time.perf_counter() - t
            t = time.perf_counter()
            exe = Session(dev).compile(gn)
            res = exe.run({"x": xv})[0]          # kernels are built at the first run
            compile_s = time.perf_counter() - t
            err = float(np.max(np.abs(res - exact[n])) / np.max(np.abs(exact[n])))
            if err > 1e-6:
                raise SystemExit(f"{dev} order {n}: relative error {err:.2e}")
            out[f"rlx {dev}/{n}"] = {
                "nodes": len(gn.nodes), "transform_ms": transform * 1e3,
                "compile_ms": compile_s * 1e3, "rel_err": err,
                "run_ms": _median_run(lambda: exe.run({"x": xv}), a.runs) * 1e3}
    out.update(_nth_peers(xv, a.runs))
    return out


def _nth_peers(xv, runs: int) -> dict:
    out = {}
    try:
        import jax

        f = lambda v: (v * v * v).sum()                             # noqa: E731
        fs = [jax.grad(f)]
        for _ in range(2):
            fs.append(jax.grad(lambda v, h=fs[-1]: h(v).sum()))
        xj = jax.device_put(xv)
        for n, fn in enumerate(fs, 1):
            jf = jax.jit(fn)
            t = time.perf_counter()
            jax.block_until_ready(jf(xj))
            out[f"jax/{n}"] = {"compile_ms": (time.perf_counter() - t) * 1e3, "run_ms": 1e3 *
                               _median_run(lambda: jax.block_until_ready(jf(xj)), runs)}
    except ImportError:
        pass
    try:
        import torch

        xt = torch.from_numpy(xv)

        def torch_nth(n):
            v = xt.detach().requires_grad_(True)
            y = (v * v * v).sum()
            for k in range(n):
                (y,) = torch.autograd.grad(y, v, create_graph=k < n - 1)
                y = y.sum() if k < n - 1 else y
            return y
        for n in (1, 2, 3):
            out[f"pytorch/{n}"] = {"run_ms": _median_run(lambda: torch_nth(n), runs) * 1e3}
    except ImportError:
        pass
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=0, help="0: each library's default")
    ap.add_argument("--runs", type=int, default=15, help="timed runs per order")
    ap.add_argument("--quick", action="store_true", help="1000 elements (smoke run)")
    ap.add_argument("--no-opencl", dest="opencl", action="store_false")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    set_threads(a.threads)
    Path(a.out).write_text(json.dumps(run_nth(a), indent=1) + "\n")


if __name__ == "__main__":
    main()
