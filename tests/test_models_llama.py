"""The llama-style decoder: its graph agrees with a numpy forward written from the maths."""
import numpy as np
import pytest

import rlx_ref
from rlx_ref.models import llama as L

CFG = L.LlamaConfig(vocab=64, dim=256, layers=1, heads=4, kv_heads=2, ffn=256)


def _rms(x, g, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g


def _rope(x, cos, sin, heads, hd):
    s = x.shape[0]
    x = x.reshape(s, heads, hd)
    a, b = x[..., : hd // 2], x[..., hd // 2:]
    c, n = cos[:, None, :], sin[:, None, :]
    return np.concatenate([a * c - b * n, a * n + b * c], -1).reshape(s, heads * hd)


def numpy_forward(cfg, w, tokens):
    """Logits [seq, vocab] in float64, independent of the graph builder."""
    w = {k: v.astype(np.float64) for k, v in w.items()}
    seq, hd = len(tokens), cfg.head_dim
    cos, sin = (t.astype(np.float64) for t in L.rope_tables(cfg, seq))
    h = w["token_embd.weight"][tokens]
    rep = cfg.heads // cfg.kv_heads
    for i in range(cfg.layers):
        b = f"blk.{i}."
        a = _rms(h, w[b + "attn_norm.weight"], cfg.eps)
        q = _rope(a @ w[b + "attn_q.weight"].T, cos, sin, cfg.heads, hd)
        k = _rope(a @ w[b + "attn_k.weight"].T, cos, sin, cfg.kv_heads, hd)
        v = a @ w[b + "attn_v.weight"].T
        out = np.zeros((seq, cfg.dim))
        for head in range(cfg.heads):
            kvh = head // rep
            qh, kh = q[:, head * hd:(head + 1) * hd], k[:, kvh * hd:(kvh + 1) * hd]
            s = qh @ kh.T / np.sqrt(hd)
            s[np.triu_indices(seq, 1)] = -np.inf
            p = np.exp(s - s.max(1, keepdims=True))
            p /= p.sum(1, keepdims=True)
            out[:, head * hd:(head + 1) * hd] = p @ v[:, kvh * hd:(kvh + 1) * hd]
        h = h + out @ w[b + "attn_output.weight"].T
        m = _rms(h, w[b + "ffn_norm.weight"], cfg.eps)
        gate = m @ w[b + "ffn_gate.weight"].T
        act = gate / (1 + np.exp(-gate)) * (m @ w[b + "ffn_up.weight"].T)
        h = h + act @ w[b + "ffn_down.weight"].T
    return _rms(h, w["output_norm.weight"], cfg.eps) @ w["token_embd.weight"].T


def _run_reference(cfg, seq, params, storage=None, nbytes=None):
    exe = rlx_ref.Session(device="reference").compile(L.build_graph(cfg, seq, storage, nbytes))
    for name, value in params.items():
        exe.set_param(name, value)
    return lambda inputs: exe.run(inputs)[0]


def test_graph_matches_the_numpy_forward():
    w = L.random_weights(CFG, seed=3)
    seq = 12
    run = _run_reference(CFG, seq, L.graph_params(CFG, w))
    tokens = np.arange(5, 5 + seq) % CFG.vocab
    cos, sin = L.rope_tables(CFG, seq)
    got = run({"tokens": tokens[None].astype(np.int64), "rope_cos": cos, "rope_sin": sin})
    want = numpy_forward(CFG, w, tokens)
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4 * np.abs(want).max())


def test_greedy_decode_follows_argmax_of_the_numpy_forward():
    w = L.random_weights(CFG, seed=1)
    seq = 10
    run = _run_reference(CFG, seq, L.graph_params(CFG, w))
    toks, logits = L.greedy_decode(run, CFG, [3, 1, 4], steps=8, seq=seq)
    assert len(toks) == 8 and logits.shape == (8, CFG.vocab)
    full = [3, 1, 4] + toks
    want = numpy_forward(CFG, w, np.array(full[:-1]))
    assert [int(np.argmax(r)) for r in want[2:]] == toks
    assert len(set(toks)) > 1, "the weights should not make greedy decoding repeat one token"


def test_greedy_decode_refuses_a_too_short_sequence():
    with pytest.raises(ValueError, match="cannot hold"):
        L.greedy_decode(lambda i: None, CFG, [1, 2, 3], steps=8, seq=5)
