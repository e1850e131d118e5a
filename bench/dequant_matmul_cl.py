"""DequantMatMul on OpenCL (the fused GGUF kernels) for a 4096 × 4096 weight, GEMV (m = 1)
and prefill (m = 128), beside the machine's measured read bandwidth and the peers a user
would pick instead, all in one process.

    python bench/dequant_matmul_cl.py [--schemes Q4_0,Q4_K,Q8_0] [--rows 1,128]
                                      [--style auto|cpu|gpu] [--device SPEC] [--rounds 9]
                                      [--json OUT]

Columns: ``hot`` repeats one product on one weight (it stays in the last-level cache
when it fits: 9-18 MB against 32 MB of L3 here); ``cold`` (m = 1) cycles through enough
copies of the weight to overflow the cache, so each GEMV reads its weight from DRAM, the
figure to hold against the bandwidth (an OpenCL kernel summing 256 MB). GB/s counts the
packed weight bytes only. Peers: ``numpy`` is gguf-py's dequant then BLAS ``x @ Wᵀ``;
``f32 BLAS`` the same product with W already f32 (the prefill target is 0.7× of it).

Every measurement is taken once per round, all cases and peers in turn, so a busy spell
of a shared machine hits them alike; the table gives medians over rounds (each the median
of a few back-to-back runs), ratios are medians of per-round ratios, and ``best`` the
fastest round. Each result is checked against float64 first.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

N = K = 4096
F16_FIELDS = {"Q4_0": (0,), "Q8_0": (0,), "Q4_K": (0, 2), "Q6_K": (208,), "Q5_K": (0, 2),
              "Q4_1": (0, 2), "Q5_0": (0,), "Q2_K": (80, 82), "Q3_K": (108,),
              "IQ4_NL": (0,), "IQ4_XS": (0,)}
MED = statistics.median


def timed(fn, runs: int = 3) -> float:
    """Median seconds of ``runs`` back-to-back calls."""
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return MED(out)


def random_weight(rng, name: str, geo: tuple) -> np.ndarray:
    """Packed [N, K] weight: random quants, finite scales of a realistic size."""
    bs, bb = geo
    nb = N * K // bs
    raw = rng.integers(0, 256, size=(nb, bb), dtype=np.uint8)
    for off in F16_FIELDS[name]:
        raw[:, off:off + 2] = rng.uniform(-0.02, 0.02, nb).astype(np.float16) \
            .view(np.uint8).reshape(nb, 2)
    return raw.reshape(-1)


_BW_SRC = """
__kernel void bw_sum(__global const float* a, __global float* o, const long per) {
    __global const float* p = a + get_global_id(0) * per;
    float16 c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f;
    for (long j = 0; j < per; j += 64) {
        c0 += vload16(0, p + j); c1 += vload16(1, p + j);
        c2 += vload16(2, p + j); c3 += vload16(3, p + j);
    }
    float16 c = c0 + c1 + c2 + c3;
    o[get_global_id(0)] = c.s0 + c.s1 + c.s2 + c.s3 + c.s4 + c.s5 + c.s6 + c.s7 + c.s8
                          + c.s9 + c.sa + c.sb + c.sc + c.sd + c.se + c.sf;
}
"""


def bandwidth_probe(ctx):
    """(bytes, run): an OpenCL kernel summing 256 MB, a run of float16 vectors per item."""
    import pyopencl as cl

    from rlx_ref.backends.opencl import memory

    n, items = 64 << 20, 256
    kern = ctx.kernel(_BW_SRC, "bw_sum").make()
    a = memory.upload(ctx.program.context, ctx.queue, np.ones(n, np.float32))
    o = memory.empty(ctx.program.context, (items,), np.float32)
    kern.set_args(a.buf, o.buf, np.int64(n // items))

    def run():
        cl.enqueue_nd_range_kernel(ctx.queue, kern, (items,), (1,))
        ctx.queue.finish()
    run.held = (a, o)
    run()
    return n * 4, run


class Case:
    """One (scheme, m): the bound OpenCL product, its DRAM-cold variant and the peers."""

    def __init__(self, dev, name: str, m: int, rng):
        import gguf

        from rlx_ref.backends.opencl import memory, quant_ops
        from rlx_ref.backends.opencl._quant_matmul import QuantMatMul, geometry

        dec, geo = geometry(name)
        self.name, self.m = name, m
        self.qtype = getattr(gguf.GGMLQuantizationType, name)
        self.packed = random_weight(rng, name, geo)
        self.w = np.ascontiguousarray(
            gguf.quants.dequantize(self.packed, self.qtype).reshape(N, K), np.float32)
        self.x = rng.standard_normal((m, K)).astype(np.float32)
        ctx = quant_ops.standalone_ctx(dev)
        cx, q = ctx.program.context, ctx.queue
        self.q, self.plan = q, QuantMatMul(ctx, name, m, N, K)
        xd = memory.upload(cx, q, self.x.reshape(-1))
        copies = max(2, -(-80 * 2 ** 20 // self.packed.nbytes)) if m == 1 else 1
        self.weights = [memory.upload(cx, q, self.packed) for _ in range(copies)]
        self.od = memory.empty(cx, (m * N,), np.float32)
        self.gos = [self.plan.bind(self.od, xd, wd) for wd in self.weights]
        self.turn = 0
        self.check()

    def check(self) -> None:
        self.hot()
        got = self.od.get(self.q).reshape(self.m, N)[:4]
        x = self.x[:4].astype(np.float64)
        ref, size = x @ self.w.T.astype(np.float64), np.abs(x) @ np.abs(self.w.T)
        assert (np.abs(got - ref) <= (K + 2) * 2.0 ** -23 * size + 1e-30).all(), self.name

    def hot(self):
        self.gos[0]()
        self.q.finish()

    def cold(self):
        """The next weight copy (the others have evicted it from the cache)."""
        self.turn = (self.turn + 1) % len(self.gos)
        self.gos[self.turn]()
        self.q.finish()

    def numpy(self):
        return gguf_dequant(self.packed, self.qtype).reshape(N, K) @ self.x.T

    def blas(self):
        return self.x @ self.w.T


def gguf_dequant(packed, qtype):
    import gguf

    return gguf.quants.dequantize(packed, qtype)


def measure(cases, probe, rounds: int) -> tuple[list, list]:
    """Per round: the bandwidth probe, then every case's systems in turn."""
    nbytes, bw_run = probe
    bws, per = [], [dict(hot=[], cold=[], numpy=[], blas=[]) for _ in cases]
    for r in range(rounds):
        bws.append(nbytes / timed(bw_run) / 1e9)
        for c, rec in zip(cases, per):
            rec["hot"].append(timed(c.hot, 5))
            if c.m == 1:
                rec["cold"].append(timed(c.cold, 5))
            rec["blas"].append(timed(c.blas, 3))
            if r < 3:                   # gguf-py's decode takes a tenth of a second
                rec["numpy"].append(timed(c.numpy, 1))
    return bws, per


def summary(cases, bws, per) -> list:
    rows = []
    for c, rec in zip(cases, per):
        nb = c.packed.nbytes
        row = {"scheme": c.name, "m": c.m, "path": c.plan.path, "packed_bytes": nb,
               "hot_ms": MED(rec["hot"]) * 1e3, "best_ms": min(rec["hot"]) * 1e3,
               "numpy_ms": MED(rec["numpy"]) * 1e3, "blas_f32_ms": MED(rec["blas"]) * 1e3,
               "vs_blas": MED([b / h for b, h in zip(rec["blas"], rec["hot"])])}
        row["gflops"] = 2 * c.m * N * K / row["hot_ms"] / 1e6
        if rec["cold"]:
            row["cold_ms"] = MED(rec["cold"]) * 1e3
            row["cold_gbs"] = nb / row["cold_ms"] / 1e6
            row["cold_vs_bw"] = MED([nb / t / 1e9 / b for t, b in zip(rec["cold"], bws)])
            row["hot_gbs"] = nb / row["hot_ms"] / 1e6
        rows.append(row)
    return rows


def table(rows: list, bws: list) -> str:
    lines = [f"Read bandwidth (OpenCL kernel summing 256 MB, each round): median "
             f"**{MED(bws):.1f} GB/s** (rounds {min(bws):.1f}-{max(bws):.1f})", "",
             "| scheme | m | path | ms | best ms | GFLOP/s | hot GB/s | cold ms | cold GB/s "
             "| cold / bandwidth | numpy ms | f32 BLAS ms | f32 BLAS / this |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cold = (f"{r['cold_ms']:.3f} | {r['cold_gbs']:.1f} | {r['cold_vs_bw']:.0%}"
                if "cold_ms" in r else "– | – | –")
        hot_gbs = f"{r['hot_gbs']:.1f}" if "hot_gbs" in r else "–"
        lines.append(f"| {r['scheme']} | {r['m']} | {r['path']} | {r['hot_ms']:.3f} | "
                     f"{r['best_ms']:.3f} | {r['gflops']:.1f} | {hot_gbs} | {cold} | "
                     f"{r['numpy_ms']:.1f} | {r['blas_f32_ms']:.2f} | {r['vs_blas']:.2f}× |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schemes", default="Q4_0,Q4_K,Q8_0")
    ap.add_argument("--rows", default="1,128")
    ap.add_argument("--style", default="auto", choices=("auto", "cpu", "gpu"))
    ap.add_argument("--device", default=None)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    import os

    from rlx_ref.backends.opencl import quant_ops
    from rlx_ref.backends.opencl.devices import context_for

    info, cx, q = context_for(args.device)
    dev = (dataclasses.replace(info, kernels=args.style), cx, q)
    rng = np.random.default_rng(0)
    probe = bandwidth_probe(quant_ops.standalone_ctx(dev))
    cases = [Case(dev, name, int(m), rng) for name in args.schemes.split(",")
             for m in args.rows.split(",")]
    load = os.getloadavg()[0]
    bws, per = measure(cases, probe, args.rounds)
    rows = summary(cases, bws, per)
    print(f"device: {info.label}, {info.driver_summary}, kernels: {args.style}; "
          f"load average {load:.1f} -> {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs")
    print(table(rows, bws))
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"device": info.label, "style": args.style, "read_bandwidth_gbs": bws,
             "load_average": [load, os.getloadavg()[0]], "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
