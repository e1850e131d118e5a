"""DequantMatMul on OpenCL (the fused GGUF kernels) for a 4096 × 4096 weight, GEMV (m = 1)
and prefill (m = 128), beside the machine's measured read bandwidth and the peers a user
would pick instead, all in one process.

    python bench/dequant_matmul_cl.py [--schemes Q4_0,Q4_K,Q8_0] [--rows 1,128]
                                      [--style auto|cpu|gpu] [--device SPEC] [--json OUT]

Columns: ``hot`` repeats one product on one weight (it stays in the last-level cache
when it fits: 9-18 MB against 32 MB of L3 here); ``cold`` (m = 1) cycles through enough
copies of the weight to overflow the cache, so each GEMV reads its weight from DRAM, the
figure to hold against the bandwidth. GB/s counts the packed weight bytes only. Peers:
``numpy`` is gguf-py's dequant then BLAS ``x @ Wᵀ``; ``f32 BLAS`` the same product with W
already f32 (the prefill target is 0.7× of it). Medians of repeated runs after a warm-up;
each result is checked against float64 first.
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


def median_time(fn, reps: int) -> float:
    fn()
    runs = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def random_weight(rng, name: str, geo: tuple) -> np.ndarray:
    """Packed [N, K] weight: random quants, finite scales of a realistic size."""
    bs, bb = geo
    nb = N * K // bs
    raw = rng.integers(0, 256, size=(nb, bb), dtype=np.uint8)
    for off in F16_FIELDS[name]:
        raw[:, off:off + 2] = rng.uniform(-0.02, 0.02, nb).astype(np.float16) \
            .view(np.uint8).reshape(nb, 2)
    return raw.reshape(-1)


def read_bandwidth(ctx, reps: int) -> float:
    """GB/s of an OpenCL kernel that sums 256 MB (a run of float16 vectors per item)."""
    import pyopencl as cl

    from rlx_ref.backends.opencl import memory

    n, items = 64 << 20, 256
    src = """
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
    ref = ctx.kernel(src, "bw_sum")
    a = memory.upload(ctx.program.context, ctx.queue, np.ones(n, np.float32))
    o = memory.empty(ctx.program.context, (items,), np.float32)
    kern = ref.make()
    kern.set_args(a.buf, o.buf, np.int64(n // items))

    def run():
        cl.enqueue_nd_range_kernel(ctx.queue, kern, (items,), (1,))
        ctx.queue.finish()
    return n * 4 / median_time(run, reps) / 1e9


def bench_scheme(dev, name: str, rows, reps: int, rng) -> list:
    import gguf

    from rlx_ref.backends.opencl import memory, quant_ops
    from rlx_ref.backends.opencl._quant_matmul import QuantMatMul, geometry

    dec, geo = geometry(name)
    packed = random_weight(rng, name, geo)
    w = gguf.quants.dequantize(packed, getattr(gguf.GGMLQuantizationType, name))
    w = np.ascontiguousarray(w.reshape(N, K), np.float32)
    out_rows = []
    for m in rows:
        ctx = quant_ops.standalone_ctx(dev)
        cx, q = ctx.program.context, ctx.queue
        x = rng.standard_normal((m, K)).astype(np.float32)
        plan = QuantMatMul(ctx, name, m, N, K)
        xd, pd = memory.upload(cx, q, x.reshape(-1)), memory.upload(cx, q, packed)
        od = memory.empty(cx, (m * N,), np.float32)
        go = plan.bind(od, xd, pd)
        go()
        got = od.get(q).reshape(m, N)
        ref = x[:4].astype(np.float64) @ w.astype(np.float64).T
        size = np.abs(x[:4]).astype(np.float64) @ np.abs(w).astype(np.float64).T
        assert (np.abs(got[:4] - ref) <= (K + 2) * 2.0 ** -23 * size + 1e-30).all(), name

        def hot():
            go()
            q.finish()
        row = {"scheme": name, "m": m, "path": plan.path, "packed_bytes": packed.nbytes,
               "hot_s": median_time(hot, reps)}
        if m == 1:
            row["cold_s"] = cold_gemv(ctx, plan, packed, xd, reps)
        t_np = median_time(lambda: gguf.quants.dequantize(
            packed, getattr(gguf.GGMLQuantizationType, name)).reshape(N, K) @ x.T,
            max(3, reps // 4))
        row["numpy_s"] = t_np
        row["blas_f32_s"] = median_time(lambda: x @ w.T, reps)
        out_rows.append(row)
    return out_rows


def cold_gemv(ctx, plan, packed, xd, reps: int) -> float:
    """Median GEMV time cycling through copies of the weight (> 2× a 32 MB L3)."""
    from rlx_ref.backends.opencl import memory

    cx, q = ctx.program.context, ctx.queue
    copies = max(2, -(-80 * 2 ** 20 // packed.nbytes))
    weights = [memory.upload(cx, q, packed) for _ in range(copies)]
    od = memory.empty(cx, (plan.n,), np.float32)
    gos = [plan.bind(od, xd, wd) for wd in weights]
    for go in gos:
        go()
    q.finish()
    runs = []
    for i in range(max(reps, copies)):
        t = time.perf_counter()
        gos[i % copies]()
        q.finish()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def table(rows: list, bw: float) -> str:
    lines = [f"Read bandwidth (OpenCL stream over 256 MB, same run): **{bw:.1f} GB/s**", "",
             "| scheme | m | path | hot ms | hot GB/s | cold ms | cold GB/s | cold / bw "
             "| GFLOP/s | numpy ms | f32 BLAS ms | vs f32 BLAS |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        gbs = r["packed_bytes"] / r["hot_s"] / 1e9
        flops = 2 * r["m"] * N * K / r["hot_s"] / 1e9
        cold = r.get("cold_s")
        cold_cells = (f"{cold * 1e3:.3f} | {r['packed_bytes'] / cold / 1e9:.1f} | "
                      f"{r['packed_bytes'] / cold / 1e9 / bw:.0%}") if cold else "– | – | –"
        lines.append(f"| {r['scheme']} | {r['m']} | {r['path']} | {r['hot_s'] * 1e3:.3f} | "
                     f"{gbs:.1f} | {cold_cells} | {flops:.1f} | {r['numpy_s'] * 1e3:.1f} | "
                     f"{r['blas_f32_s'] * 1e3:.2f} | {r['blas_f32_s'] / r['hot_s']:.2f}× |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schemes", default="Q4_0,Q4_K,Q8_0")
    ap.add_argument("--rows", default="1,128")
    ap.add_argument("--style", default="auto", choices=("auto", "cpu", "gpu"))
    ap.add_argument("--device", default=None)
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    from rlx_ref.backends.opencl import quant_ops
    from rlx_ref.backends.opencl.devices import context_for

    info, cx, q = context_for(args.device)
    dev = (dataclasses.replace(info, kernels=args.style), cx, q)
    rng = np.random.default_rng(0)
    bw = read_bandwidth(quant_ops.standalone_ctx(dev), 5)
    rows = []
    for name in args.schemes.split(","):
        rows += bench_scheme(dev, name, [int(r) for r in args.rows.split(",")], args.reps,
                             rng)
    print(f"device: {info.label}, {info.driver_summary}, kernels: {args.style}")
    print(table(rows, bw))
    if args.json:
        Path(args.json).write_text(json.dumps({"device": info.label, "style": args.style,
                                               "read_bandwidth_gbs": bw, "rows": rows},
                                              indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
