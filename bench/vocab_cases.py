"""The cases bench/vocab.py measures: each builds (graph, feeds, peers) at the issue's sizes
(smaller with ``quick``). A peer entry is a zero-argument callable (numpy, scipy), a
``fn(torch)`` (PyTorch) or ``(fn(jax, feeds), feeds)`` (jax.jit)."""
from __future__ import annotations

import numpy as np

import rlx_ref

SCAN_PEERS, LAPACK, FFT = ("torch", "jax"), ("scipy",), ("numpy", "scipy")


def _graph(kind: str, shapes, attrs: dict, dtype="f32", out=None):
    g = rlx_ref.Graph(kind.lower())
    xs = [g.input(f"x{i}", s, dtype) for i, s in enumerate(shapes)]
    shape = None if out is None else rlx_ref.Shape(out, dtype)
    g.set_outputs([g.op(kind, tuple(xs), **attrs, shape=shape)])
    return g


def _torch(fn):
    """``fn`` as the torch peer when torch imports (its tensors are built inside ``fn``)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return {}
    return {"torch": fn}


def selective_scan(quick: bool):
    b, s, d, n = (1, 64, 32, 4) if quick else (4, 1024, 768, 16)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((b, s, d), np.float32)
    dt = rng.uniform(0.001, 0.1, (b, s, d)).astype(np.float32)
    a = -rng.uniform(0.5, 2.0, (d, n)).astype(np.float32)
    bb = rng.standard_normal((b, s, n), np.float32)
    cc = rng.standard_normal((b, s, n), np.float32)
    g = _graph("SelectiveScan", [x.shape, dt.shape, a.shape, bb.shape, cc.shape],
               {"state_size": n})
    feeds = dict(zip(("x0", "x1", "x2", "x3", "x4"), (x, dt, a, bb, cc)))

    def torch_scan(torch):
        tx, tdt, ta, tb, tc = (torch.from_numpy(v) for v in (x, dt, a, bb, cc))
        h = torch.zeros(b, d, n)
        ys = []
        for t in range(s):
            dA = torch.exp(tdt[:, t, :, None] * ta)
            h = dA * h + (tdt[:, t, :, None] * tx[:, t, :, None]) * tb[:, t, None, :]
            ys.append((h * tc[:, t, None, :]).sum(-1))
        return torch.stack(ys, 1)

    def jax_scan(jax, f):
        jnp = jax.numpy

        def step(h, inp):
            xt, dtt, bt, ct = inp
            h = jnp.exp(dtt[..., None] * f["x2"]) * h + (dtt * xt)[..., None] * bt[:, None, :]
            return h, (h * ct[:, None, :]).sum(-1)
        seq = tuple(jnp.swapaxes(f[k], 0, 1) for k in ("x0", "x1", "x3", "x4"))
        _, ys = jax.lax.scan(step, jnp.zeros((b, d, n), jnp.float32), seq)
        return jnp.swapaxes(ys, 0, 1)
    return g, feeds, {**_torch(torch_scan), "jax": (jax_scan, feeds)}


def lstm(quick: bool):
    s, h, bsz = (32, 32, 1) if quick else (512, 512, 1)
    rng = np.random.default_rng(1)
    k = 1 / np.sqrt(h)
    x = rng.standard_normal((bsz, s, h), np.float32)
    wih = rng.uniform(-k, k, (4 * h, h)).astype(np.float32)
    whh = rng.uniform(-k, k, (4 * h, h)).astype(np.float32)
    bias = rng.uniform(-k, k, (4 * h,)).astype(np.float32)
    g = _graph("Lstm", [x.shape, wih.shape, whh.shape, bias.shape],
               {"hidden_size": h, "num_layers": 1, "bidirectional": False, "carry": False})
    feeds = {"x0": x, "x1": wih, "x2": whh, "x3": bias}

    def torch_lstm(torch):
        if not hasattr(torch_lstm, "m"):
            m = torch.nn.LSTM(h, h, batch_first=True)
            with torch.no_grad():
                m.weight_ih_l0.copy_(torch.from_numpy(wih))
                m.weight_hh_l0.copy_(torch.from_numpy(whh))
                m.bias_ih_l0.copy_(torch.from_numpy(bias))
                m.bias_hh_l0.zero_()
            torch_lstm.m, torch_lstm.x = m, torch.from_numpy(x)
        return torch_lstm.m(torch_lstm.x)[0]

    def jax_lstm(jax, f):
        jnp = jax.numpy

        def step(carry, xt):
            hh, cc = carry
            z = xt @ f["x1"].T + hh @ f["x2"].T + f["x3"]
            i, fg, gg, o = jnp.split(z, 4, axis=-1)
            cc = jax.nn.sigmoid(fg) * cc + jax.nn.sigmoid(i) * jnp.tanh(gg)
            hh = jax.nn.sigmoid(o) * jnp.tanh(cc)
            return (hh, cc), hh
        zero = jnp.zeros((bsz, h), jnp.float32)
        _, ys = jax.lax.scan(step, (zero, zero), jnp.swapaxes(f["x0"], 0, 1))
        return jnp.swapaxes(ys, 0, 1)
    return g, feeds, {**_torch(torch_lstm), "jax": (jax_lstm, feeds)}


def fft(quick: bool):
    n, batch = (2 ** 12, 2) if quick else (2 ** 20, 8)
    rng = np.random.default_rng(2)
    z = (rng.standard_normal((batch, n)) + 1j * rng.standard_normal((batch, n))).astype(
        np.complex64)
    block = np.concatenate([z.real, z.imag], axis=1).astype(np.float32)
    g = _graph("Fft", [block.shape], {"inverse": False, "norm": "Backward"})
    import scipy.fft

    peers = {"numpy": lambda: np.fft.fft(z, axis=-1),
             "scipy": lambda: scipy.fft.fft(z, axis=-1),
             **_torch(lambda torch, t=[]: torch.fft.fft(
                 t[0] if t else t.append(torch.from_numpy(z)) or t[0])),
             "jax": (lambda jax, f: jax.numpy.fft.fft(f["z"]), {"z": z})}
    return g, {"x0": block}, peers


def sort(quick: bool):
    n = 2 ** 16 if quick else 16 * 2 ** 20
    x = np.random.default_rng(3).standard_normal(n).astype(np.float32)
    g = _graph("Sort", [x.shape], {"axis": 0, "descending": False})
    peers = {"numpy": lambda: np.sort(x, kind="stable"),
             **_torch(lambda torch, t=[]: torch.sort(
                 t[0] if t else t.append(torch.from_numpy(x)) or t[0], stable=True)),
             "jax": (lambda jax, f: jax.numpy.sort(f["x"]), {"x": x})}
    return g, {"x0": x}, peers


def _spd(n: int) -> np.ndarray:
    m = np.random.default_rng(4).standard_normal((n, n))
    return m @ m.T / n + np.eye(n)


def factorization(kind: str, quick: bool):
    n = 128 if quick else 1024
    a = _spd(n)
    attrs = {"part": "S"} if kind == "Svd" else {}
    g = _graph(kind, [a.shape], attrs, "f64")
    import scipy.linalg

    if kind == "Cholesky":
        peers = {"numpy": lambda: np.linalg.cholesky(a),
                 "scipy": lambda: scipy.linalg.cholesky(a, lower=True),
                 **_torch(lambda torch, t=[]: torch.linalg.cholesky(
                     t[0] if t else t.append(torch.from_numpy(a)) or t[0])),
                 "jax": (lambda jax, f: jax.numpy.linalg.cholesky(f["a"]), {"a": a})}
    else:
        peers = {"numpy": lambda: np.linalg.svd(a, compute_uv=False),
                 "scipy": lambda: scipy.linalg.svd(a, compute_uv=False),
                 **_torch(lambda torch, t=[]: torch.linalg.svdvals(
                     t[0] if t else t.append(torch.from_numpy(a)) or t[0])),
                 "jax": (lambda jax, f: jax.numpy.linalg.svd(f["a"], compute_uv=False),
                         {"a": a})}
    return g, {"x0": a}, peers


def sample(quick: bool):
    vocab, batch = (4096, 1) if quick else (131072, 1)
    logits = np.random.default_rng(5).standard_normal((batch, vocab)).astype(np.float32)
    g = _graph("Sample", [logits.shape], {"top_k": 0, "top_p": 1.0, "temperature": 1.0,
                                         "seed": 7}, out=(batch,))
    rng = np.random.default_rng(6)

    def numpy_sample():
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        return [rng.choice(vocab, p=row) for row in p]

    peers = {"numpy": numpy_sample,
             **_torch(lambda torch, t=[]: torch.multinomial(torch.softmax(
                 t[0] if t else t.append(torch.from_numpy(logits)) or t[0], -1), 1)),
             "jax": (lambda jax, f: jax.random.categorical(jax.random.PRNGKey(0), f["l"]),
                     {"l": logits})}
    return g, {"x0": logits}, peers


def case_list(quick: bool):
    """(name, (peers the target compares with, bound), build) for each case."""
    every = ("numpy", "scipy", "torch", "jax")
    return [
        ("SelectiveScan B4 L1024 D768 N16", (SCAN_PEERS, 1.0), lambda: selective_scan(quick)),
        ("Lstm seq512 h512", (SCAN_PEERS, 1.0), lambda: lstm(quick)),
        ("Fft 2^20 x8 (f32 block)", (FFT, 1.5), lambda: fft(quick)),
        ("Sort 16M f32", (every, 1.0), lambda: sort(quick)),
        ("Cholesky 1024² f64", (LAPACK, 1.5), lambda: factorization("Cholesky", quick)),
        ("Svd (S) 1024² f64", (LAPACK, 1.5), lambda: factorization("Svd", quick)),
        ("Sample 128k vocab", (every, 1.0), lambda: sample(quick)),
    ]
