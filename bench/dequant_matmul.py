"""DequantMatMul (x [m, k] @ W.T, W [n, k] in GGUF blocks) on numba-cpu beside the peers a
user would pick: numpy (gguf-py dequantize, then BLAS) and PyTorch CPU (dequantize with
torch ops, then matmul), and the f32 BLAS matmul of the same shape; plus this machine's
memory bandwidth measured in the same run.

    python bench/dequant_matmul.py [--n 4096] [--schemes Q4_0,Q4_K,Q8_0] [--json PATH]

m = 1 (decode, GEMV): GB/s over the packed bytes, with W rotated over copies that exceed
the L3 cache so every call reads DRAM. m = 128 (prefill): time and ratio to f32 BLAS.
Peak extra memory: each system runs once in a fresh process (warmed on a small shape) and
reports its resident-set high-water mark above what the inputs and output already hold.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

L3_BYTES = 32 << 20         # this machine's L3 (perf-baseline.md); rotation exceeds 2x it


def timeit(fn, args_list, reps=15, budget=3.0):
    """Median and min seconds of fn(*args) over repeats (cycling args), one warm-up."""
    fn(*args_list[0])
    times, start = [], time.perf_counter()
    for i in range(reps):
        t = time.perf_counter()
        fn(*args_list[i % len(args_list)])
        times.append(time.perf_counter() - t)
        if time.perf_counter() - start > budget and len(times) >= 5:
            break
    return float(np.median(times)), float(np.min(times))


def bandwidth():
    """GB/s: numpy copyto (1 thread, 2x bytes), numba 2-thread copy (2x) and read (1x)."""
    from numba import njit, prange

    @njit(parallel=True, fastmath=True)
    def pcopy(a, b):
        for i in prange(a.size):
            b[i] = a[i]

    @njit(parallel=True, fastmath=True)
    def psum(a):
        s = np.float32(0)
        for i in prange(a.size):
            s += a[i]
        return s

    a = np.ones(64 << 20, np.float32)
    b = np.empty_like(a)
    out = {}
    for name, fn, args, traffic in (("numpy_copy_1t", np.copyto, (b, a), 2),
                                    ("numba_copy_2t", pcopy, (a, b), 2),
                                    ("numba_read_2t", psum, (a,), 1)):
        med, _ = timeit(fn, [args], reps=7)
        out[name] = traffic * a.nbytes / med / 1e9
    return out


def contention():
    """How busy the machine is: the 90th-percentile latency (us) of an empty 2-thread
    parallel region (a thread the OS has descheduled shows up here in ms) and a 1024^3
    sgemm's GFLOP/s (numpy, 2 threads: ~200 on this machine when idle)."""
    from numba import njit, prange

    @njit(parallel=True)
    def empty(a):
        for i in prange(2):
            a[i] += 1

    a = np.zeros(2)
    empty(a)
    lat = []
    for _ in range(200):
        t = time.perf_counter()
        empty(a)
        lat.append(time.perf_counter() - t)
    x = np.ones((1024, 1024), np.float32)
    med, _ = timeit(lambda: x @ x, [()], reps=9)
    return {"empty_region_p90_us": float(np.percentile(lat, 90) * 1e6),
            "sgemm_1024_gflops": 2 * 1024 ** 3 / med / 1e9}


def make_weights(scheme, n, k, seed=0):
    from rlx_ref.quant import quantize

    w = np.random.default_rng(seed).standard_normal((n, k)).astype(np.float32) * 0.05
    return quantize(w, scheme)


def gguf_type(scheme):
    from gguf import GGMLQuantizationType

    return GGMLQuantizationType[scheme]


def numpy_peer(scheme, n, k):
    import gguf

    t = gguf_type(scheme)
    return lambda x, packed: x @ gguf.quants.dequantize(packed.reshape(n, -1), t).T


def torch_dequant(scheme, n, k):
    """W [n, k] f32 from packed bytes with torch tensor ops (the format's meaning)."""
    import torch

    def f16(b):
        return b.contiguous().view(torch.float16).float()

    def q4_0(blocks):
        d = f16(blocks[:, :2])
        q = blocks[:, 2:].to(torch.int16)
        return d * (torch.cat([q & 15, q >> 4], 1) - 8).float()

    def q8_0(blocks):
        return f16(blocks[:, :2]) * blocks[:, 2:].contiguous().view(torch.int8).float()

    def q4_k(blocks):
        d, dmin = f16(blocks[:, 0:2]), f16(blocks[:, 2:4])
        s = blocks[:, 4:16].to(torch.int16)
        sc = torch.cat([s[:, 0:4] & 63, (s[:, 8:12] & 15) | ((s[:, 0:4] >> 6) << 4)], 1)
        mn = torch.cat([s[:, 4:8] & 63, (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)], 1)
        q = blocks[:, 16:].to(torch.int16).reshape(-1, 4, 1, 32)
        q = torch.cat([q & 15, q >> 4], 2).reshape(-1, 8, 32).float()
        w = (d * sc.float()).unsqueeze(-1) * q - (dmin * mn.float()).unsqueeze(-1)
        return w.reshape(-1, 256)

    fn = {"Q4_0": q4_0, "Q8_0": q8_0, "Q4_K": q4_k}[scheme]
    from rlx_ref.quant import get_scheme

    bb = get_scheme(scheme).block_bytes

    def run(x, packed):
        blocks = torch.from_numpy(packed).reshape(-1, bb)
        with torch.no_grad():
            return torch.matmul(torch.from_numpy(x), fn(blocks).reshape(n, k).T).numpy()
    return run


def numba_runner(scheme, m, k, n):
    from rlx_ref.backends.numba_cpu._quant_matmul import plan_dequant_matmul

    plan = plan_dequant_matmul(scheme, m, k, n)
    out = np.empty((m, n), np.float32)
    out.fill(0)                      # resident before any call (the caller's buffer)
    return (lambda x, packed: plan.run(x, packed, out)), plan


def check(name, got, ref):
    err = float(np.abs(got - ref).max() / np.abs(ref).max())
    if not err <= 1e-4:
        raise SystemExit(f"{name}: max|err|/max|ref| = {err:.2e} against float64")
    return err


def bench_scheme(scheme, n, k, systems):
    import gguf

    packed = make_weights(scheme, n, k)
    w64 = gguf.quants.dequantize(packed.reshape(n, -1), gguf_type(scheme)).astype(np.float64)
    copies = [packed] + [packed.copy() for _ in range(2 * L3_BYTES // packed.nbytes + 1)]
    rows = []
    for m in (1, 128):
        x = np.random.default_rng(m).standard_normal((m, k)).astype(np.float32)
        ref = x.astype(np.float64) @ w64.T
        runners = {"numba-cpu": numba_runner(scheme, m, k, n)[0],
                   "numpy": numpy_peer(scheme, n, k), "torch": torch_dequant(scheme, n, k)}
        w32 = w64.astype(np.float32)
        f32 = {"f32 BLAS": lambda x, _: x @ w32.T}
        row = {"scheme": scheme, "m": m, "k": k, "n": n, "packed_bytes": packed.nbytes}
        for name, fn in {**runners, **f32}.items():
            if name not in systems and name != "f32 BLAS":
                continue
            row[f"err {name}"] = check(name, fn(x, packed), ref)
            args = [(x, c) for c in (copies if m == 1 else [packed])]
            row[name], row[f"min {name}"] = timeit(fn, args)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def probe(system, scheme, m, n, k):
    """In a fresh process: resident-set high-water above inputs + output for one call."""
    packed = make_weights(scheme, n, k)
    x = np.random.default_rng(1).standard_normal((m, k)).astype(np.float32)
    small = make_weights(scheme, 64, k)
    fn = {"numba-cpu": lambda: numba_runner(scheme, m, k, n)[0],
          "numpy": lambda: numpy_peer(scheme, n, k),
          "torch": lambda: torch_dequant(scheme, n, k)}[system]()
    warm = {"numba-cpu": lambda: numba_runner(scheme, m, k, 64)[0],
            "numpy": lambda: numpy_peer(scheme, 64, k),
            "torch": lambda: torch_dequant(scheme, 64, k)}[system]()
    warm(x, small)                   # kernels loaded/compiled on a small shape
    Path("/proc/self/clear_refs").write_text("5")    # reset the high-water mark
    before = _rss("VmRSS")
    fn(x, packed)
    # the peers allocate their output inside the call: it is not extra
    own_out = 0 if system == "numba-cpu" else m * n * 4
    print(json.dumps({"extra_bytes": _rss("VmHWM") - before - own_out}))


def _rss(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(field)


def memory(scheme, n, k, systems):
    out = {}
    for m in (1, 128):
        for system in systems:
            res = subprocess.run([sys.executable, __file__, "--probe", system, scheme, str(m),
                                  str(n), str(k)], capture_output=True, text=True,
                                 env=dict(os.environ))
            if res.returncode:
                raise SystemExit(res.stderr)
            out[(system, m)] = json.loads(res.stdout.strip().splitlines()[-1])["extra_bytes"]
    return out


def report(rows, mem, bw, systems, busy):
    """The results as a markdown table (medians; extra memory in MiB when probed)."""
    read = bw["numba_read_2t"]
    lines = [f"Bandwidth (GB/s): numpy copy 1 thread {bw['numpy_copy_1t']:.1f}, numba copy "
             f"2 threads {bw['numba_copy_2t']:.1f}, numba read 2 threads {read:.1f}",
             "Machine load (before, after): empty parallel region p90 " + ", ".join(
                 f"{b['empty_region_p90_us']:.0f} us" for b in busy) + "; sgemm 1024^3 " +
             ", ".join(f"{b['sgemm_1024_gflops']:.0f} GFLOP/s" for b in busy), "",
             "| scheme | m | " + " | ".join(f"{s} ms" for s in systems) + " | f32 BLAS ms | "
             "numba-cpu | extra MiB (" + ", ".join(systems) + ") |",
             "|---" * (len(systems) + 5) + "|"]
    for r in rows:
        nb = r["numba-cpu"]
        if r["m"] == 1:
            gbs = r["packed_bytes"] / nb / 1e9
            speed = f"{gbs:.1f} GB/s ({100 * gbs / read:.0f}% of read)"
        else:
            speed = f"{r['f32 BLAS'] / nb:.2f}x f32 BLAS"
        extra = ", ".join(f"{mem[r['scheme']][(s, r['m'])] / 2**20:.1f}" for s in systems) \
            if r["scheme"] in mem else "-"
        lines.append(f"| {r['scheme']} | {r['m']} | " + " | ".join(
            f"{1e3 * r[s]:.2f}" for s in systems) + f" | {1e3 * r['f32 BLAS']:.2f} | {speed} | "
            f"{extra} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--schemes", default="Q4_0,Q4_K,Q8_0")
    ap.add_argument("--systems", default="numba-cpu,numpy,torch")
    ap.add_argument("--json", default="")
    ap.add_argument("--probe", nargs=5)
    ap.add_argument("--no-memory", action="store_true", help="skip the peak-memory probes")
    a = ap.parse_args()
    if a.probe:
        system, scheme, m, n, k = a.probe
        probe(system, scheme, int(m), int(n), int(k))
        return
    systems = a.systems.split(",")
    busy = [contention()]
    bw = bandwidth()
    print(json.dumps(busy[0]), json.dumps(bw), flush=True)
    rows, mem = [], {}
    for scheme in a.schemes.split(","):
        rows += bench_scheme(scheme, a.n, a.n, systems)
        if not a.no_memory:
            mem[scheme] = memory(scheme, a.n, a.n, systems)
    busy.append(contention())
    text = report(rows, mem, bw, systems, busy)
    print(text)
    if a.json:
        Path(a.json).write_text(json.dumps({"bandwidth": bw, "contention": busy, "rows": rows,
                                            "memory": {s: {f"{k[0]} m={k[1]}": v
                                                           for k, v in d.items()}
                                                       for s, d in mem.items()}}, indent=1))


if __name__ == "__main__":
    main()
