"""A llama-style decoder end to end through GGUF, on every available backend.

Seeded f32 weights are saved as safetensors and converted to GGUF at Q8_0, Q4_0 and Q4_K;
each file is loaded with its linears kept packed (DequantMatMul) and greedy-decodes 32
tokens. Printed: each run's tokens against the oracle's for the same file, and the
quantized logits' error against the f32 model on the f32 model's own token sequence.

    python examples/gguf_llama.py [--devices reference,numba-cpu,opencl] [--steps 32]
"""
import argparse
import tempfile
import time

from rlx_ref.models import llama as L
from rlx_ref.models import llama_gguf as E

SCHEMES = ("Q8_0", "Q4_0", "Q4_K")


def build_graphs(seq: int = 8) -> dict:
    """The f32 decoder graph this example builds, name -> (graph, params), with a small
    config and seeded weights (the GGUF runs pack the same graph's linears)."""
    cfg = L.LlamaConfig(vocab=32, dim=32, layers=1, heads=2, kv_heads=1, ffn=64)
    graph = L.build_graph(cfg, seq)
    return {"llama": (graph, L.graph_params(cfg, L.random_weights(cfg, 0)))}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", default="reference,numba-cpu,opencl")
    ap.add_argument("--steps", type=int, default=32)
    args = ap.parse_args(argv)
    cfg, prompt = L.LlamaConfig(), [1, 2, 3, 4, 5, 6, 7, 8]
    seq = len(prompt) + args.steps - 1
    with tempfile.TemporaryDirectory() as tmp:
        paths = E.write_model_files(tmp, cfg, SCHEMES, seed=0)
        f32 = E.load_runner("reference", cfg, seq, paths["F32"])
        f32_toks, _ = L.greedy_decode(f32, cfg, prompt, args.steps, seq)
        forced = prompt + f32_toks[:-1]
        f32_logits = E.logits_on(f32, cfg, forced, seq)
        print(f"f32 oracle: {f32_toks}")
        for scheme in SCHEMES:
            oracle = None
            for device in args.devices.split(","):
                try:
                    run = E.load_runner(device, cfg, seq, paths[scheme])
                except Exception as e:   # noqa: BLE001 - a missing device is reported
                    print(f"{scheme:5} {device:10} unavailable: {str(e).splitlines()[0]}")
                    continue
                t0 = time.perf_counter()
                toks, _ = L.greedy_decode(run, cfg, prompt, args.steps, seq)
                dt = time.perf_counter() - t0
                oracle = oracle or toks
                same = "same as the oracle" if toks == oracle else "DIFFERS from the oracle"
                print(f"{scheme:5} {device:10} {same}, {args.steps / dt:6.1f} tokens/s")
            q_logits = E.logits_on(E.load_runner("reference", cfg, seq, paths[scheme]),
                                   cfg, forced, seq)
            mx, rms = E.relative_error(q_logits[len(prompt) - 1:],
                                       f32_logits[len(prompt) - 1:])
            print(f"{scheme:5} logits vs f32: max {mx:.4f}, rms {rms:.4f} (relative)")


if __name__ == "__main__":
    main()
