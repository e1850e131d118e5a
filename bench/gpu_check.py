"""One command for a CUDA machine: the conformance suite on ``cuda``, then benchmarks of
the cuda backend beside PyTorch (CUDA) and CuPy, written to --out as gpu.json + gpu.md.

    python bench/gpu_check.py [--out docs/benchmarks] [--jobs 6] [--skip-conformance]
    python bench/gpu_check.py --dry-run        # simulator smoke: tiny sizes, one shard

Needs numba, numba-cuda, numpy; torch and cupy are optional peers (a missing one is "–").
No network. Times are medians after a warm-up, each run ended by a device synchronize.
"device" times run the compiled plan on inputs already on the GPU; "e2e" adds the
transfers of ``Executable.run``. Memory-bound ops also report GB/s and the share of
PyTorch's device-to-device copy bandwidth (the target is 70%).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "docs" / "benchmarks"))
    p.add_argument("--jobs", type=int, default=6, help="conformance shards run in parallel")
    p.add_argument("--skip-conformance", action="store_true")
    p.add_argument("--only", help="benchmark names to run, comma separated")
    p.add_argument("--budget", type=float, default=4.0, help="seconds of timing per system")
    p.add_argument("--dry-run", action="store_true",
                   help="on the CUDA simulator: tiny sizes, one conformance shard")
    return p.parse_args(argv)


ARGS = parse_args()
if ARGS.dry_run:             # must precede the first numba.cuda import
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import op_cases as oc

# name, builder, bytes moved per run (None: compute bound), and quick sizes for --dry-run
MB = 1 << 20


def bench_list(quick: bool) -> list:
    n = (lambda small, big: small if quick else big)
    return [
        ("matmul_4096_f32", lambda: oc.matmul(n(16, 4096)), None),
        ("gelu_chain_16M", lambda: oc.gelu_chain(n(1024, 1 << 24)), 16 * n(1024, 1 << 24)),
        ("softmax_4096x4096", lambda: oc.softmax(n(8, 4096)), 8 * n(8, 4096) ** 2),
        ("layernorm_8192x1024", lambda: oc.layernorm(n(4, 8192), n(64, 1024)),
         8 * n(4, 8192) * n(64, 1024)),
        ("sum_64M", lambda: oc.total_sum(n(4096, 1 << 26)), 4 * n(4096, 1 << 26)),
        ("attention_1x8x1024x64", lambda: oc.attention(n(16, 1024), False), None),
        ("conv2d_8x64x56x56_k3", lambda: oc.conv2d(1 if quick else 8, n(4, 64), n(8, 56),
                                                   n(4, 64)), None),
        ("embedding_gather", lambda: oc.gather(n(100, 50000), n(64, 1024), n(32, 8192)),
         8 * n(64, 1024) * n(32, 8192)),
        ("cumsum_4096x4096", lambda: oc.cumsum(n(16, 4096)), 8 * n(16, 4096) ** 2),
    ]


def sync():
    from numba import cuda

    cuda.synchronize()


def timeit(fn, budget: float, max_runs: int = 20) -> float | None:
    """Median seconds of ``fn()`` (synchronized) after one warm-up: at least three runs
    (one in --dry-run), more while ``budget`` seconds last."""
    fn()
    runs = []
    least = 1 if ARGS.dry_run else 3
    deadline = time.perf_counter() + budget
    while len(runs) < least or (len(runs) < max_runs and time.perf_counter() < deadline):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def cuda_runners(graph, feeds):
    """('device', 'e2e') callables of the cuda backend for ``graph``."""
    from rlx_ref.backends.registry import get_backend

    exe = get_backend("cuda").compile(graph)
    plan = exe._plans[()]          # the plan sequential runs use (static graph)
    env = plan.bind(feeds, {})

    def device():
        plan.execute(env.copy())
        sync()

    def e2e():
        exe.run(feeds)
    return {"device": device, "e2e": e2e}, exe


def torch_runner(peers: dict, feeds):
    import torch

    if not torch.cuda.is_available() or "torch" not in peers:
        return None
    dev = {k: torch.as_tensor(v).cuda() for k, v in feeds.items()}
    fn = peers["torch"]
    return lambda: (fn(torch, dev), torch.cuda.synchronize())


def _gelu(cp, y):
    return 0.5 * y * (1 + cp.tanh(0.7978846 * (y + 0.044715 * y ** 3)))


def _softmax(cp, x):
    e = cp.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


CUPY = {
    "matmul_4096_f32": lambda cp, f: f["a"] @ f["b"],
    "gelu_chain_16M": lambda cp, f: _gelu(cp, f["x"] * f["w"] + f["b"]),
    "softmax_4096x4096": lambda cp, f: _softmax(cp, f["x"]),
    "layernorm_8192x1024": lambda cp, f: (f["x"] - f["x"].mean(-1, keepdims=True)) / cp.sqrt(
        f["x"].var(-1, keepdims=True) + 1e-5) * f["gamma"] + f["beta"],
    "sum_64M": lambda cp, f: f["x"].sum(),
    "embedding_gather": lambda cp, f: f["table"][f["idx"]],
    "cumsum_4096x4096": lambda cp, f: cp.cumsum(f["x"], -1),
}


def cupy_runner(name: str, feeds):
    try:
        import cupy as cp
    except ImportError:
        return None
    if name not in CUPY:
        return None
    dev = {k: cp.asarray(v) for k, v in feeds.items()}
    return lambda: (CUPY[name](cp, dev), cp.cuda.Device().synchronize())


def copy_bandwidth() -> float | None:
    """PyTorch device-to-device copy bandwidth in GB/s (read + write of 1 GiB)."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    x = torch.empty(256 * MB, dtype=torch.float32, device="cuda")
    y = torch.empty_like(x)
    t = timeit(lambda: (y.copy_(x), torch.cuda.synchronize()), 1.0)
    return 2 * x.numel() * 4 / t / 1e9


def run_benchmarks(args) -> tuple[list, float | None]:
    from rlx_ref.backends.registry import get_backend

    bandwidth = copy_bandwidth()
    rows = []
    only = set(args.only.split(",")) if args.only else None
    for name, build, nbytes in bench_list(args.dry_run):
        if only and name not in only:
            continue
        graph, feeds, peers = build()
        row = {"name": name, "bytes": nbytes}
        try:
            ours, exe = cuda_runners(graph, feeds)
            paths = get_backend("cuda").paths()
            row["paths"] = sorted({paths[n.kind] for n in exe.graph.nodes
                                   if n.kind not in ("Input", "Param", "Constant")})
            for kind, fn in ours.items():
                row[f"cuda_{kind}"] = timeit(fn, args.budget)
        except Exception as e:  # noqa: BLE001 - recorded, the next op still runs
            row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"
        for peer in ("torch", "cupy"):
            try:
                fn = torch_runner(peers, feeds) if peer == "torch" else cupy_runner(name, feeds)
                row[peer] = timeit(fn, args.budget) if fn else None
            except Exception as e:  # noqa: BLE001
                row[peer], row[f"{peer}_error"] = None, str(e).splitlines()[0]
        if nbytes and row.get("cuda_device"):
            row["cuda_gbps"] = nbytes / row["cuda_device"] / 1e9
            if bandwidth:
                row["of_copy_bw"] = row["cuda_gbps"] / bandwidth
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows, bandwidth


def run_conformance(args, out: Path) -> dict:
    """The suite in parallel shards (fresh processes: CUDA contexts do not survive fork)."""
    n = 1 if args.dry_run else max(1, args.jobs)
    shards = ["7/60"] if args.dry_run else [f"{i}/{n}" for i in range(1, n + 1)]
    tmp = Path(tempfile.mkdtemp(prefix="rlx_gpu_conf_"))
    procs = []
    for k, shard in enumerate(shards):
        cmd = [sys.executable, "-m", "rlx_ref.cli", "conformance", "--backend", "cuda",
               "--shard", shard, "--quiet", "--out", str(tmp / f"{k}.json"),
               "--repro-dir", str(out / "gpu-repros")]
        procs.append(subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True))
    counts: dict = {}
    failing = []
    for k, p in enumerate(procs):
        text, _ = p.communicate()
        failing += [ln for ln in text.splitlines() if ln.startswith("FAIL")]
        doc = json.loads((tmp / f"{k}.json").read_text())
        for r in doc["results"]:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
    return {"shards": shards, "counts": counts, "failing": failing[:200]}


def markdown(meta: dict, conf: dict | None, rows: list, bandwidth) -> str:
    def ms(v):
        return "–" if v is None else f"{v * 1e3:.3f}"
    lines = ["# CUDA backend check", "", (f"Machine: {meta['gpu']}; numba-cuda "
                                          f"{meta['numba_cuda']}; torch {meta['torch']}; "
                                          f"cupy {meta['cupy']}."), ""]
    if conf:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(conf["counts"].items()))
        lines += [f"Conformance ({len(conf['shards'])} shard(s)): {counts}.", ""]
    if bandwidth:
        lines += [f"PyTorch device copy bandwidth: {bandwidth:.0f} GB/s.", ""]
    lines += ["| op | cuda device ms | cuda e2e ms | torch ms | cupy ms | GB/s | of copy bw |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        gbps = f"{r['cuda_gbps']:.0f}" if r.get("cuda_gbps") else "–"
        share = f"{r['of_copy_bw']:.0%}" if r.get("of_copy_bw") else "–"
        name = r["name"] + (f" (error: {r['error']})" if r.get("error") else "")
        lines.append(f"| {name} | {ms(r.get('cuda_device'))} | {ms(r.get('cuda_e2e'))} | "
                     f"{ms(r.get('torch'))} | {ms(r.get('cupy'))} | {gbps} | {share} |")
    return "\n".join(lines) + "\n"


def machine() -> dict:
    from rlx_ref.backends.registry import get_backend

    def version(mod):
        try:
            return __import__(mod).__version__
        except Exception:  # noqa: BLE001 - absent peers are reported as such
            return "absent"
    return {"gpu": get_backend("cuda").device, "numba_cuda": version("numba_cuda"),
            "torch": version("torch"), "cupy": version("cupy")}


def main() -> int:
    args = ARGS
    if args.dry_run:
        args.budget = 0.0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    from rlx_ref.backends.registry import get_backend

    ok, why = get_backend("cuda").availability()
    if not ok:
        print(f"cuda backend unavailable: {why}", file=sys.stderr)
        return 2
    conf = None if args.skip_conformance else run_conformance(args, out)
    if conf:
        print(f"conformance: {conf['counts']} in {time.perf_counter() - t0:.0f}s", flush=True)
    rows, bandwidth = run_benchmarks(args)
    meta = machine()
    stem = "gpu-dry-run" if args.dry_run else "gpu"
    doc = {"machine": meta, "conformance": conf, "copy_bandwidth_gbps": bandwidth,
           "benchmarks": rows, "seconds": time.perf_counter() - t0, "dry_run": args.dry_run}
    (out / f"{stem}.json").write_text(json.dumps(doc, indent=1) + "\n")
    (out / f"{stem}.md").write_text(markdown(meta, conf, rows, bandwidth))
    print(f"wrote {out / stem}.json and .md in {time.perf_counter() - t0:.0f}s")
    bad = conf and any(k not in ("ok", "unsupported", "xfail") for k in conf["counts"])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
