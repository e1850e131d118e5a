"""Training-step benchmark: one step (forward, backward, Adam) of the MLP classifier and a
small transformer LM on rlx_ref (numba-cpu, and OpenCL when usable) beside PyTorch CPU
(autograd + torch.optim.Adam) and JAX (jit of value_and_grad + Adam), with the same
architecture, initial weights and batch; plus ``nth_order_grad`` of sum(x³), orders 1-3.
Writes docs/benchmarks/training.{md,json,svg}.

    python bench/train_step.py [--rounds 15] [--threads 1,0] [--quick] [--no-opencl]

Each configuration (``--threads``: 1 = every library held to one thread, 0 = their
defaults) runs in a process of its own (bench/train_worker.py, bench/train_nth.py).
Peers: ``pip install -e '.[bench]'`` (torch 2.13.0 CPU, jax[cpu]); a missing one is "–".
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from svgplot import bar_chart  # noqa: E402
from train_report import render  # noqa: E402

LR = 1e-3
SIZES = {"mlp": {"batch": 64, "hidden": 32},
         "transformer": {"batch": 8, "seq": 128, "vocab": 256, "d_model": 256, "heads": 4,
                         "layers": 2}}
QUICK = {"mlp": {"batch": 16, "hidden": 8},
         "transformer": {"batch": 2, "seq": 8, "vocab": 16, "d_model": 16, "heads": 2,
                         "layers": 1}}
NTH_N = 10**6
HERE = Path(__file__).parent


def sizes(quick: bool) -> dict:
    return QUICK if quick else SIZES


def machine() -> dict:
    """CPU model, cores, versions: what the page states about where it was measured."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            info = dict((k.strip(), v.strip()) for k, _, v in
                        (ln.partition(":") for ln in f.read().split("\n\n")[0].splitlines()))
        cpu = (f"{info['model name']} (family {info['cpu family']}, model {info['model']}"
               f"{', AVX-512' if 'avx512f' in info.get('flags', '') else ''})")
    except (OSError, KeyError):
        pass
    versions = {"python": platform.python_version()}
    for pkg in ("numpy", "numba", "llvmlite", "torch", "jax", "jaxlib", "pyopencl"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    try:
        import pyopencl as cl

        versions["opencl"] = "; ".join(f"{p.version}: {d.name}" for p in cl.get_platforms()
                                       for d in p.get_devices())
    except Exception:              # no pyopencl or no platform: the page says none
        versions["opencl"] = None
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True, cwd=HERE).stdout.strip()
    return {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform(),
            "versions": versions, "rlx_ref_commit": rev}


def _worker(script: str, args: list, env: dict | None = None) -> dict:
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "r.json"
        cmd = [sys.executable, str(HERE / script), *args, "--out", str(out)]
        p = subprocess.run(cmd, env={**os.environ, **(env or {})}, text=True,
                           stdout=sys.stdout, stderr=subprocess.PIPE)
        if p.returncode:
            raise SystemExit(f"{script} {' '.join(args)} failed:\n{p.stderr[-3000:]}")
        return json.loads(out.read_text())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15, help="timed rounds per system")
    ap.add_argument("--threads", default="1,0", help="configurations (0 = defaults)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (smoke run)")
    ap.add_argument("--no-opencl", dest="opencl", action="store_false")
    ap.add_argument("--out", default="docs/benchmarks/training")
    a = ap.parse_args()
    flags = (["--quick"] if a.quick else []) + ([] if a.opencl else ["--no-opencl"])
    res = {"machine": machine(), "sizes": sizes(a.quick), "lr": LR, "nth_n": NTH_N,
           "load_before": os.getloadavg(), "configs": {}}
    for i, threads in enumerate(int(t) for t in a.threads.split(",")):
        print(f"threads {threads or 'default'}", flush=True)
        steps = _worker("train_worker.py", ["--threads", str(threads), "--rounds",
                                            str(a.rounds), *flags] +
                        (["--memory"] if i == 0 else []))
        with tempfile.TemporaryDirectory() as cache:
            # empty kernel caches: the compile times are cold
            nth = _worker("train_nth.py", ["--threads", str(threads), *flags],
                          {"RLX_REF_CACHE_DIR": cache, "POCL_CACHE_DIR": cache})
        res["configs"][str(threads)] = {"steps": steps, "nth": nth}
    res["load_after"] = os.getloadavg()
    write(res, Path(a.out))


def write(res: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    md = out.with_suffix(".md")
    kept = md.read_text() if md.exists() else ""
    md.write_text(render(res, kept))
    out.with_suffix(".json").write_text(json.dumps(res, indent=1) + "\n")
    rows, series = {}, []
    for threads, c in res["configs"].items():
        label = "1 thread" if threads == "1" else "default threads"
        for kind, m in c["steps"]["models"].items():
            t = m["times"]
            base = t.get("pytorch", {}).get("median_ms")
            if not base:
                continue
            rows[f"{kind}, {label}"] = {s: v["median_ms"] / base for s, v in t.items()}
            series += [s for s in t if s not in series]
    mem = next(iter(res["configs"].values()))["steps"]["models"].get("transformer", {})
    mem = mem.get("memory", {})
    if mem.get("pytorch"):
        base = mem["pytorch"]["step_bytes"]
        rows["transformer, step memory"] = {s: mem[s]["step_bytes"] / base for s in
                                            ("rlx numba-cpu", "pytorch", "jax") if s in mem}
    if rows:
        out.with_suffix(".svg").write_text(
            bar_chart(rows, tuple(series), "step time (and memory) / PyTorch's, log scale"))
    print(md.read_text())


if __name__ == "__main__":
    main()
