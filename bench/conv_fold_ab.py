"""A zoo model on numba-cpu with and without FusedConvBiasAct, beside torch eager,
interleaved in one process (so machine load hits all three alike).

    python bench/conv_fold_ab.py mobilenet_v3_small [--rounds 9]

"plain" compiles with FusedConvBiasAct left out of the claimed table, so conv, the folded
BatchNorm's Mul/Add, residual Adds and activations run as separate steps."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def main():
    import torch

    from conv_layers import bench
    from rlx_ref.backends.registry import get_backend
    from rlx_ref.models import torch_zoo
    from rlx_ref.runtime.options import CompileOptions
    from rlx_ref.torch_import import from_torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", choices=["resnet18", "mobilenet_v3_small"])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2, help="torch's intra-op threads")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model = getattr(torch_zoo, a.model)(seed=0)
    x = torch.randn(a.batch, 3, 224, 224)
    prog = from_torch(model, (x,))
    be = get_backend("numba-cpu")
    paths = be.paths()
    table = {k: v for k, v in be.supported_ops().items()
             if k != "FusedConvBiasAct" and paths.get(k) != "decomposed"}
    fused = prog.compile("numba-cpu")
    plain = prog.compile("numba-cpu", CompileOptions(supported_ops=table))
    n = sum(node.kind == "FusedConvBiasAct" for node in fused.graph.nodes)
    print(f"{a.model}: {n} FusedConvBiasAct steps fused, "
          f"{len(fused.graph.nodes)} against {len(plain.graph.nodes)} nodes")
    feeds = prog.feeds(x.numpy())

    def eager():
        with torch.no_grad():
            return model(x)
    r = bench({"fused": lambda: fused.run(feeds), "plain": lambda: plain.run(feeds),
               "torch": eager}, a.rounds)
    for k, (wall, cpu) in r.items():
        print(f"{a.model} b{a.batch} {k:6s} least {wall:7.2f} ms  cpu {cpu:7.2f} ms  "
              f"/torch {wall / r['torch'][0]:.2f}")


if __name__ == "__main__":
    main()
