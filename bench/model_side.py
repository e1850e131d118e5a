"""One zoo model on numba-cpu beside torch eager, interleaved in one process.

    python bench/model_side.py resnet18 [--batch 1] [--rounds 7] [--profile]

Prints the least and median wall ms of each (see ``conv_layers.bench``) and, with
``--profile``, numba-cpu's per-kind step times (``model_profile``)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def main():
    import torch

    from conv_layers import bench
    from rlx_ref.models import torch_zoo
    from rlx_ref.torch_import import from_torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", choices=["resnet18", "mobilenet_v3_small"])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2, help="torch's intra-op threads")
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model = getattr(torch_zoo, a.model)(seed=0)
    x = torch.randn(a.batch, 3, 224, 224)
    prog = from_torch(model, (x,))
    exe = prog.compile("numba-cpu")
    feeds = prog.feeds(x.numpy())

    def eager():
        with torch.no_grad():
            return model(x)
    r = bench({"numba-cpu": lambda: exe.run(feeds), "torch": eager}, a.rounds)
    for k, (wall, cpu) in r.items():
        print(f"{a.model} b{a.batch} {k:10s} least {wall:7.2f} ms  cpu {cpu:7.2f} ms")
    print(f"ratio numba/torch (least wall): {r['numba-cpu'][0] / r['torch'][0]:.2f}")
    if a.profile:
        from model_profile import format_profile, profile_numba

        print(format_profile(profile_numba(exe, feeds, runs=3), top=10))


if __name__ == "__main__":
    main()
