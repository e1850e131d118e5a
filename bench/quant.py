"""Quantized inference benchmarks: DequantMatMul through the numba-cpu and OpenCL backends
beside numpy (gguf-py dequantize + BLAS), PyTorch CPU (dequantize with torch ops, then
matmul) and the f32 BLAS matmul of the same shape, all in one process with this machine's
memory bandwidth measured in the same run; then the GGUF llama's greedy decode speed.
Writes docs/benchmarks/quant.{md,json,svg}.

    python bench/quant.py [--n 4096] [--schemes Q4_0,Q4_K,Q8_0] [--out docs/benchmarks/quant]

Each backend runs a one-node DequantMatMul graph compiled by the backend (what a user of
rlx_ref gets). ``opencl-dev`` reruns on inputs already on the device. m = 1 (decode):
GB/s over the packed bytes, every system rotating over weight copies (one compiled graph
per copy for the backends) that together exceed twice the L3 cache, so calls read DRAM; m = 128 (prefill): ratio to f32 BLAS.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from dequant_matmul import (L3_BYTES, bandwidth, check, contention, gguf_type,  # noqa: E402
                            make_weights, numpy_peer, timeit, torch_dequant)
from svgplot import bar_chart  # noqa: E402

SYSTEMS = ("numba-cpu", "opencl-dev", "opencl", "numpy", "torch")
PEERS = ("numpy", "torch")


def graph_runner(backend: str, scheme: str, m: int, k: int, n: int, packed):
    """(run(x, packed), rerun or None) for a DequantMatMul graph on ``backend``."""
    import rlx_ref
    from rlx_ref.backends.registry import get_backend
    from rlx_ref.ir.shape import Shape
    from rlx_ref.quant import get_scheme

    g = rlx_ref.Graph("dequant_matmul")
    x = g.input("x", [m, k])
    w = g.param("w", [packed.size], "u8")
    g.set_outputs([g.op("DequantMatMul", (x, w), scheme=get_scheme(scheme).rlx,
                        shape=Shape((m, n), "F32"))])
    exe = get_backend(backend).compile(g)
    exe.set_param("w", packed)
    path = exe.dispatch_report.path_of("DequantMatMul")
    if path != "native":
        raise SystemExit(f"{backend}: DequantMatMul ran on the {path} path")
    def run(xv, _packed):
        return exe.run({"x": xv})[0]
    rerun = getattr(exe, "rerun", None)
    return run, (lambda xv, _p: rerun()) if rerun else None


def bench_scheme(scheme, n, k):
    import gguf

    packed = make_weights(scheme, n, k)
    w64 = gguf.quants.dequantize(packed.reshape(n, -1), gguf_type(scheme)).astype(np.float64)
    w32 = w64.astype(np.float32)
    copies = [packed] + [packed.copy() for _ in range(2 * L3_BYTES // packed.nbytes + 1)]
    rows = []
    for m in (1, 128):
        x = np.random.default_rng(m).standard_normal((m, k)).astype(np.float32)
        ref = x.astype(np.float64) @ w64.T
        row = {"scheme": scheme, "m": m, "k": k, "n": n, "packed_bytes": int(packed.nbytes)}
        fns = {"numpy": numpy_peer(scheme, n, k), "torch": torch_dequant(scheme, n, k),
               "f32 BLAS": lambda xv, _: xv @ w32.T}
        for backend in ("numba-cpu", "opencl"):
            try:
                # m = 1: one executable per weight copy, rotated like the host peers' copies
                runners = {id(c): graph_runner(backend, scheme, m, k, n, c)
                           for c in (copies if m == 1 else [packed])}
            except Exception as e:  # noqa: BLE001 - an absent device is reported
                row[f"skip {backend}"] = str(e).splitlines()[0]
                continue
            fns[backend] = lambda xv, c, r=runners: r[id(c)][0](xv, c)
            if all(rr is not None for _, rr in runners.values()):
                for run, _ in runners.values():
                    run(x, None)                       # the first run loads the inputs
                fns["opencl-dev"] = lambda xv, c, r=runners: r[id(c)][1](xv, c)
        for name, fn in fns.items():
            if not name.endswith("-dev"):
                row[f"err {name}"] = check(name, np.asarray(fn(x, packed)), ref)
            args = [(x, c) for c in (copies if m == 1 else [packed])]
            row[name], row[f"min {name}"] = timeit(fn, args)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def decode_speed(schemes, steps=32):
    """Greedy-decode tokens/s of the GGUF llama per (scheme, device), tokens checked."""
    import tempfile

    from rlx_ref.models import llama as L
    from rlx_ref.models import llama_gguf as E

    cfg, prompt = L.LlamaConfig(), [1, 2, 3, 4, 5, 6, 7, 8]
    seq = len(prompt) + steps - 1
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        paths = E.write_model_files(tmp, cfg, schemes, seed=0)
        for scheme in schemes:
            want = None
            for device in ("reference", "numba-cpu", "opencl"):
                try:
                    run = E.load_runner(device, cfg, seq, paths[scheme])
                except Exception:  # noqa: BLE001 - an absent device is left out
                    continue
                L.greedy_decode(run, cfg, prompt, 2, seq)           # compile and warm
                t0 = time.perf_counter()
                toks, _ = L.greedy_decode(run, cfg, prompt, steps, seq)
                dt = time.perf_counter() - t0
                want = want or toks
                out[f"{scheme} {device}"] = {"tokens_per_s": steps / dt,
                                             "same_tokens_as_oracle": toks == want}
                print(scheme, device, out[f"{scheme} {device}"], flush=True)
    return out


def page(rows, bw, busy, decode) -> str:
    read = bw["numba_read_2t"]
    lines = [
        "# Quantized inference (DequantMatMul)", "",
        "Generated by `python bench/quant.py`: medians in ms of one process's run, "
        f"W {rows[0]['n']}×{rows[0]['k']}. The machine's bandwidth in the same run (GB/s): "
        f"numpy copy 1 thread {bw['numpy_copy_1t']:.1f}, numba copy 2 threads "
        f"{bw['numba_copy_2t']:.1f}, numba read 2 threads {read:.1f}. Load before/after: "
        "empty parallel region p90 " + ", ".join(
            f"{b['empty_region_p90_us']:.0f} µs" for b in busy) + "; sgemm 1024³ " +
        ", ".join(f"{b['sgemm_1024_gflops']:.0f} GFLOP/s" for b in busy) + ".", "",
        "m = 1 target: ≥ 60% of the read bandwidth over the packed bytes; m = 128 target: "
        "≥ 0.7× the f32 BLAS matmul. numba-cpu and opencl run one compiled DequantMatMul "
        "graph (inputs in, output out); opencl-dev reruns on device-resident inputs.", "",
        "| scheme | m | " + " | ".join(SYSTEMS) + " | f32 BLAS | numba-cpu vs target | "
        "opencl-dev vs target |", "|---" * (len(SYSTEMS) + 5) + "|"]
    for r in rows:
        cells = [f"{1e3 * r[s]:.3g}" if r.get(s) else "–" for s in SYSTEMS]
        verdicts = []
        for s in ("numba-cpu", "opencl-dev"):
            if not r.get(s):
                verdicts.append("–")
            elif r["m"] == 1:
                gbs = r["packed_bytes"] / r[s] / 1e9
                verdicts.append(f"{gbs:.1f} GB/s = {100 * gbs / read:.0f}% "
                                f"({'met' if gbs >= 0.6 * read else 'not met'})")
            else:
                ratio = r["f32 BLAS"] / r[s]
                verdicts.append(f"{ratio:.2f}× ({'met' if ratio >= 0.7 else 'not met'})")
        lines.append(f"| {r['scheme']} | {r['m']} | " + " | ".join(cells) +
                     f" | {1e3 * r['f32 BLAS']:.3g} | " + " | ".join(verdicts) + " |")
    lines += ["", "## GGUF llama, greedy decode (32 tokens, padded 39-token graph)", "",
              "| scheme | device | tokens/s | same tokens as the oracle |", "|---|---|---|---|"]
    for key, v in decode.items():
        scheme, device = key.split(" ", 1)
        lines.append(f"| {scheme} | {device} | {v['tokens_per_s']:.1f} | "
                     f"{'yes' if v['same_tokens_as_oracle'] else 'NO'} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--schemes", default="Q4_0,Q4_K,Q8_0")
    ap.add_argument("--out", default="docs/benchmarks/quant")
    a = ap.parse_args()
    schemes = a.schemes.split(",")
    busy = [contention()]
    bw = bandwidth()
    rows = [r for s in schemes for r in bench_scheme(s, a.n, a.n)]
    decode = decode_speed(schemes)
    busy.append(contention())
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(page(rows, bw, busy, decode))
    out.with_suffix(".json").write_text(json.dumps(
        {"rows": rows, "bandwidth_gbs": bw, "load": busy, "decode": decode}, indent=1) + "\n")
    ratios = {f"{r['scheme']} m={r['m']}": {
        s: (r[s] / min(r[p] for p in PEERS if r.get(p)) if r.get(s) else None)
        for s in SYSTEMS} for r in rows}
    out.with_suffix(".svg").write_text(bar_chart(
        ratios, SYSTEMS, "DequantMatMul time / fastest of numpy, torch (log scale)"))
    print(out.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
