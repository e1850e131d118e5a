"""GPT-2's MatMul shapes on numba-cpu beside numpy, interleaved in one process.

    python bench/matmul_shapes.py [--rounds 7]

Each shape is one MatMul graph (f32); see ``conv_layers.bench`` for the timing."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

SHAPES = [(128, 768, 2304), (128, 768, 768), (128, 768, 3072), (128, 3072, 768),
          (128, 768, 50257), (1, 768, 2304), (1, 768, 3072), (1, 3072, 768),
          (1, 768, 50257)]


def main():
    import rlx_ref
    from conv_layers import bench
    from rlx_ref.backends.registry import get_backend

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    tot = np.zeros(4)
    print(f"{'M x K x N':18s} {'numba':>13s} {'numpy':>13s} {'ratio':>6s}  (least wall, cpu ms)")
    for m, k, n in SHAPES:
        g = rlx_ref.Graph("mm")
        x, w = g.input("a", [m, k]), g.input("b", [k, n])
        g.set_outputs([g.op("MatMul", [x, w])])
        feeds = {"a": rng.standard_normal((m, k), np.float32),
                 "b": rng.standard_normal((k, n), np.float32)}
        exe = get_backend("numba-cpu").compile(g)
        r = bench({"numba": lambda: exe.run(feeds), "numpy": lambda: feeds["a"] @ feeds["b"]},
                  a.rounds)
        tot += np.array(r["numba"] + r["numpy"])
        print(f"{m}x{k}x{n:<10d} {r['numba'][0]:6.2f} {r['numba'][1]:6.2f} "
              f"{r['numpy'][0]:6.2f} {r['numpy'][1]:6.2f} {r['numba'][0] / r['numpy'][0]:6.2f}",
              flush=True)
    print(f"{'total':18s} {tot[0]:6.2f} {tot[1]:6.2f} {tot[2]:6.2f} {tot[3]:6.2f} "
          f"{tot[0] / tot[2]:6.2f}")


if __name__ == "__main__":
    main()
