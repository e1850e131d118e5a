"""Benchmarks of the issue's op list on numba-cpu beside the oracle, numpy, PyTorch (CPU)
and onnxruntime, in one process. Prints medians and ratios to the fastest peer and writes
docs/benchmarks/ops.{md,json,svg}.

    python bench/ops.py [--quick] [--only NAME,...] [--budget SECONDS]

Peers are optional: a missing one (torch, onnxruntime+onnx, jax) is reported as "–".
Install them with `pip install torch==2.13.0 onnxruntime onnx jax` (torch from this
machine's disk). `×peer` compares with numpy, torch and onnxruntime (the issue's peers);
`×jax` with jax.jit (the RNN scan's peer is `jax.lax.scan`).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from op_cases import op_list  # noqa: E402
from svgplot import bar_chart  # noqa: E402

SYSTEMS = ("numba-cpu", "oracle", "numpy", "torch", "onnxruntime", "jax")
PEERS = ("numpy", "torch", "onnxruntime")


def timeit(fn, budget: float, min_runs: int = 3, max_runs: int = 15) -> float | None:
    """Median seconds of ``fn()`` after one warm-up; None if one call exceeds ``budget``."""
    t = time.perf_counter()
    fn()
    first = time.perf_counter() - t
    if first > budget:
        return None
    runs = []
    deadline = time.perf_counter() + budget
    while len(runs) < max_runs and (len(runs) < min_runs or time.perf_counter() < deadline):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def _onnx_session(spec, feeds):
    import onnxruntime as ort
    from onnx import TensorProto, helper

    kind, names, attrs = spec
    tp = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64}
    ins = [helper.make_tensor_value_info(n, tp[feeds[n].dtype], list(feeds[n].shape))
           for n in names]
    if kind == "GeluChain":
        nodes = [helper.make_node("Mul", ["x", "w"], ["m"]),
                 helper.make_node("Add", ["m", "b"], ["a"]),
                 helper.make_node("Gelu", ["a"], ["y"], approximate="tanh")]
    else:
        nodes = [helper.make_node(kind, names, ["y"], **attrs)]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph(nodes, "b", ins, [out]),
                              opset_imports=[helper.make_opsetid("", 20)])
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    return lambda: sess.run(None, {n: feeds[n] for n in names})


def runners(graph, feeds, peers):
    """system → zero-argument callable (absent systems omitted)."""
    import rlx_ref
    from rlx_ref.backends.registry import get_backend

    out = {}
    nb = get_backend("numba-cpu")
    if not nb.unsupported_nodes(graph):
        exe = nb.compile(graph)
        out["numba-cpu"] = lambda: exe.run(feeds)
    interp = rlx_ref.Interpreter(graph)
    out["oracle"] = lambda: interp.run(feeds)
    if "numpy" in peers:
        out["numpy"] = lambda: peers["numpy"](feeds)
    if "torch" in peers:
        try:
            import torch

            tf = {k: torch.from_numpy(v) for k, v in feeds.items()}
            fn = peers["torch"]

            def run_torch():
                with torch.no_grad():
                    return fn(torch, tf)
            out["torch"] = run_torch
        except ImportError:
            pass
    if "onnx" in peers:
        try:
            out["onnxruntime"] = _onnx_session(peers["onnx"], feeds)
        except ImportError:
            pass
    if "jax" in peers:
        try:
            out["jax"] = _jax_runner(peers["jax"], feeds)
        except ImportError:
            pass
    return out


def _jax_runner(fn, feeds):
    """``fn(jax, feeds)`` under ``jax.jit`` on device-resident inputs, waited for."""
    import jax

    jf = jax.jit(lambda f: fn(jax, f))
    dev = {k: jax.device_put(v) for k, v in feeds.items()}
    # device_put returns before the copy ends: a copy left running in jax's thread would
    # take a core from whatever is timed next
    jax.block_until_ready(dev)
    return lambda: jax.block_until_ready(jf(dev))


def compile_times() -> dict:
    """Cold (empty kernel cache) and warm (second process) compile+first run of an MLP."""
    code = ("import time, numpy as np\nt0 = time.perf_counter()\nimport rlx_ref\n"
            "from rlx_ref.backends.registry import get_backend\n"
            "g = rlx_ref.Graph('mlp'); x = g.input('x', [32, 64]); w = g.param('w', [64, 64])\n"
            "b = g.param('b', [64]); h = g.relu(g.add(g.matmul(x, w), b))\n"
            "g.set_outputs([g.softmax(g.matmul(h, w), -1)])\n"
            "t = time.perf_counter(); e = get_backend('numba-cpu').compile(g)\n"
            "e.set_param('w', np.ones((64, 64), np.float32))\n"
            "e.set_param('b', np.ones(64, np.float32))\n"
            "e.run({'x': np.ones((32, 64), np.float32)})\n"
            "print(time.perf_counter() - t, time.perf_counter() - t0)\n")
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "RLX_REF_CACHE_DIR": d}
        res = []
        for _ in range(2):
            p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                               text=True)
            if p.returncode:
                return {"error": p.stderr.strip().splitlines()[-1]}
            res.append([float(v) for v in p.stdout.split()])
    return {"cold_compile_s": res[0][0], "warm_compile_s": res[1][0],
            "cold_process_s": res[0][1], "warm_process_s": res[1][1]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="tiny sizes (smoke run)")
    ap.add_argument("--only", help="comma-separated op names")
    ap.add_argument("--budget", type=float, default=8.0, help="seconds per system per op")
    ap.add_argument("--out", default="docs/benchmarks/ops")
    a = ap.parse_args()
    rows = {}
    for name, build in op_list(a.quick):
        if a.only and name not in a.only.split(","):
            continue
        graph, feeds, peers = build()
        times = {}
        for system, fn in runners(graph, feeds, peers).items():
            times[system] = timeit(fn, a.budget)
        rows[name] = times
        shown = "  ".join(f"{s} {t * 1e3:.2f}ms" if t else f"{s} –" for s, t in times.items())
        print(f"{name:<30} {shown}", flush=True)
    comp = compile_times()
    write(rows, comp, a)


def write(rows: dict, comp: dict, a) -> None:
    lines = ["<!-- generated by bench/ops.py: do not edit -->", "# Op benchmarks (CPU)", "",
             f"Medians in ms, one process, {platform.processor() or platform.machine()}, "
             f"{os.cpu_count()} cores{' (quick sizes)' if a.quick else ''}. "
             "`×peer` = numba-cpu time / fastest of numpy, torch, onnxruntime; "
             "`×jax` = numba-cpu time / jax.jit (below 1 is faster).", "",
             "| op | " + " | ".join(SYSTEMS) + " | ×peer | ×jax |",
             "|---" * (len(SYSTEMS) + 3) + "|"]
    ratios = {}
    for name, t in rows.items():
        peers = [t[p] for p in PEERS if t.get(p)]
        best = min(peers) if peers else None
        nb = t.get("numba-cpu")
        ratio = nb / best if nb and best else None
        ratios[name] = {s: (t[s] / best if t.get(s) and best else None) for s in SYSTEMS}
        cells = [f"{t[s] * 1e3:.3g}" if t.get(s) else "–" for s in SYSTEMS]
        cells += [f"{r:.2f}" if r else "–"
                  for r in (ratio, nb / t["jax"] if nb and t.get("jax") else None)]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "Compile (numba-cpu, small MLP, fresh process): " +
              ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                        for k, v in comp.items())]
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps({"ms": {k: {s: (v * 1e3 if v else None)
                                                                for s, v in t.items()}
                                                            for k, t in rows.items()},
                                                     "compile": comp}, indent=1) + "\n")
    out.with_suffix(".svg").write_text(bar_chart(ratios, SYSTEMS,
                                                 "time / fastest peer (log scale)"))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
