"""The calibration micro-benchmarks: small graphs compiled and run through a backend's own
``compile`` / ``run`` path, so what they time is what a user's graph pays there.

Probes (each the fastest of a few timed rounds after a warm-up, the rounds a short pause
apart: the minimum is the run least disturbed by other work on the machine):

- round trip (``one``): one 4×4 MatMul graph: a run's fixed cost plus one launch;
- dispatch (``chain``): a chain of 16 such MatMuls (MatMul is a fusion boundary, so each is
  its own launch), run in turn with the one-MatMul graph: the median of (chain − one) over
  the pairs, / 15 per launch, RLX's ``dispatch_overhead_ns``, which so holds a launch's
  fixed cost and a tiny kernel's run. Pairs, not two minimums: a round trip that varies
  from run to run (PoCL's, 40 to 180 µs on a busy host) would swamp 15 launches of 1 µs;
- sgemm large (256×256×256) and small (8×32×64), GFLOP/s of the run less the round trip;
- memory bandwidth: an Add over 2^20 f32 (three 4 MiB streams), bytes per ns (= GB/s),
  and the same over 2^14 f32 (``stream_small``, a size no backend splits over threads).

Load skew: on a busy machine a kernel split over threads (numba-cpu's prange kernels,
OpenBLAS) waits for a thread the OS has descheduled, a scheduler tick or more, so a large
probe can take milliseconds instead of microseconds while a small one does not. An idle
device never runs a large problem at a lower rate per unit of work than a small one
(sgemm), nor streams a large array at under 1/``SKEW`` of a small one's rate; a large probe
below that is load. Such a probe is measured again after a pause (``RETRIES`` times); if
it stays low, its rate is raised to that bound and ``measure`` names it under ``"skew"``
(the cache then does not keep the numbers: a later process measures again).
"""
from __future__ import annotations

import time

import numpy as np

LARGE = (256, 256, 256)
SMALL = (8, 32, 64)                  # 16384 < RLX's 32768 small/large crossover
CHAIN = 16
STREAM = 1 << 20
STREAM_SMALL = 1 << 14               # below every backend's parallel threshold
BUDGET_S = 0.05                      # per round of a probe, after the warm-up
REPS = 5                             # timed runs per round
ROUNDS = 3
PAUSE_S = 0.01                       # between rounds: lets a descheduled thread run
RETRIES = 3                          # more measurements of a probe that looks skewed
RETRY_PAUSE_S = 0.1
SKEW = 8.0                           # large stream below small / SKEW: load, not memory


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


def best_ns(exe, inputs: dict, budget_s: float = BUDGET_S, reps: int = REPS,
            rounds: int = ROUNDS) -> float:
    """The fastest of ``rounds`` rounds of up to ``reps`` timed runs (a round stops early
    when ``budget_s`` runs out), the rounds ``PAUSE_S`` apart."""
    exe.run(inputs)                                   # warm-up: first-run planning, JIT
    best = float("inf")
    for r in range(rounds):
        if r:
            time.sleep(PAUSE_S)
        spent = 0.0
        for _ in range(reps):
            t0 = time.perf_counter_ns()
            exe.run(inputs)
            dt = time.perf_counter_ns() - t0
            best, spent = min(best, dt), spent + dt * 1e-9
            if spent > budget_s:
                break
    return float(best)


def extra_ns(base, more, budget_s: float = BUDGET_S, reps: int = REPS,
             rounds: int = ROUNDS) -> float:
    """The median over back-to-back pairs of (``more`` run − ``base`` run), each an
    (executable, inputs) pair, after a warm-up of both."""
    base[0].run(base[1])
    more[0].run(more[1])
    diffs = []
    for r in range(rounds):
        if r:
            time.sleep(PAUSE_S)
        spent = 0.0
        for _ in range(reps):
            t0 = time.perf_counter_ns()
            base[0].run(base[1])
            t1 = time.perf_counter_ns()
            more[0].run(more[1])
            t2 = time.perf_counter_ns()
            diffs.append((t2 - t1) - (t1 - t0))
            spent += (t2 - t0) * 1e-9
            if spent > budget_s:
                break
    return float(sorted(diffs)[len(diffs) // 2])


def _compiled(backend, graph, params: dict):
    exe = backend.compile(graph)
    for name, value in params.items():
        exe.set_param(name, value)
    return exe


def _matmul_probe(backend, m: int, k: int, n: int, chain: int = 1):
    rng = np.random.default_rng(0)
    w = np.eye(k, n, dtype=np.float32) if chain > 1 else \
        rng.standard_normal((k, n)).astype(np.float32)
    exe = _compiled(backend, _matmul_graph(m, k, n, chain), {"w": w})
    return exe, {"x": rng.standard_normal((m, k)).astype(np.float32)}


def _stream_probe(backend, n: int):
    x = np.ones(n, np.float32)
    return _compiled(backend, _stream_graph(n), {}), {"x": x, "y": x}


def probes(backend) -> dict:
    """Probe name → () -> ns: each compiles once, then times ``best_ns`` per call
    (``chain``: ``extra_ns`` of the chain over one MatMul)."""
    made = {"one": lambda: _matmul_probe(backend, 4, 4, 4),
            "chain": lambda: (_matmul_probe(backend, 4, 4, 4),
                              _matmul_probe(backend, 4, 4, 4, CHAIN)),
            "large": lambda: _matmul_probe(backend, *LARGE),
            "small": lambda: _matmul_probe(backend, *SMALL),
            "stream": lambda: _stream_probe(backend, STREAM),
            "stream_small": lambda: _stream_probe(backend, STREAM_SMALL)}

    def timer(name, make):
        cell = []

        def run():
            if not cell:
                cell.append(make())
            return extra_ns(*cell[0]) if name == "chain" else best_ns(*cell[0])
        return run
    return {name: timer(name, make) for name, make in made.items()}


def _rate(work: float, ns: float, one: float) -> float:
    # less the fixed cost of a run, but never below a tenth of the time measured
    return work / max(ns - one, ns * 0.1)


def rates(t: dict) -> dict:
    """The calibration numbers (``Calibration``'s fields) from probe times in ns."""
    one = t["one"]
    return {"sgemm_large_gflops": _rate(2.0 * np.prod(LARGE), t["large"], one),
            "sgemm_small_gflops": _rate(2.0 * np.prod(SMALL), t["small"], one),
            "dispatch_overhead_ns": max(t["chain"] / (CHAIN - 1), 1.0),
            "roundtrip_overhead_ns": float(one),
            "memory_bw_gbps": _rate(3.0 * 4 * STREAM, t["stream"], one)}


def _stream_small_bw(t: dict) -> float:
    return _rate(3.0 * 4 * STREAM_SMALL, t["stream_small"], t["one"])


# large probe → (what it checks, the rate it must reach, how to read it from the rates)
CHECKS = {
    "large": ("sgemm_large_gflops", lambda r, t: r["sgemm_small_gflops"]),
    "stream": ("memory_bw_gbps", lambda r, t: _stream_small_bw(t) / SKEW),
}


def skewed(t: dict) -> dict:
    """Probe name → the rate its time should at least reach, for the large probes whose
    rate is below the bound their small twin sets (load skew)."""
    r = rates(t)
    out = {}
    for probe, (field, bound) in CHECKS.items():
        floor = bound(r, t)
        if r[field] < floor:
            out[probe] = floor
    return out


def measure(backend, timers: dict | None = None) -> dict:
    """The calibration numbers of ``backend`` (a dict of ``Calibration``'s fields, plus
    ``"skew"``: what stayed skewed by load, [] when nothing did). ``timers`` (probe name →
    () -> ns) replaces the probes (tests)."""
    if getattr(backend, "name", "") == "cuda" and backend.emulated:
        raise CalibrationSkipped("the CUDA simulator runs kernels in Python: its timings "
                                 "say nothing about a GPU")
    timers = timers or probes(backend)
    t = {name: float(run()) for name, run in timers.items()}
    for _ in range(RETRIES):
        bad = skewed(t)
        if not bad:
            break
        time.sleep(RETRY_PAUSE_S)
        for probe in bad:                          # keep the fastest of every measurement
            t[probe] = min(t[probe], float(timers[probe]()))
    numbers = rates(t)
    skew = []
    for probe, floor in skewed(t).items():
        field = CHECKS[probe][0]
        skew.append(f"{field} measured {numbers[field]:.4g}, raised to {floor:.4g} "
                    f"(the rate of the small probe)")
        numbers[field] = floor
    numbers = {k: float(v) for k, v in numbers.items()}
    numbers["skew"] = skew
    return numbers
