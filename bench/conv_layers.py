"""Per-layer Conv and Pool time on numba-cpu beside numpy's GEMM and torch, one process.

The layers are those of the zoo's ResNet-18 and MobileNetV3-small (distinct shapes, found
with forward hooks). Every system runs each layer in turn, round after round (see
``bench``), so load from other work on the machine hits all of them alike.
``gemm`` is numpy's product for the same shape on a ready im2col matrix (one per image and
group; depthwise layers have none) and ``copy`` the cost of writing that matrix once, the
least an unfold costs.

    python bench/conv_layers.py [--batch 1 8] [--rounds 15] [--model resnet18 mobilenet]
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def conv_layers(model_name: str, batch: int):
    """Distinct (kind, x shape, attrs) of the model's Conv2d and pooling layers."""
    import torch
    from torch import nn

    from rlx_ref.models import torch_zoo

    model = getattr(torch_zoo, {"resnet18": "resnet18",
                                "mobilenet": "mobilenet_v3_small"}[model_name])(seed=0)
    seen, hooks = {}, []

    def hook(mod, args, _out):
        shape = tuple(args[0].shape)
        if isinstance(mod, nn.Conv2d):
            key = ("conv", shape, tuple(mod.weight.shape), mod.stride, mod.padding,
                   mod.groups)
        else:
            key = ("pool", shape, mod.kernel_size, mod.stride, mod.padding)
        seen.setdefault(key, None)
    for mod in model.modules():
        if isinstance(mod, (nn.Conv2d, nn.MaxPool2d)):
            hooks.append(mod.register_forward_hook(hook))
    with torch.no_grad():
        model(torch.zeros(batch, 3, 224, 224))
    for h in hooks:
        h.remove()
    return list(seen)


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def systems(layer):
    """name -> zero-argument callable for one layer."""
    import torch
    import torch.nn.functional as F

    import rlx_ref
    from rlx_ref.backends.registry import get_backend

    rng = np.random.default_rng(0)
    g = rlx_ref.Graph("layer")
    if layer[0] == "conv":
        _, xs, ws, stride, pad, groups = layer
        x = rng.standard_normal(xs, np.float32)
        w = (rng.standard_normal(ws, np.float32) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
        xi, wi = g.input("x", list(xs)), g.input("w", list(ws))
        g.set_outputs([g.op("Conv", [xi, wi], kernel_size=ws[2:], stride=stride,
                            padding=pad, groups=groups)])
        feeds = {"x": x, "w": w}
        tx, tw = torch.from_numpy(x), torch.from_numpy(w)
        out = {"torch": lambda: F.conv2d(tx, tw, stride=stride, padding=pad, groups=groups)}
        ho = (xs[2] + 2 * pad[0] - ws[2]) // stride[0] + 1
        wo = (xs[3] + 2 * pad[1] - ws[3]) // stride[1] + 1
        kk, cog = ws[1] * ws[2] * ws[3], ws[0] // groups
        if ws[1] > 1:                     # depthwise has no GEMM worth the name
            cols = rng.standard_normal((xs[0], groups, kk, ho * wo), np.float32)
            w3 = w.reshape(groups, cog, kk)
            res = np.empty((xs[0], groups, cog, ho * wo), np.float32)
            spare = np.empty_like(cols)

            def gemm():
                for n in range(xs[0]):
                    for gi in range(groups):
                        np.dot(w3[gi], cols[n, gi], res[n, gi])
            out["gemm"] = gemm
            out["copy"] = lambda: np.copyto(spare, cols)
    else:
        _, xs, k, stride, pad = layer
        x = rng.standard_normal(xs, np.float32)
        xi = g.input("x", list(xs))
        g.set_outputs([g.op("Pool", [xi], kind="Max", kernel_size=_pair(k),
                            stride=_pair(stride), padding=_pair(pad))])
        feeds = {"x": x}
        tx = torch.from_numpy(x)
        out = {"torch": lambda: F.max_pool2d(tx, k, stride, pad)}
    exe = get_backend("numba-cpu").compile(g)
    out["numba-cpu"] = lambda: exe.run(feeds)
    return out


def bench(runs: dict, rounds: int) -> dict:
    """name -> (least wall ms, median CPU ms) per call; each round runs every system in
    turn, after a pause and two warm calls, timing three calls. On a shared machine the
    least wall time is the one least hit by other work, and the CPU time (all threads;
    run with OMP_WAIT_POLICY=PASSIVE so idle threads do not spin) the work done."""
    wall = {k: [] for k in runs}
    cpu = {k: [] for k in runs}
    for _ in range(rounds):
        for k, fn in runs.items():
            time.sleep(0.01)
            fn()
            fn()
            for _ in range(3):
                t, c = time.perf_counter(), time.process_time()
                fn()
                wall[k].append(time.perf_counter() - t)
                cpu[k].append(time.process_time() - c)
    return {k: (1e3 * min(wall[k]), 1e3 * float(np.median(cpu[k]))) for k in runs}


def describe(layer) -> str:
    if layer[0] == "conv":
        _, xs, ws, stride, _, groups = layer
        dw = " dw" if groups > 1 and ws[1] == 1 else ""
        return (f"conv {'x'.join(map(str, xs))} w{'x'.join(map(str, ws))} "
                f"s{stride[0]}{dw}")
    return f"maxpool {'x'.join(map(str, layer[1]))} k{layer[2]} s{layer[3]}"


def main():
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--model", nargs="+", default=["resnet18", "mobilenet"])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2, help="torch's intra-op threads")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print("wall: least ms; cpu: median CPU ms of all threads (OMP_WAIT_POLICY=PASSIVE)")
    print(f"{'layer':40s} {'numba':>13s} {'torch':>13s} {'gemm':>13s} {'copy':>5s} "
          f"{'/torch':>5s} {'/gemm+c':>7s}  (wall cpu)")
    nan = (float("nan"),) * 2
    for model in a.model:
        for batch in a.batch:
            tot = {"numba-cpu": np.zeros(2), "torch": np.zeros(2)}
            for layer in conv_layers(model, batch):
                r = bench(systems(layer), a.rounds)
                for k in tot:
                    tot[k] += r[k]
                base = r.get("gemm", nan)[0] + r.get("copy", (0.0,))[0]
                cell = " ".join(f"{r.get(k, nan)[0]:6.2f} {r.get(k, nan)[1]:6.2f}"
                                for k in ("numba-cpu", "torch", "gemm"))
                print(f"{describe(layer):40s} {cell} {r.get('copy', nan)[0]:5.2f} "
                      f"{r['numba-cpu'][0] / r['torch'][0]:5.2f} "
                      f"{r['numba-cpu'][0] / base:7.2f}", flush=True)
            nb, tt = tot["numba-cpu"], tot["torch"]
            print(f"-- {model} b{batch} distinct layers (wall, cpu ms): numba {nb[0]:.2f} "
                  f"{nb[1]:.2f}, torch {tt[0]:.2f} {tt[1]:.2f}", flush=True)

if __name__ == "__main__":
    main()
