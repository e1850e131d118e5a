"""A small llama-style decoder: RmsNorm, Rope, GQA attention, SwiGLU MLP, tied embeddings.

Weights use GGUF's tensor names and GGML's orientation (a linear layer's weight is
``[out_features, in_features]``), so the same dict can be saved as safetensors, converted
to GGUF at any scheme and fed back. ``build_graph`` turns a config and the per-tensor
storage (``"F32"`` or a GGUF scheme such as ``"Q4_K"``) into one graph over a fixed
sequence length: f32 linears are ``MatMul`` against the transposed weight, quantized ones
``DequantMatMul`` over the packed bytes (``out = x @ W^T``, the weight never expanded).
Greedy decoding runs that one graph with the sequence padded: causal attention makes
position ``t``'s logits independent of the padding after it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.dtype import DType
from ..ir.graph import Graph
from ..ir.shape import Shape


@dataclass(frozen=True)
class LlamaConfig:
    """Sizes. Linear input widths (dim, ffn) are multiples of 256 so K-quants apply."""

    vocab: int = 256
    dim: int = 256
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    ffn: int = 512
    eps: float = 1e-5
    rope_theta: float = 10000.0

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads

    def linear_shapes(self) -> dict:
        """GGUF name -> [out, in] of every linear weight (the tied embedding included)."""
        kv = self.kv_heads * self.head_dim
        shapes = {"token_embd.weight": (self.vocab, self.dim)}
        for i in range(self.layers):
            b = f"blk.{i}."
            shapes.update({b + "attn_q.weight": (self.dim, self.dim),
                           b + "attn_k.weight": (kv, self.dim),
                           b + "attn_v.weight": (kv, self.dim),
                           b + "attn_output.weight": (self.dim, self.dim),
                           b + "ffn_gate.weight": (self.ffn, self.dim),
                           b + "ffn_up.weight": (self.ffn, self.dim),
                           b + "ffn_down.weight": (self.dim, self.ffn)})
        return shapes

    def norm_names(self) -> list:
        names = [f"blk.{i}.{n}_norm.weight" for i in range(self.layers)
                 for n in ("attn", "ffn")]
        return names + ["output_norm.weight"]


def random_weights(cfg: LlamaConfig, seed: int = 0) -> dict:
    """f32 weights from ``seed``: scaled normals for linears, 1 ± 0.1 for norm gains.

    The embedding is small (0.1 against the linears' 1/sqrt(fan_in)) so the layers, not
    the tied embedding's self-similarity, pick the next token: greedy decoding then moves
    over the vocabulary instead of repeating the last token.
    """
    rng = np.random.default_rng(seed)
    out = {}
    for name, (rows, cols) in cfg.linear_shapes().items():
        scale = 0.1 if name == "token_embd.weight" else 1.0 / np.sqrt(cols)
        out[name] = (rng.standard_normal((rows, cols)) * scale).astype(np.float32)
    for name in cfg.norm_names():
        out[name] = (1.0 + 0.1 * rng.standard_normal(cfg.dim)).astype(np.float32)
    return out


def rope_tables(cfg: LlamaConfig, seq: int) -> tuple:
    """(cos, sin) [seq, head_dim/2] f32 for NeoX-style rotation of whole heads."""
    half = cfg.head_dim // 2
    inv = cfg.rope_theta ** (-np.arange(half, dtype=np.float64) / half)
    ang = np.arange(seq, dtype=np.float64)[:, None] * inv[None, :]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


class _Linears:
    """Appends one linear layer per call, f32 or quantized by the weight's storage."""

    def __init__(self, g: Graph, cfg: LlamaConfig, storage: dict, nbytes: dict):
        self.g, self.cfg, self.storage, self.nbytes = g, cfg, storage, nbytes
        self.params: dict = {}

    def __call__(self, x2d: int, name: str) -> int:
        g = self.g
        if name not in self.params:
            rows, cols = self.cfg.linear_shapes()[name]
            kind = self.storage.get(name, "F32")
            if kind == "F32":
                self.params[name] = g.param(name, [cols, rows])      # W^T, fed transposed
            else:
                self.params[name] = g.param(name, [self.nbytes[name]], "u8")
        rows, cols = self.cfg.linear_shapes()[name]
        w = self.params[name]
        kind = self.storage.get(name, "F32")
        if kind == "F32":
            return g.matmul(x2d, w)
        from ..quant import get_scheme

        m = g.shape(x2d).dims[0]
        return g.op("DequantMatMul", (x2d, w), scheme=get_scheme(kind).rlx,
                    shape=_shape([m, rows]))


def _shape(dims):
    return Shape(tuple(dims), DType.F32)


def build_graph(cfg: LlamaConfig, seq: int, storage: dict | None = None,
                nbytes: dict | None = None) -> Graph:
    """The decoder over ``seq`` tokens -> logits [seq, vocab].

    Inputs: ``tokens`` [1, seq] i64, ``rope_cos``/``rope_sin`` [seq, head_dim/2]. Params:
    ``token_embd.f32`` [vocab, dim] (the embedding rows for the lookup), the norm gains,
    and one param per linear named as in GGUF (``[in, out]`` f32, or the packed u8 bytes
    of ``storage[name]``'s scheme, ``nbytes[name]`` long).
    """
    storage, nbytes = dict(storage or {}), dict(nbytes or {})
    g = Graph("llama")
    d, hd = cfg.dim, cfg.head_dim
    tokens = g.input("tokens", [1, seq], "i64")
    cos, sin = g.input("rope_cos", [seq, hd // 2]), g.input("rope_sin", [seq, hd // 2])
    zeros = g.param("zeros.dim", [d])
    lin = _Linears(g, cfg, storage, nbytes)

    def norm(x, name):
        return g.op("RmsNorm", (x, g.param(name, [d]), zeros), axis=-1, eps=cfg.eps)

    def rope(x):
        return g.op("Rope", (x, cos, sin), head_dim=hd, n_rot=hd, style="NeoX")

    h = g.reshape(g.gather(g.param("token_embd.f32", [cfg.vocab, d]), tokens, axis=0),
                  [seq, d])
    for i in range(cfg.layers):
        b = f"blk.{i}."
        a = norm(h, b + "attn_norm.weight")
        q = rope(g.reshape(lin(a, b + "attn_q.weight"), [1, seq, d]))
        k = rope(g.reshape(lin(a, b + "attn_k.weight"), [1, seq, cfg.kv_heads * hd]))
        v = g.reshape(lin(a, b + "attn_v.weight"), [1, seq, cfg.kv_heads * hd])
        att = g.attention(q, k, v, num_heads=cfg.heads, head_dim=hd, v_head_dim=None,
                          mask_kind="Causal", score_scale=None, attn_logit_softcap=None)
        h = g.add(h, lin(g.reshape(att, [seq, d]), b + "attn_output.weight"))
        m = norm(h, b + "ffn_norm.weight")
        gate = g.activation("Silu", lin(m, b + "ffn_gate.weight"))
        h = g.add(h, lin(g.mul(gate, lin(m, b + "ffn_up.weight")), b + "ffn_down.weight"))
    g.set_outputs([lin(norm(h, "output_norm.weight"), "token_embd.weight")])
    return g


def graph_params(cfg: LlamaConfig, weights: dict, packed: dict | None = None) -> dict:
    """Param values for ``build_graph``: f32 weights transposed, packed bytes as given.

    ``weights`` holds the f32 (or dequantized) tensors by GGUF name; ``packed`` the u8
    bytes of the quantized ones. The embedding lookup reads ``weights['token_embd.weight']``.
    """
    packed = packed or {}
    out = {"zeros.dim": np.zeros(cfg.dim, np.float32),
           "token_embd.f32": np.ascontiguousarray(weights["token_embd.weight"], np.float32)}
    for name in cfg.norm_names():
        out[name] = np.asarray(weights[name], np.float32)
    for name in cfg.linear_shapes():
        if name in packed:
            out[name] = np.ascontiguousarray(packed[name], np.uint8).reshape(-1)
        else:
            out[name] = np.ascontiguousarray(np.asarray(weights[name], np.float32).T)
    return out


def greedy_decode(run, cfg: LlamaConfig, prompt, steps: int, seq: int):
    """Greedy-decode ``steps`` tokens after ``prompt`` with ``run(inputs) -> logits``.

    Returns (tokens, logits per step [steps, vocab]). ``seq`` >= len(prompt) + steps - 1.
    """
    toks = [int(t) for t in prompt]
    if seq < len(toks) + steps - 1:
        raise ValueError(f"seq={seq} cannot hold {len(toks)} prompt tokens + {steps} steps")
    cos, sin = rope_tables(cfg, seq)
    step_logits = []
    for _ in range(steps):
        buf = np.zeros((1, seq), np.int64)
        buf[0, :len(toks)] = toks
        logits = np.asarray(run({"tokens": buf, "rope_cos": cos, "rope_sin": sin}))
        row = logits[len(toks) - 1]
        step_logits.append(row.astype(np.float32))
        toks.append(int(np.argmax(row)))
    return toks[len(prompt):], np.stack(step_logits)


def from_gguf(reader, cfg: LlamaConfig) -> tuple:
    """(storage, nbytes, weights, packed) for ``build_graph``/``graph_params`` from a GGUF.

    Quantized linears stay packed (their bytes as stored); every tensor is also decoded
    into ``weights`` because the embedding lookup and the norms read f32 values.
    """
    storage, nbytes, weights, packed = {}, {}, {}, {}
    linears = cfg.linear_shapes()
    for name in list(linears) + cfg.norm_names():
        info = reader.tensor_info(name)
        weights[name] = np.asarray(reader.dequant_tensor(name), np.float32)
        if name in linears and info.ggml_type not in ("F32", "F16", "BF16", "F64"):
            storage[name] = info.ggml_type
            packed[name] = np.asarray(reader.read_tensor_bytes(name), np.uint8).reshape(-1)
            nbytes[name] = packed[name].size
    return storage, nbytes, weights, packed
