"""One configuration of the training benchmark, run in a process of its own so that thread
counts are set before any library starts its pools (``bench/train_step.py`` starts it).

    python bench/train_worker.py --threads 1 --rounds 15 --out r.json [--memory]

Per model, every system's first two losses are checked against rlx_ref numba-cpu's, then
the systems are timed in rounds (a different order each round, so load from other
processes falls on all of them alike). ``--memory`` adds each system's step memory and a
per-kind profile of the numba-cpu step.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

LOSS_RTOL = 1e-5          # f32: the three systems sum in different orders


def set_threads(n: int) -> None:
    """Hold every library to ``n`` threads (0: leave the defaults); before their imports."""
    if not n:
        return
    for var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "MKL_NUM_THREADS", "POCL_CPU_MAX_CU_NUM"):
        os.environ[var] = str(n)
    if n == 1:
        os.environ["XLA_FLAGS"] = ("--xla_cpu_multi_thread_eigen=false "
                                   "intra_op_parallelism_threads=1")


def opencl_usable() -> bool:
    from rlx_ref.backends.base import BackendUnavailable
    from rlx_ref.backends.registry import get_backend

    try:
        return get_backend("opencl").availability()[0]
    except (BackendUnavailable, ImportError):     # no pyopencl, no usable platform
        return False


def model(name: str, size: dict):
    """(rlx forward graph, params, batch, peer kwargs) of the benchmark's ``name``."""
    from rlx_ref.training import models

    if name == "mlp":
        g, params = models.mlp_classifier(batch=size["batch"], hidden=size["hidden"])
        x, y = models.spirals(size["batch"], seed=1)
        return g, params, {"x": x, "labels": y}, {}
    g, params = models.transformer_lm(**size)
    tokens, targets = models.counting_corpus(size["batch"], size["seq"], size["vocab"], seed=1)
    return g, params, {"tokens": tokens, "targets": targets}, \
        {"heads": size["heads"], "layers": size["layers"]}


def systems(graph, params, peer_kw: dict, kind: str, lr: float, devices: list) -> dict:
    """system name -> step(batch) -> loss, for rlx_ref on ``devices`` and the peers."""
    from train_peers import peers
    from rlx_ref.training import Adam, TrainState, backend_runner, train_step

    opt = Adam(lr=lr)
    step_graph = train_step(graph, list(params), opt)
    out = {}
    for dev in devices:
        out[f"rlx {dev}"] = TrainState(step_graph, params, opt, backend_runner(dev)).step
    out.update(peers(kind, params, lr, **peer_kw))
    return out


def check_losses(steps: dict, batch: dict) -> dict:
    """Steps 1 and 2 on every system (same start, same batch): losses within f32 tolerance
    of the first system's; raises when one is not. Returns the losses and step-1 times."""
    res = {}
    for name, step in steps.items():
        t = time.perf_counter()
        first = float(step(batch))
        res[name] = {"first_step_s": time.perf_counter() - t, "loss1": first,
                     "loss2": float(step(batch))}
    ref = next(iter(res.values()))
    for name, r in res.items():
        for k in ("loss1", "loss2"):
            if not math.isclose(r[k], ref[k], rel_tol=LOSS_RTOL):
                raise SystemExit(f"{name}: {k} {r[k]!r} differs from {ref[k]!r}")
    return res


def time_rounds(steps: dict, batch: dict, rounds: int) -> dict:
    """Per system: seconds per step of each round (a round times ``inner`` steps, enough
    for ~20 ms, so tiny steps are not timer-bound)."""
    inner = {}
    for name, step in steps.items():
        step(batch)
        t = time.perf_counter()
        step(batch)
        inner[name] = max(1, math.ceil(0.02 / max(time.perf_counter() - t, 1e-7)))
    names, samples = list(steps), {n: [] for n in steps}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            step, k = steps[name], inner[name]
            t = time.perf_counter()
            for _ in range(k):
                step(batch)
            samples[name].append((time.perf_counter() - t) / k)
    return samples


def summary(xs: list) -> dict:
    q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
    return {"median_ms": statistics.median(xs) * 1e3, "p25_ms": q[0] * 1e3,
            "p75_ms": q[2] * 1e3, "min_ms": min(xs) * 1e3, "n": len(xs)}


def rlx_memory(graph, params, batch, lr: float) -> dict:
    """numba-cpu: the plan's buffers (allocated once, at compile) plus numpy's peak during
    one step (traced: outputs, host temporaries, ``set_param`` copies). Scratch that
    kernels allocate inside ``njit`` (a row's accumulators in reductions, softmax, norms
    and attention: kilobytes) is invisible to tracemalloc and not counted."""
    from rlx_ref.runtime.session import Session
    from rlx_ref.training import Adam, TrainState, train_step

    opt = Adam(lr=lr)
    step_graph = train_step(graph, list(params), opt)
    exe = Session("numba-cpu").compile(step_graph)

    def run(g, inputs, ps):
        for k, v in ps.items():
            exe.set_param(k, v)
        return exe.run(inputs)
    state = TrainState(step_graph, params, opt, run)
    state.step(batch)
    state.step(batch)
    plan = exe._plans[()]
    bases = {}                  # buffers shared by element count are views of one base
    for b in plan.buffer.values():
        base = b if b.base is None else b.base
        bases[id(base)] = base.nbytes
    planned = sum(bases.values())
    tracemalloc.start()
    state.step(batch)
    traced = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"planned_bytes": planned, "traced_peak_bytes": traced,
            "step_bytes": planned + traced, "nodes": len(plan.graph.nodes),
            "steps": len(plan.steps), "distinct_buffers": len(bases),
            "profile": profile_kinds(plan, lambda: state.step(batch))}


def profile_kinds(plan, step, runs: int = 5) -> dict:
    """Seconds per step by op kind: each planned step's call timed (a wrapper per step,
    ~1 µs each, so the kinds add up to a little more than the plain step)."""
    nodes, per = plan.graph.nodes, {}
    saved = plan._ops

    def timed(fn, nid):
        def call(*args):
            t = time.perf_counter()
            r = fn(*args)
            per[nid] = per.get(nid, 0.0) + time.perf_counter() - t
            return r
        return call
    plan._ops = [(timed(fn, nid), get, kind, nid, out) for fn, get, kind, nid, out in saved]
    try:
        t = time.perf_counter()
        for _ in range(runs):
            step()
        total = (time.perf_counter() - t) / runs
    finally:
        plan._ops = saved
    kinds: dict = {}
    for nid, secs in per.items():
        k = kinds.setdefault(nodes[nid].kind, {"ms": 0.0, "nodes": 0})
        k["ms"] += secs / runs * 1e3
        k["nodes"] += 1
    return {"step_ms": total * 1e3, "kinds": dict(sorted(kinds.items(),
                                                        key=lambda kv: -kv[1]["ms"]))}


def torch_memory(step, batch) -> dict:
    """PyTorch: the CPU allocator's events under ``torch.profiler(profile_memory=True)``;
    the peak of their running sum over one step, above the bytes live at its start."""
    from torch.profiler import ProfilerActivity, profile

    step(batch)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step(batch)
    events = sorted((e for e in prof.profiler.kineto_results.events()
                     if e.name() == "[memory]"), key=lambda e: e.start_ns())
    live = peak = 0
    for e in events:
        live += e.nbytes()
        peak = max(peak, live)
    return {"step_bytes": peak, "allocations": sum(e.nbytes() > 0 for e in events)}


def jax_memory(step, batch, inputs) -> dict:
    """JAX: XLA's buffer assignment for the compiled step (temporaries + outputs not
    aliased to the donated params and state)."""
    m = step.jitted.lower(step.state[0], *(batch[k] for k in inputs)).compile() \
        .memory_analysis()
    return {"step_bytes": m.temp_size_in_bytes + m.output_size_in_bytes
            - m.alias_size_in_bytes, "temp_bytes": m.temp_size_in_bytes,
            "output_bytes": m.output_size_in_bytes, "alias_bytes": m.alias_size_in_bytes}


def run_steps(a) -> dict:
    from train_step import LR, sizes

    devices = ["numba-cpu"] + (["opencl"] if a.opencl and opencl_usable() else [])
    out = {"threads": a.threads, "devices": devices, "models": {}}
    for kind, size in sizes(a.quick).items():
        graph, params, batch, peer_kw = model(kind, size)
        steps = systems(graph, params, peer_kw, kind, LR, devices)
        res = {"check": check_losses(steps, batch)}
        res["times"] = {k: summary(v) for k, v in time_rounds(steps, batch,
                                                               a.rounds).items()}
        if a.memory:
            res["memory"] = {"rlx numba-cpu": rlx_memory(graph, params, batch, LR),
                             "params_bytes": sum(v.nbytes for v in params.values())}
            if "pytorch" in steps:
                res["memory"]["pytorch"] = torch_memory(steps["pytorch"], batch)
            if "jax" in steps:
                res["memory"]["jax"] = jax_memory(steps["jax"], batch, tuple(batch))
        out["models"][kind] = res
        print(kind, {k: round(v["median_ms"], 3) for k, v in res["times"].items()},
              flush=True)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=0, help="0: each library's default")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--memory", action="store_true")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (smoke run)")
    ap.add_argument("--no-opencl", dest="opencl", action="store_false")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    set_threads(a.threads)
    sys.path.insert(0, str(Path(__file__).parent))
    res = run_steps(a)
    Path(a.out).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
