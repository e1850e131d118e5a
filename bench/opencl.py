"""Benchmarks of the op list on the OpenCL backend (PoCL on this machine) beside numba-cpu,
numpy and onnxruntime, in one process; plus launch overhead and program build times.
Writes docs/benchmarks/opencl.{md,json,svg}.

    python bench/opencl.py [--quick] [--only NAME,...] [--budget SECONDS] [--device P:D]

Two OpenCL columns: ``opencl`` is a whole ``run`` (inputs uploaded, outputs read back:
what a caller with host arrays pays); ``opencl-dev`` repeats the run on inputs already on
the device (``rerun``: kernel time plus enqueue overhead, what a GPU user compares).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from op_cases import op_list  # noqa: E402
from ops import runners, timeit  # noqa: E402
from svgplot import bar_chart  # noqa: E402

SYSTEMS = ("opencl-dev", "opencl", "numba-cpu", "numpy", "onnxruntime")
PEERS = ("numpy", "onnxruntime")


def opencl_runners(graph, feeds, device):
    from rlx_ref.backends.registry import get_backend

    b = get_backend(f"opencl:{device}" if device else "opencl")
    exe = b.compile(graph)
    exe.run(feeds)
    return {"opencl": lambda: exe.run(feeds), "opencl-dev": exe.rerun}, exe


def _build_script(n_ops: int) -> str:
    return ("import time, numpy as np\nimport rlx_ref\n"
            "from rlx_ref.backends.registry import get_backend\n"
            "b = get_backend(%r)\n"
            "g = rlx_ref.Graph('g50'); x = g.input('x', [256]); y = x\n"
            "ops = ['exp', 'neg', 'tanh', 'sigmoid', 'relu']\n"
            "for i in range(%d):\n"
            "    y = g.reduce(y, 'Max', [0]) if i %% 10 == 9 else (\n"
            "        g.add(y, x) if i %% 2 else getattr(g, ops[i %% 5])(y))\n"
            "    y = g.add(y, x) if i %% 10 == 9 else y\n"
            "g.set_outputs([y])\n"
            "from rlx_ref.runtime.options import CompileOptions, FusionOptions\n"
            "o = CompileOptions(fusion_opts=FusionOptions(enable=False))\n"
            "t = time.perf_counter(); e = b.compile(g, o)\n"
            "e.run({'x': np.ones(256, np.float32)})\n"
            "print(time.perf_counter() - t, len(e.kernel_sources()))\n")


def build_times(device: str | None, n_ops: int = 50) -> dict:
    """Compile + first run of a 50-op graph (fusion off: 50 nodes) in a fresh process, with
    empty PyOpenCL and PoCL caches (cold) and again with them filled (cached)."""
    spec = f"opencl:{device}" if device else "opencl"
    code = _build_script(n_ops) % (spec, n_ops)
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "PYOPENCL_CACHE_DIR": d, "POCL_CACHE_DIR": d + "/pocl",
               "XDG_CACHE_HOME": d}
        res = []
        for _ in range(2):
            p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                               text=True)
            if p.returncode:
                return {"error": p.stderr.strip().splitlines()[-1]}
            res.append(p.stdout.split())
    return {"cold_build_s": float(res[0][0]), "cached_build_s": float(res[1][0]),
            "kernels": int(res[1][1])}


def launch_overhead(device: str | None, budget: float) -> dict:
    """Per-kernel cost on the queue: 100 one-op kernels on 16 floats (fusion off), run on
    device-resident inputs with one finish; and one tiny op's full run (upload, kernel,
    read-back)."""
    from op_cases import tiny_graph

    from rlx_ref.backends.registry import get_backend
    from rlx_ref.runtime.options import CompileOptions, FusionOptions

    b = get_backend(f"opencl:{device}" if device else "opencl")
    g, feeds, _ = tiny_graph(100)
    exe = b.compile(g, CompileOptions(fusion_opts=FusionOptions(enable=False)))
    exe.run(feeds)
    per_op = timeit(exe.rerun, budget) / 100
    g1, feeds1, _ = tiny_graph(1)
    one = b.compile(g1)
    return {"per_kernel_us": per_op * 1e6,
            "tiny_op_run_us": timeit(lambda: one.run(feeds1), budget) * 1e6}


def device_label(device: str | None) -> str:
    from rlx_ref.backends.registry import get_backend

    b = get_backend(f"opencl:{device}" if device else "opencl")
    info = b._device()[0]
    import pyopencl as cl

    plat = cl.get_platforms()[info.index[0]]
    return f"{info.name} on {plat.version.strip()}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="tiny sizes (smoke run)")
    ap.add_argument("--only", help="comma-separated op names")
    ap.add_argument("--budget", type=float, default=6.0, help="seconds per system per op")
    ap.add_argument("--device", help="OpenCL device P:D (default: the backend's choice)")
    ap.add_argument("--out", default="docs/benchmarks/opencl")
    a = ap.parse_args()
    rows = {}
    for name, build in op_list(a.quick):
        if a.only and name not in a.only.split(","):
            continue
        graph, feeds, peers = build()
        fns = {k: v for k, v in runners(graph, feeds, peers).items() if k in SYSTEMS}
        try:
            ocl, _ = opencl_runners(graph, feeds, a.device)
            fns.update(ocl)
        except Exception as e:  # noqa: BLE001 - a failing op is reported, the rest still run
            print(f"{name}: opencl failed: {type(e).__name__}: {e}", file=sys.stderr)
        times = {s: timeit(fns[s], a.budget) for s in SYSTEMS if s in fns}
        rows[name] = times
        shown = "  ".join(f"{s} {t * 1e3:.3f}ms" if t else f"{s} –" for s, t in times.items())
        print(f"{name:<30} {shown}", flush=True)
    build = build_times(a.device)
    build.update(launch_overhead(a.device, a.budget))
    write(rows, build, device_label(a.device), a)


def write(rows: dict, build: dict, label: str, a) -> None:
    lines = ["<!-- generated by bench/opencl.py: do not edit -->",
             "# Op benchmarks: OpenCL", "",
             f"Medians in ms, one process, {platform.machine()}, {os.cpu_count()} cores, "
             f"OpenCL device: {label}{' (quick sizes)' if a.quick else ''}. "
             "`opencl` includes uploading inputs and reading outputs back; `opencl-dev` "
             "reruns on device-resident inputs. `×peer` = opencl-dev / fastest of numpy "
             "and onnxruntime (below 1 is faster).", "",
             "| op | " + " | ".join(SYSTEMS) + " | ×peer |", "|---" * (len(SYSTEMS) + 2) + "|"]
    ratios = {}
    for name, t in rows.items():
        peers = [t[p] for p in PEERS if t.get(p)]
        best = min(peers) if peers else None
        dev = t.get("opencl-dev")
        ratios[name] = {s: (t[s] / best if t.get(s) and best else None) for s in SYSTEMS}
        cells = [f"{t[s] * 1e3:.3g}" if t.get(s) else "–" for s in SYSTEMS]
        tail = f" {dev / best:.2f} |" if dev and best else " – |"
        lines.append(f"| {name} | " + " | ".join(cells) + " |" + tail)
    if "per_kernel_us" in build:
        lines += ["", f"Launch overhead: {build['per_kernel_us']:.3g} µs per kernel (100 "
                      "one-op kernels on 16 floats, fusion off, one queue finish per run); "
                      f"one tiny op's whole run (upload, kernel, read-back): "
                      f"{build['tiny_op_run_us']:.3g} µs."]
    if "cold_build_s" in build:
        lines += ["", f"Program build of a 50-op graph (fusion off, {build['kernels']} "
                      f"distinct kernels) in a fresh process: {build['cold_build_s']:.2f} s "
                      f"with empty caches, {build['cached_build_s']:.2f} s cached."]
    else:
        lines += ["", f"Program build failed: {build.get('error')}"]
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps(
        {"device": label, "ms": {k: {s: (v * 1e3 if v else None) for s, v in t.items()}
                                 for k, t in rows.items()}, "build": build}, indent=1) + "\n")
    out.with_suffix(".svg").write_text(bar_chart(ratios, SYSTEMS,
                                                 "time / fastest peer (log scale)"))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
