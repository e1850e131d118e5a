"""The runtime's choices against measurements: on each of about two dozen graphs, the device
the cost model picks (``fastest_device_for``) against the fastest device measured among
those available here; the per-call overhead of ``GraphDevices.run`` over the executable
it wraps; and the memory plan's arena against the sum of a transformer block's
intermediates. Writes docs/benchmarks/runtime.{md,json}.

    python bench/runtime.py [--budget SECONDS] [--only NAME,...] [--out docs/benchmarks]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import op_cases as oc  # noqa: E402
from ops import timeit  # noqa: E402


def _trained(build, feeds_of):
    """A training model's forward graph, its params and inputs."""
    def make():
        g, params = build()
        return g, feeds_of(), params
    return make


def _graphs() -> list:
    """(name, () -> (graph, feeds, params)): single ops at several sizes, an MLP, a
    transformer block and a scan, small enough that the whole run stays short."""
    from rlx_ref.training.models import counting_corpus, mlp_classifier, transformer_lm

    def op(fn, *a):
        return lambda: fn(*a)[:2] + ({},)
    rng = oc._rng()
    mlp_feeds = {"x": rng.standard_normal((64, 2), oc.F32),
                 "labels": oc.F32(np.eye(3)[rng.integers(0, 3, 64)])}
    tok, tgt = counting_corpus(4, 16, 16, seed=1)
    return [
        ("matmul_64", op(oc.matmul, 64)), ("matmul_256", op(oc.matmul, 256)),
        ("matmul_512", op(oc.matmul, 512)),
        ("gelu_chain_4K", op(oc.gelu_chain, 1 << 12)),
        ("gelu_chain_1M", op(oc.gelu_chain, 1 << 20)),
        ("softmax_64", op(oc.softmax, 64)), ("softmax_512", op(oc.softmax, 512)),
        ("layernorm_64x128", op(oc.layernorm, 64, 128)),
        ("layernorm_1024x256", op(oc.layernorm, 1024, 256)),
        ("sum_64K", op(oc.total_sum, 1 << 16)), ("sum_4M", op(oc.total_sum, 1 << 22)),
        ("attention_64", op(oc.attention, 64, False)),
        ("attention_256", op(oc.attention, 256, False)),
        ("attention_causal_128", op(oc.attention, 128, True)),
        ("conv2d_1x8x16x16_k3", op(oc.conv2d, 1, 8, 16, 8)),
        ("gather_2000x64", op(oc.gather, 2000, 64, 256)),
        ("cumsum_128", op(oc.cumsum, 128)), ("cumsum_1024", op(oc.cumsum, 1024)),
        ("scan_rnn_20x32", op(oc.rnn_scan, 20, 32)),
        ("tiny_graph_10", op(oc.tiny_graph, 10)), ("tiny_graph_100", op(oc.tiny_graph, 100)),
        ("mlp", _trained(mlp_classifier, lambda: mlp_feeds)),
        ("transformer_block", _trained(lambda: transformer_lm(4, 16, 16, 32, 2, 1),
                                       lambda: {"tokens": tok, "targets": tgt})),
    ]


def measure(graph, feeds, params, labels, budget) -> tuple:
    """(pick, the labels the cost model ranks, the pick when a policy names every device,
    {label: median seconds or None}) for one graph."""
    from rlx_ref.runtime.device_cost import fastest_device_for, ranked_candidates
    from rlx_ref.runtime.graph_devices import GraphDevices
    from rlx_ref.runtime.policy import DevicePolicy

    gd = GraphDevices(graph)
    for k, v in params.items():
        gd.set_param(k, v)
    times = {}
    for label in labels:
        try:
            exe = gd.compile(label)
            exe.run(feeds)              # first run: lazy kernel loads, arena first touch
            times[label] = timeit(lambda: exe.run(feeds), budget)
        except Exception as e:          # a device that cannot run it: recorded, not fatal
            print(f"  {label}: {type(e).__name__}: {str(e)[:120]}", file=sys.stderr)
            times[label] = None
    ranked = [d.label for d in ranked_candidates(graph)]
    named = fastest_device_for(graph, DevicePolicy.only(labels)).label
    return fastest_device_for(graph).label, ranked, named, times


def score(name, pick, ranked, times, named=None) -> dict:
    """One table row: the fastest device the cost model ranks (the oracle is ranked only
    when a policy names it), the fastest of all, the pick's time over each, and the pick
    of a policy that names every device (``named``) against the fastest of all."""
    ok = {k: v for k, v in times.items() if v is not None}
    best_all = min(ok, key=ok.get) if ok else None
    pool = {k: v for k, v in ok.items() if k in ranked}
    best = min(pool, key=pool.get) if pool else None
    ratio = ok[pick] / ok[best] if best and pick in ok else None
    ratio_all = ok[pick] / ok[best_all] if best_all and pick in ok else None
    named_ratio = ok[named] / ok[best_all] if named in ok and best_all else None
    return {"graph": name, "pick": pick, "ranked": ranked, "best": best,
            "best_all": best_all, "times_s": times, "pick_over_best": ratio,
            "pick_over_best_all": ratio_all, "named_pick": named,
            "named_over_best_all": named_ratio}


def dispatch_overhead(blocks: int = 40, per: int = 200) -> dict:
    """Median per-call seconds of ``GraphDevices.run("cpu", ...)`` and of the executable's
    own ``run`` on a one-node graph, interleaved block by block."""
    import rlx_ref
    from rlx_ref.runtime.graph_devices import GraphDevices

    g = rlx_ref.Graph("one")
    g.set_outputs([g.relu(g.input("x", [4]))])
    feeds = {"x": np.arange(4, dtype=oc.F32)}
    gd = GraphDevices(g)
    exe = gd.compile("cpu")
    wrapped, direct = [], []
    for _ in range(blocks):
        for fn, out in ((lambda: gd.run("cpu", feeds), wrapped),
                        (lambda: exe.run(feeds), direct)):
            t = time.perf_counter()
            for _ in range(per):
                fn()
            out.append((time.perf_counter() - t) / per)
    w, d = statistics.median(wrapped), statistics.median(direct)
    return {"graph_devices_run_s": w, "executable_run_s": d, "overhead_s": w - d}


def arena(graph, params) -> dict:
    """The numba-cpu memory plan of ``graph`` (the transformer block) as numbers."""
    from rlx_ref.backends.registry import get_backend

    exe = get_backend("numba-cpu").compile(graph)
    return exe.memory_plans()[0].to_dict()


def load_note(r: dict) -> str:
    """What the machine's load means for these numbers (said only when it was loaded)."""
    (a, b), cpus = r["load"], r["cpus"]
    text = f"Load average {a} at the start and {b} at the end, on {cpus} CPUs."
    if max(a, b) <= cpus:
        return text
    return text + (" The machine was oversubscribed: a parallel numba-cpu kernel (OpenMP) "
                   "waits for threads the OS has descheduled, so runs that cross a "
                   "parallel threshold take tens of ms instead of tens of µs. The "
                   "calibration measures a stalled probe again and bounds what stays "
                   "stalled (warnings below), but the timed runs are not: timings and "
                   "picks here say more about the load than about the devices.")


def calibrations(labels) -> dict:
    """The calibration each pick was made from, per device (None: not calibrated)."""
    from rlx_ref.runtime.calibration import calibration_for

    out = {}
    for label in labels:
        cal = calibration_for(label)
        out[label] = None if cal is None else {k: v for k, v in cal.to_json().items()
                                               if isinstance(v, float)}
    return out


def caught(said, log) -> list:
    """The calibration warnings in ``log`` (and ``said`` stops recording)."""
    from rlx_ref.runtime.calibration import CalibrationWarning

    said.__exit__(None, None, None)
    for w in log:
        if not issubclass(w.category, CalibrationWarning):
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return [str(w.message) for w in log if issubclass(w.category, CalibrationWarning)]


def machine() -> str:
    import numba

    try:
        sys.path.insert(0, str(Path(__file__).parent))
        from opencl import device_label
        cl = device_label(None)
    except Exception as e:              # no OpenCL: said in the line
        cl = f"no OpenCL ({type(e).__name__})"
    return (f"{platform.processor() or platform.machine()}, {platform.system()} "
            f"{platform.release()}; Python {platform.python_version()}, numpy "
            f"{np.__version__}, numba {numba.__version__}, OpenBLAS core type "
            f"{os.environ.get('OPENBLAS_CORETYPE') or 'auto-detected'}; OpenCL: {cl}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=float, default=0.25, help="seconds per timing")
    ap.add_argument("--only", default="")
    ap.add_argument("--out", default="docs/benchmarks")
    a = ap.parse_args()
    from rlx_ref.runtime.calibration import CalibrationWarning
    from rlx_ref.runtime.devices import available_devices

    labels = [d.label for d in available_devices()]
    only = set(filter(None, a.only.split(",")))
    rows, start, load0 = [], time.perf_counter(), os.getloadavg()[0]
    block = None
    said = warnings.catch_warnings(record=True)
    log = said.__enter__()              # the calibration warnings go into the page
    warnings.simplefilter("always", CalibrationWarning)
    for name, make in _graphs():
        if only and name not in only:
            continue
        graph, feeds, params = make()
        if name == "transformer_block":
            block = (graph, params)
        pick, ranked, named, times = measure(graph, feeds, params, labels, a.budget)
        rows.append(score(name, pick, ranked, times, named))
        print(f"{name}: pick {pick}, best {rows[-1]['best']}, ratio "
              f"{rows[-1]['pick_over_best']}", file=sys.stderr)
    result = {"machine": machine(), "devices": labels, "rows": rows,
              "calibration": calibrations(labels), "calibration_warnings": caught(said, log),
              "dispatch": dispatch_overhead(),
              "arena": arena(*block) if block else None,
              "wall_s": round(time.perf_counter() - start, 1),
              "load": [round(load0, 2), round(os.getloadavg()[0], 2)], "cpus": os.cpu_count()}
    result["note"] = load_note(result)
    write(result, Path(a.out))


def write(r: dict, out: Path) -> None:
    from runtime_report import markdown

    out.mkdir(parents=True, exist_ok=True)
    (out / "runtime.json").write_text(json.dumps(r, indent=1) + "\n")
    text = markdown(r)
    (out / "runtime.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
