"""The benchmark op list: an rlx graph per op plus the same computation for each peer."""
from __future__ import annotations

import numpy as np

import rlx_ref
from rlx_ref.ops.control import ScanAttrs

F32 = np.float32


def _rng():
    return np.random.default_rng(0)


def matmul(n):
    g = rlx_ref.Graph(f"matmul_{n}")
    a, b = g.input("a", [n, n]), g.input("b", [n, n])
    g.set_outputs([g.matmul(a, b)])
    r = _rng()
    feeds = {"a": r.standard_normal((n, n), F32), "b": r.standard_normal((n, n), F32)}
    return g, feeds, {"numpy": lambda f: f["a"] @ f["b"],
                      "torch": lambda t, f: t.matmul(f["a"], f["b"]),
                      "jax": lambda j, f: f["a"] @ f["b"],
                      "onnx": ("MatMul", ["a", "b"], {})}


def gelu_chain(n):
    g = rlx_ref.Graph("gelu_chain")
    x, w, b = (g.input(k, [n]) for k in "xwb")
    g.set_outputs([g.activation("GeluApprox", g.add(g.mul(x, w), b))])
    r = _rng()
    feeds = {k: r.standard_normal(n, F32) for k in "xwb"}

    def np_gelu(f):
        y = f["x"] * f["w"] + f["b"]
        return 0.5 * y * (1 + np.tanh(F32(0.7978846) * (y + F32(0.044715) * y ** 3)))
    return g, feeds, {"numpy": np_gelu,
                      "torch": lambda t, f: t.nn.functional.gelu(f["x"] * f["w"] + f["b"],
                                                                 approximate="tanh"),
                      "jax": lambda j, f: j.nn.gelu(f["x"] * f["w"] + f["b"], approximate=True),
                      "onnx": ("GeluChain", ["x", "w", "b"], {})}


def softmax(n):
    g = rlx_ref.Graph("softmax")
    x = g.input("x", [n, n])
    g.set_outputs([g.softmax(x, -1)])
    feeds = {"x": _rng().standard_normal((n, n), F32)}

    def np_softmax(f):
        e = np.exp(f["x"] - f["x"].max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    return g, feeds, {"numpy": np_softmax, "torch": lambda t, f: t.softmax(f["x"], -1),
                      "jax": lambda j, f: j.nn.softmax(f["x"], -1),
                      "onnx": ("Softmax", ["x"], {"axis": -1})}


def layernorm(rows, cols):
    g = rlx_ref.Graph("layernorm")
    x, ga, be = g.input("x", [rows, cols]), g.input("gamma", [cols]), g.input("beta", [cols])
    g.set_outputs([g.op("LayerNorm", [x, ga, be], axis=-1, eps=1e-5)])
    r = _rng()
    feeds = {"x": r.standard_normal((rows, cols), F32), "gamma": r.standard_normal(cols, F32),
             "beta": r.standard_normal(cols, F32)}

    def np_ln(f):
        m = f["x"].mean(-1, keepdims=True)
        v = ((f["x"] - m) ** 2).mean(-1, keepdims=True)
        return (f["x"] - m) / np.sqrt(v + F32(1e-5)) * f["gamma"] + f["beta"]
    return g, feeds, {"numpy": np_ln,
                      "torch": lambda t, f: t.nn.functional.layer_norm(
                          f["x"], (cols,), f["gamma"], f["beta"], 1e-5),
                      "jax": lambda j, f: j.nn.standardize(f["x"], -1, epsilon=1e-5)
                      * f["gamma"] + f["beta"],
                      "onnx": ("LayerNormalization", ["x", "gamma", "beta"],
                               {"axis": -1, "epsilon": 1e-5})}


def total_sum(n):
    g = rlx_ref.Graph("sum")
    x = g.input("x", [n])
    g.set_outputs([g.sum(x, [0])])
    feeds = {"x": _rng().standard_normal(n, F32)}
    return g, feeds, {"numpy": lambda f: f["x"].sum(), "torch": lambda t, f: f["x"].sum(),
                      "jax": lambda j, f: f["x"].sum(),
                      "onnx": ("ReduceSum", ["x"], {"keepdims": 0})}


def attention(s, causal):
    g = rlx_ref.Graph("attention")
    q, k, v = (g.input(n, [1, 8, s, 64]) for n in "qkv")
    g.set_outputs([g.op("Attention", [q, k, v], num_heads=8, head_dim=64,
                        mask_kind="Causal" if causal else "None")])
    r = _rng()
    feeds = {n: r.standard_normal((1, 8, s, 64), F32) for n in "qkv"}

    def np_att(f):
        sc = f["q"] @ f["k"].transpose(0, 1, 3, 2) * F32(0.125)
        if causal:
            sc = np.where(np.tri(s, dtype=bool), sc, F32(-1e9))
        e = np.exp(sc - sc.max(-1, keepdims=True))
        return (e / e.sum(-1, keepdims=True)) @ f["v"]
    return g, feeds, {"numpy": np_att,
                      "torch": lambda t, f: t.nn.functional.scaled_dot_product_attention(
                          f["q"], f["k"], f["v"], is_causal=causal),
                      # jax's layout is (batch, seq, heads, dim)
                      "jax": lambda j, f: j.nn.dot_product_attention(
                          *(f[n].transpose(0, 2, 1, 3) for n in "qkv"), is_causal=causal)}


def conv2d(n, c, hw, co):
    g = rlx_ref.Graph("conv2d")
    x, w = g.input("x", [n, c, hw, hw]), g.input("w", [co, c, 3, 3])
    g.set_outputs([g.op("Conv", [x, w], kernel_size=(3, 3), padding=(1, 1))])
    r = _rng()
    feeds = {"x": r.standard_normal((n, c, hw, hw), F32),
             "w": r.standard_normal((co, c, 3, 3), F32) * F32(0.05)}
    return g, feeds, {"torch": lambda t, f: t.nn.functional.conv2d(f["x"], f["w"], padding=1),
                      "onnx": ("Conv", ["x", "w"], {"pads": [1, 1, 1, 1]}),
                      "jax": lambda j, f: j.lax.conv_general_dilated(
                          f["x"], f["w"], (1, 1), ((1, 1), (1, 1)))}


def gather(rows, cols, n_idx):
    g = rlx_ref.Graph("gather")
    t, i = g.input("table", [rows, cols]), g.input("idx", [n_idx], "i64")
    g.set_outputs([g.op("Gather", [t, i], axis=0)])
    r = _rng()
    feeds = {"table": r.standard_normal((rows, cols), F32),
             "idx": r.integers(0, rows, n_idx).astype(np.int64)}
    return g, feeds, {"numpy": lambda f: f["table"][f["idx"]],
                      "torch": lambda t, f: t.nn.functional.embedding(f["idx"], f["table"]),
                      "jax": lambda j, f: j.numpy.take(f["table"], f["idx"], axis=0),
                      "onnx": ("Gather", ["table", "idx"], {"axis": 0})}


def cumsum(n):
    g = rlx_ref.Graph("cumsum")
    x = g.input("x", [n, n])
    g.set_outputs([g.op("Cumsum", [x], axis=-1, exclusive=False)])
    feeds = {"x": _rng().standard_normal((n, n), F32)}
    return g, feeds, {"numpy": lambda f: np.cumsum(f["x"], -1),
                      "torch": lambda t, f: t.cumsum(f["x"], -1),
                      "jax": lambda j, f: j.numpy.cumsum(f["x"], -1)}


def rnn_scan(steps, h):
    body = rlx_ref.Graph("cell")
    hc = body.input("h", [1, h])
    w = body.input("w", [h, h])
    xt = body.input("x_t", [1, h])
    body.set_outputs([body.tanh(body.add(body.matmul(hc, w), xt))])
    g = rlx_ref.Graph("rnn")
    h0, w_in, xs = g.input("h0", [1, h]), g.input("w", [h, h]), g.input("xs", [steps, 1, h])
    g.set_outputs([g.op("Scan", [h0, w_in, xs], ScanAttrs(body, steps, False, 1, 1, 0),
                        shape=rlx_ref.Shape([1, h], rlx_ref.DType.F32))])
    r = _rng()
    feeds = {"h0": np.zeros((1, h), F32), "w": r.standard_normal((h, h), F32) * F32(0.05),
             "xs": r.standard_normal((steps, 1, h), F32)}

    def np_rnn(f):
        hh = f["h0"]
        for t in range(steps):
            hh = np.tanh(hh @ f["w"] + f["xs"][t])
        return hh
    def jax_rnn(j, f):
        def cell(hh, x_t):
            return j.numpy.tanh(hh @ f["w"] + x_t), None
        return j.lax.scan(cell, f["h0"], f["xs"])[0]
    return g, feeds, {"numpy": np_rnn, "jax": jax_rnn}


def tiny_graph(n_nodes):
    g = rlx_ref.Graph("tiny")
    x = g.input("x", [16])
    y = x
    for i in range(n_nodes):
        y = g.add(y, x) if i % 2 else g.relu(y)
    g.set_outputs([y])
    feeds = {"x": np.linspace(-1, 1, 16, dtype=F32)}

    def np_tiny(f):
        y = f["x"]
        for i in range(n_nodes):
            y = y + f["x"] if i % 2 else np.maximum(y, 0)
        return y
    def jax_tiny(j, f):
        y = f["x"]
        for i in range(n_nodes):
            y = y + f["x"] if i % 2 else j.numpy.maximum(y, 0)
        return y
    return g, feeds, {"numpy": np_tiny, "jax": jax_tiny}


def op_list(quick: bool):
    """(name, builder) pairs; ``quick`` shrinks every size for a smoke run."""
    q = quick
    return [
        ("matmul_512", lambda: matmul(64 if q else 512)),
        ("matmul_2048", lambda: matmul(128 if q else 2048)),
        ("gelu_chain_16M", lambda: gelu_chain(1 << (14 if q else 24))),
        ("softmax_4096", lambda: softmax(128 if q else 4096)),
        ("layernorm_8192x1024", lambda: layernorm(64 if q else 8192, 128 if q else 1024)),
        ("sum_64M", lambda: total_sum(1 << (16 if q else 26))),
        ("attention_1x8x1024x64", lambda: attention(64 if q else 1024, False)),
        ("attention_causal_1x8x1024x64", lambda: attention(64 if q else 1024, True)),
        ("conv2d_8x64x56x56_k3", lambda: conv2d(1 if q else 8, 8 if q else 64,
                                                8 if q else 56, 8 if q else 64)),
        ("embedding_gather", lambda: gather(500 if q else 50000, 64 if q else 1024,
                                            64 if q else 8192)),
        ("cumsum_4096x4096", lambda: cumsum(128 if q else 4096)),
        ("scan_rnn_1000x256", lambda: rnn_scan(20 if q else 1000, 32 if q else 256)),
        ("tiny_graph_100", lambda: tiny_graph(100)),
    ]
