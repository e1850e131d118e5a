"""Two small models to train end to end, with their synthetic data.

- ``mlp_classifier``: a 2-layer Gelu MLP classifying points of three interleaved
  spirals (``spirals``); loss = mean softmax cross-entropy.
- ``transformer_lm``: a pre-norm decoder (token + position embeddings, ``layers`` blocks of
  causal multi-head Attention and a Gelu MLP, a final LayerNorm, tied-free output head)
  predicting the next token of a generated corpus (``counting_corpus``: each sequence
  counts up by a fixed stride modulo the vocabulary, so the next token is learnable).

Each builder returns ``(graph, params)``: the forward graph with one scalar loss output and
initial parameter values (float32). Inputs are data only (``x``/``labels`` or
``tokens``/``targets``), so ``training.train_step`` can differentiate the params.
"""
from __future__ import annotations

import numpy as np

from ..ir.graph import Graph


def _init(rng, *shape, scale=None):
    fan_in = shape[0] if len(shape) > 1 else 1
    s = scale if scale is not None else 1.0 / np.sqrt(fan_in)
    return (rng.standard_normal(shape) * s).astype(np.float32)


def _xent(g: Graph, logits: int, onehot: int) -> int:
    """Mean over rows of -Σ onehot·log_softmax(logits) (max-shifted, in the graph)."""
    rows, classes = g.shape(logits).dims
    m = g.reduce(logits, "Max", [1], keep_dim=True)
    shifted = g.sub(logits, g.op("Expand", (m,), target_shape=(rows, classes)))
    lse = g.activation("Log", g.sum(g.activation("Exp", shifted), [1], keep_dim=True))
    logp = g.sub(shifted, g.op("Expand", (lse,), target_shape=(rows, classes)))
    nll = g.activation("Neg", g.sum(g.mul(logp, onehot), [1]))
    return g.mean(nll, [0])


def spirals(n: int, classes: int = 3, seed: int = 0):
    """``n`` 2-d points on ``classes`` noisy spirals: (x [n, 2] f32, one-hot [n, C] f32)."""
    rng = np.random.default_rng(seed)
    label = rng.integers(0, classes, n)
    r = rng.uniform(0.1, 1.0, n)
    theta = label * (2 * np.pi / classes) + 3.0 * r + rng.normal(0, 0.15, n)
    x = np.stack([r * np.cos(theta), r * np.sin(theta)], 1).astype(np.float32)
    return x, np.eye(classes, dtype=np.float32)[label]


def mlp_classifier(batch: int = 64, hidden: int = 32, classes: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    g = Graph("mlp_classifier")
    x, y = g.input("x", [batch, 2]), g.input("labels", [batch, classes])
    w1, b1 = g.param("w1", [2, hidden]), g.param("b1", [hidden])
    w2, b2 = g.param("w2", [hidden, hidden]), g.param("b2", [hidden])
    w3, b3 = g.param("w3", [hidden, classes]), g.param("b3", [classes])
    h = g.activation("Gelu", g.add(g.matmul(x, w1), b1))
    h = g.activation("Gelu", g.add(g.matmul(h, w2), b2))
    g.set_outputs([_xent(g, g.add(g.matmul(h, w3), b3), y)])
    params = {"w1": _init(rng, 2, hidden, scale=1.0), "b1": np.zeros(hidden, np.float32),
              "w2": _init(rng, hidden, hidden), "b2": np.zeros(hidden, np.float32),
              "w3": _init(rng, hidden, classes), "b3": np.zeros(classes, np.float32)}
    return g, params


def counting_corpus(batch: int, seq: int, vocab: int, seed: int = 0):
    """(tokens [batch, seq] i64, one-hot next tokens [batch·seq, vocab] f32)."""
    rng = np.random.default_rng(seed)
    start = rng.integers(0, vocab, (batch, 1))
    stride = rng.integers(1, 3, (batch, 1))
    seqs = (start + stride * np.arange(seq + 1)) % vocab
    tokens, nxt = seqs[:, :-1], seqs[:, 1:]
    return tokens.astype(np.int64), np.eye(vocab, dtype=np.float32)[nxt.reshape(-1)]


def _layer_norm(g, x, gamma, beta):
    return g.layer_norm(x, gamma, beta, axis=-1, eps=1e-5)


def transformer_lm(batch: int = 8, seq: int = 16, vocab: int = 16, d_model: int = 32,
                   heads: int = 2, layers: int = 2, seed: int = 0):
    rng = np.random.default_rng(seed)
    g = Graph("transformer_lm")
    tokens, targets = g.input("tokens", [batch, seq], "i64"), g.input("targets",
                                                                     [batch * seq, vocab])
    params, p = {}, {}

    def param(name, *shape, value):
        p[name] = g.param(name, list(shape))
        params[name] = value
        return p[name]

    ones, zeros = (lambda n: np.ones(n, np.float32)), (lambda n: np.zeros(n, np.float32))
    emb = param("embed", vocab, d_model, value=_init(rng, vocab, d_model, scale=0.5))
    pos = param("pos", seq, d_model, value=_init(rng, seq, d_model, scale=0.1))
    h = g.add(g.gather(emb, tokens, axis=0), pos)                 # [B, S, D]
    for i in range(layers):
        a = _layer_norm(g, h, param(f"ln1_g{i}", d_model, value=ones(d_model)),
                        param(f"ln1_b{i}", d_model, value=zeros(d_model)))
        q, k, v = (g.matmul(a, param(f"w{n}{i}", d_model, d_model,
                                     value=_init(rng, d_model, d_model))) for n in "qkv")
        att = g.attention(q, k, v, num_heads=heads, head_dim=d_model // heads,
                          v_head_dim=None, mask_kind="Causal", score_scale=None,
                          attn_logit_softcap=None)
        h = g.add(h, g.matmul(att, param(f"wo{i}", d_model, d_model,
                                         value=_init(rng, d_model, d_model))))
        m = _layer_norm(g, h, param(f"ln2_g{i}", d_model, value=ones(d_model)),
                        param(f"ln2_b{i}", d_model, value=zeros(d_model)))
        m = g.activation("Gelu", g.matmul(m, param(f"w_up{i}", d_model, 2 * d_model,
                                                    value=_init(rng, d_model, 2 * d_model))))
        h = g.add(h, g.matmul(m, param(f"w_down{i}", 2 * d_model, d_model,
                                       value=_init(rng, 2 * d_model, d_model))))
    h = _layer_norm(g, h, param("lnf_g", d_model, value=ones(d_model)),
                    param("lnf_b", d_model, value=zeros(d_model)))
    logits = g.matmul(g.reshape(h, [batch * seq, d_model]),
                      param("w_out", d_model, vocab, value=_init(rng, d_model, vocab)))
    g.set_outputs([_xent(g, logits, targets)])
    return g, params
