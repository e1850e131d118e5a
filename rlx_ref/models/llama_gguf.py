"""The llama decoder end to end through GGUF: f32 weights -> safetensors -> GGUF -> decode.

``write_model_files`` saves seeded f32 weights as safetensors and converts them to one
GGUF file per scheme; ``load_runner`` compiles the decoder for a device from a GGUF file
(or from the f32 weights) with its quantized linears kept packed; ``logits_on`` runs a
fixed token sequence (teacher forcing), so quantized and f32 logits can be compared.
"""
from __future__ import annotations

import os

import numpy as np

from . import llama as L


def write_model_files(directory, cfg: L.LlamaConfig, schemes, seed: int = 0) -> dict:
    """{"F32": safetensors path, scheme: GGUF path...} for ``random_weights(cfg, seed)``."""
    from ..quant import convert_to_gguf
    from ..quant.safetensors import save_safetensors

    src = os.path.join(directory, "llama-f32.safetensors")
    save_safetensors(src, L.random_weights(cfg, seed))
    paths = {"F32": src}
    for scheme in schemes:
        paths[scheme] = os.path.join(directory, f"llama-{scheme}.gguf")
        convert_to_gguf(src, paths[scheme], scheme)
    return paths


def load_runner(device: str, cfg: L.LlamaConfig, seq: int, path: str):
    """``run(inputs) -> logits [seq, vocab]`` for the model at ``path`` on ``device``."""
    from ..runtime.session import Session

    if path.endswith(".safetensors"):
        from ..quant.safetensors import load_safetensors

        storage, nbytes, packed = {}, {}, {}
        with load_safetensors(path) as st:
            weights = {name: np.array(st.tensor(name)) for name in st.names()}
    else:
        from ..quant import load_gguf

        with load_gguf(path) as reader:
            storage, nbytes, weights, packed = L.from_gguf(reader, cfg)
    exe = Session(device=device).compile(L.build_graph(cfg, seq, storage, nbytes))
    for name, value in L.graph_params(cfg, weights, packed).items():
        exe.set_param(name, value)
    return lambda inputs: exe.run(inputs)[0]


def logits_on(run, cfg: L.LlamaConfig, tokens, seq: int) -> np.ndarray:
    """Logits [len(tokens), vocab] of ``tokens`` run as one padded sequence."""
    buf = np.zeros((1, seq), np.int64)
    buf[0, :len(tokens)] = tokens
    cos, sin = L.rope_tables(cfg, seq)
    out = run({"tokens": buf, "rope_cos": cos, "rope_sin": sin})
    return np.asarray(out)[:len(tokens)]


def relative_error(got: np.ndarray, want: np.ndarray) -> tuple:
    """(max |Δ| / max |want|, rms Δ / rms want) of two logit arrays."""
    d = np.abs(got.astype(np.float64) - want)
    return (float(d.max() / np.abs(want).max()),
            float(np.sqrt((d ** 2).mean() / (want.astype(np.float64) ** 2).mean())))
