"""The calibration micro-benchmarks: small graphs compiled and run through a backend's own
``compile`` / ``run`` path, so what they time is what a user's graph pays there.

Probes (each a fraction of the budget; the fastest of a few timed runs after a warm-up, as
the least disturbed by other work on the machine):

- round trip: one 4×4 MatMul graph: a run's fixed cost plus one launch;
- dispatch: a chain of 16 such MatMuls (MatMul is a fusion boundary, so each is its own
  launch): (chain − one) / 15 per launch, RLX's ``dispatch_overhead_ns``;
- sgemm large (256×256×256) and small (8×32×64), GFLOP/s of the run less the round trip;
- memory bandwidth: an Add over 2^20 f32 (three 4 MiB streams), bytes per ns (= GB/s).
"""
from __future__ import annotations

import time

import numpy as np

LARGE = (256, 256, 256)
SMALL = (8, 32, 64)                  # 16384 < RLX's 32768 small/large crossover
CHAIN = 16
STREAM = 1 << 20
BUDGET_S = 0.05                      # per probe, after the warm-up
REPS = 5


class CalibrationSkipped(Exception):
    """A backend whose timings would say nothing about hardware (a simulator)."""


def _matmul_graph(m: int, k: int, n: int, chain: int = 1):
    from ..ir.graph import Graph

    g = Graph(f"calib_mm{chain}")
    y, w = g.input("x", [m, k]), g.param("w", [k, n])
    for _ in range(chain):
        y = g.matmul(y, w)
    g.set_outputs([y])
    return g


def _stream_graph(n: int):
    from ..ir.graph import Graph

    g = Graph("calib_bw")
    g.set_outputs([g.add(g.input("x", [n]), g.input("y", [n]))])
    return g


def best_ns(exe, inputs: dict, budget_s: float = BUDGET_S, reps: int = REPS) -> float:
    """The fastest of up to ``reps`` timed runs (fewer when ``budget_s`` runs out)."""
    exe.run(inputs)                                   # warm-up: first-run planning, JIT
    best, spent = float("inf"), 0.0
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        exe.run(inputs)
        dt = time.perf_counter_ns() - t0
        best, spent = min(best, dt), spent + dt * 1e-9
        if spent > budget_s:
            break
    return float(best)


def _compiled(backend, graph, params: dict):
    exe = backend.compile(graph)
    for name, value in params.items():
        exe.set_param(name, value)
    return exe


def _time_matmul(backend, m: int, k: int, n: int, chain: int = 1) -> float:
    rng = np.random.default_rng(0)
    w = np.eye(k, n, dtype=np.float32) if chain > 1 else \
        rng.standard_normal((k, n)).astype(np.float32)
    exe = _compiled(backend, _matmul_graph(m, k, n, chain), {"w": w})
    return best_ns(exe, {"x": rng.standard_normal((m, k)).astype(np.float32)})


def measure(backend) -> dict:
    """The calibration numbers of ``backend`` (a dict of ``Calibration``'s fields)."""
    if getattr(backend, "name", "") == "cuda" and backend.emulated:
        raise CalibrationSkipped("the CUDA simulator runs kernels in Python: its timings "
                                 "say nothing about a GPU")
    one = _time_matmul(backend, 4, 4, 4)
    chain = _time_matmul(backend, 4, 4, 4, CHAIN)
    dispatch = max((chain - one) / (CHAIN - 1), 1.0)

    def rate(work: float, ns: float) -> float:
        # less the fixed cost of a run, but never below a tenth of the time measured
        return work / max(ns - one, ns * 0.1)

    large = rate(2.0 * np.prod(LARGE), _time_matmul(backend, *LARGE))
    small = rate(2.0 * np.prod(SMALL), _time_matmul(backend, *SMALL))
    x = np.ones(STREAM, np.float32)
    bw_exe = _compiled(backend, _stream_graph(STREAM), {})
    bw = rate(3.0 * 4 * STREAM, best_ns(bw_exe, {"x": x, "y": x}))
    return {"sgemm_large_gflops": float(large), "sgemm_small_gflops": float(small),
            "dispatch_overhead_ns": float(dispatch), "roundtrip_overhead_ns": float(one),
            "memory_bw_gbps": float(bw)}
