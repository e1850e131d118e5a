"""End-to-end inference of real models: rlx_ref (numba-cpu, OpenCL) beside PyTorch eager,
torch.compile and onnxruntime, in one process. Models come from rlx_ref.models.torch_zoo
with seeded weights and are imported with rlx_ref.from_torch; onnxruntime runs the
torch.onnx.export (TorchScript exporter) of the same module. Prints medians and ratios and
writes docs/benchmarks/models.{md,json,svg}; a per-kind profile of the numba-cpu executable
is written for every model that misses the targets (≤ 1.0× eager, ≤ 1.3× onnxruntime).

    python bench/bench_models.py [--quick] [--only NAME,...] [--no-compile] [--budget S]

With ``--only`` the rows it measures replace theirs in the committed JSON; the rest stay.

Needs torch (and onnx + onnxruntime for that column): `pip install torch==2.13.0 onnx
onnxruntime`. GPT-2 decode is greedy over the fixed 128-token graph (no KV cache, for every
system alike): step t runs the forward on the padded sequence and takes position t's argmax.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from model_profile import format_profile, profile_numba  # noqa: E402
from svgplot import bar_chart  # noqa: E402

SYSTEMS = ("numba-cpu", "opencl", "torch", "torch.compile", "onnxruntime")
DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks"


def cases(quick: bool):
    """name -> (module factory, inputs factory, decode steps or 0)."""
    import torch
    from rlx_ref.models import torch_zoo as Z

    img = 64 if quick else 224
    gpt = dict(layers=2, dim=128, heads=4, vocab=512, ctx=128) if quick else dict(layers=12)
    seq, gen = (32, 4) if quick else (128, 32)
    tok = torch.randint(0, 512 if quick else 50257, (1, seq),
                        generator=torch.Generator().manual_seed(0))
    return {
        "resnet18 b1": (lambda: Z.resnet18(0), lambda: [torch.randn(1, 3, img, img)], 0),
        "resnet18 b8": (lambda: Z.resnet18(0), lambda: [torch.randn(8, 3, img, img)], 0),
        "mobilenet_v3_small b1": (lambda: Z.mobilenet_v3_small(0),
                                  lambda: [torch.randn(1, 3, img, img)], 0),
        f"gpt2 forward {seq}": (lambda: Z.gpt2(0, **gpt), lambda: [tok], 0),
        f"gpt2 decode {gen} steps": (lambda: Z.gpt2(0, **gpt), lambda: [tok], gen),
    }


def greedy(forward, tokens: np.ndarray, steps: int) -> list:
    """Greedy decoding with one fixed-length forward: the prompt is the first half."""
    seq = tokens.shape[1]
    toks = tokens.copy()
    start = seq - steps
    out = []
    for t in range(start, seq):
        logits = np.asarray(forward(toks))
        nxt = int(np.argmax(logits[0, t - 1]))
        out.append(nxt)
        toks[0, t] = nxt
    return out


def measure(fn, budget: float, max_runs: int = 15) -> tuple:
    """(median seconds, runs) of ``fn()`` after one warm-up call; a call slower than
    ``budget`` is measured once (the warm-up then counts), so slow systems still get a time."""
    t = time.perf_counter()
    fn()
    first = time.perf_counter() - t
    if first > budget:
        return first, 1
    runs, deadline = [], time.perf_counter() + budget
    while len(runs) < max_runs and (len(runs) < 3 or time.perf_counter() < deadline):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs), len(runs)


def runners(module, xs, steps, compile_ok):
    """system -> zero-argument callable (or the reason it cannot run)."""
    import torch
    import rlx_ref

    prog = rlx_ref.from_torch(module, xs)
    arrays = [x.numpy() for x in xs]
    out = {}
    for be in ("numba-cpu", "opencl"):
        if not rlx_ref.is_available(be):
            out[be] = "not available"
            continue
        exe = prog.compile(be)
        fwd = (lambda e: lambda *a: e.run(prog.feeds(*a))[0])(exe)
        out[be] = (fwd, exe)

    def torch_fwd(m):
        def f(*a):
            with torch.no_grad():
                return m(*[torch.from_numpy(np.asarray(v)) for v in a]).numpy()
        return f
    out["torch"] = (torch_fwd(module), None)
    if compile_ok:
        try:
            cm = torch.compile(module)
            torch_fwd(cm)(*arrays)
            out["torch.compile"] = (torch_fwd(cm), None)
        except Exception as e:          # no C compiler, an inductor gap: reported, not fatal
            out["torch.compile"] = f"failed: {type(e).__name__}: {str(e)[:80]}"
    else:
        out["torch.compile"] = "skipped (--no-compile)"
    try:
        import onnxruntime as ort

        f = io.BytesIO()
        torch.onnx.export(module, tuple(xs), f, dynamo=False,
                          input_names=[f"in{i}" for i in range(len(xs))])
        opts = ort.SessionOptions()
        # its threads would otherwise spin after each call, taking the cores from
        # whichever system is timed next
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        sess = ort.InferenceSession(f.getvalue(), opts)
        out["onnxruntime"] = (lambda *a: sess.run(None, {f"in{i}": np.asarray(v)
                                                         for i, v in enumerate(a)})[0], None)
    except Exception as e:
        out["onnxruntime"] = f"failed: {type(e).__name__}: {str(e)[:80]}"
    final = {}
    for name, r in out.items():
        if isinstance(r, str):
            final[name] = r
            continue
        fwd, exe = r
        if steps:
            final[name] = ((lambda f: lambda: greedy(f, arrays[0], steps))(fwd), exe)
        else:
            final[name] = ((lambda f: lambda: f(*arrays))(fwd), exe)
    return final, prog, arrays


def bench(args) -> dict:
    import torch

    torch.manual_seed(0)
    results = {}
    for name, (make, inputs, steps) in cases(args.quick).items():
        if args.only and not any(o in name for o in args.only.split(",")):
            continue
        module, xs = make(), inputs()
        run, prog, arrays = runners(module, xs, steps, not args.no_compile)
        row, check = {}, None
        for system in SYSTEMS:
            r = run[system]
            if isinstance(r, str):
                row[system] = {"note": r}
                continue
            fn, exe = r
            res = fn()
            if steps and check is None:
                check = res
            agree = (res == check) if steps else None
            t, n = measure(fn, args.budget)
            row[system] = {"median_s": t, "runs": n,
                           **({"same_tokens": agree} if steps else {})}
            print(f"{name:24s} {system:14s} {'-' if t is None else f'{t * 1e3:9.2f} ms'}",
                  flush=True)
        results[name] = row
        ratios(row)
        miss = misses(row)
        if miss and isinstance(run["numba-cpu"], tuple):
            prof = profile_numba(run["numba-cpu"][1], prog.feeds(*arrays))
            row["numba-cpu"]["profile"] = {k: {"s": s, "steps": n} for k, (s, n) in prof.items()}
            row["numba-cpu"]["misses"] = miss
            print("  profile:", format_profile(prof), flush=True)
    return results


def ratios(row):
    nb = row.get("numba-cpu", {}).get("median_s")
    for peer in ("torch", "onnxruntime", "torch.compile"):
        p = row.get(peer, {}).get("median_s")
        if nb and p:
            row["numba-cpu"][f"x_{peer}"] = nb / p
        ocl = row.get("opencl", {}).get("median_s")
        if ocl and p:
            row["opencl"][f"x_{peer}"] = ocl / p


def misses(row) -> list:
    nb = row.get("numba-cpu", {})
    out = []
    if nb.get("x_torch", 0) > 1.0:
        out.append(f"{nb['x_torch']:.2f}× torch eager (target ≤ 1.0×)")
    if nb.get("x_onnxruntime", 0) > 1.3:
        out.append(f"{nb['x_onnxruntime']:.2f}× onnxruntime (target ≤ 1.3×)")
    return out


def _ms(v):
    t = v.get("median_s")
    return "–" if t is None else f"{t * 1e3:.1f}"


def write_docs(results: dict, args) -> None:
    from model_report import markdown

    DOCS.mkdir(parents=True, exist_ok=True)
    old = DOCS / "models.json"
    if args.only and old.exists():      # a partial run replaces only its own rows
        merged = json.loads(old.read_text())["results"]
        merged.update(results)
        results = {k: merged[k] for k in merged}
    meta = {"machine": platform.processor() or platform.machine(), "quick": args.quick,
            "python": platform.python_version(), "when": time.strftime("%Y-%m-%d"),
            "cores": os.cpu_count(), "load_average": os.getloadavg()[0],
            # numpy's and numba's GEMMs run on OpenBLAS; a forced core type changes them
            "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE") or "auto-detected"}
    (DOCS / "models.json").write_text(json.dumps({"meta": meta, "results": results},
                                                 indent=1, default=str) + "\n")
    (DOCS / "models.md").write_text(markdown(results, meta, SYSTEMS, _ms))
    rows = {name: {s: row.get(s, {}).get("x_torch") for s in ("numba-cpu", "opencl")}
            for name, row in results.items()}
    (DOCS / "models.svg").write_text(bar_chart(rows, ("numba-cpu", "opencl"),
                                               "time ÷ PyTorch eager (log scale)"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    ap.add_argument("--only", default="", help="comma-separated model name fragments")
    ap.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    ap.add_argument("--budget", type=float, default=10.0, help="seconds per measurement")
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args(argv)
    results = bench(args)
    if not args.no_write:
        write_docs(results, args)


if __name__ == "__main__":
    main()
