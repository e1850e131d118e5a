"""The training benchmark's models written for PyTorch and JAX: the same architecture as
``rlx_ref.training.models`` (same formulas, same initial weights, same one-hot loss) and
the same Adam, so the three systems do the same work per step.

Each ``torch_*`` builder returns ``step(batch) -> loss`` (forward, ``backward()``,
``torch.optim.Adam.step()``); each ``jax_*`` builder returns ``step(batch) -> loss`` around
one ``jax.jit`` of ``value_and_grad`` plus the Adam update, with params and optimizer state
carried between calls as the step's outputs (donated, so XLA may update them in place).
"""
from __future__ import annotations

import numpy as np


def _xent_torch(logits, onehot):
    """Mean over rows of -Σ onehot·log_softmax(logits), as the rlx graph's loss."""
    import torch.nn.functional as F

    return (-(F.log_softmax(logits, 1) * onehot).sum(1)).mean()


def _xent_jax(logits, onehot):
    import jax

    return (-(jax.nn.log_softmax(logits, 1) * onehot).sum(1)).mean()


# ---- forward passes, one per library (p: name -> tensor, as the rlx params) ----

def mlp_torch(p, x, labels):
    import torch.nn.functional as F

    h = F.gelu(x @ p["w1"] + p["b1"])
    h = F.gelu(h @ p["w2"] + p["b2"])
    return _xent_torch(h @ p["w3"] + p["b3"], labels)


def mlp_jax(p, x, labels):
    import jax

    h = jax.nn.gelu(x @ p["w1"] + p["b1"], approximate=False)
    h = jax.nn.gelu(h @ p["w2"] + p["b2"], approximate=False)
    return _xent_jax(h @ p["w3"] + p["b3"], labels)


def transformer_torch(p, tokens, targets, heads: int, layers: int):
    import torch.nn.functional as F

    b, s = tokens.shape
    d = p["embed"].shape[1]
    ln = lambda x, i, w: F.layer_norm(x, (d,), p[f"{w}_g{i}"], p[f"{w}_b{i}"], 1e-5)  # noqa
    h = p["embed"][tokens] + p["pos"]
    for i in range(layers):
        a = ln(h, i, "ln1")
        q, k, v = ((a @ p[f"w{n}{i}"]).view(b, s, heads, d // heads).transpose(1, 2)
                   for n in "qkv")
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        h = h + att.transpose(1, 2).reshape(b, s, d) @ p[f"wo{i}"]
        m = F.gelu(ln(h, i, "ln2") @ p[f"w_up{i}"])
        h = h + m @ p[f"w_down{i}"]
    h = F.layer_norm(h, (d,), p["lnf_g"], p["lnf_b"], 1e-5)
    return _xent_torch(h.reshape(b * s, d) @ p["w_out"], targets)


def transformer_jax(p, tokens, targets, heads: int, layers: int):
    import jax
    import jax.numpy as jnp

    b, s = tokens.shape
    d = p["embed"].shape[1]

    def ln(x, g, beta):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / jnp.sqrt(var + 1e-5) * g + beta

    h = p["embed"][tokens] + p["pos"]
    for i in range(layers):
        a = ln(h, p[f"ln1_g{i}"], p[f"ln1_b{i}"])
        q, k, v = ((a @ p[f"w{n}{i}"]).reshape(b, s, heads, d // heads) for n in "qkv")
        att = jax.nn.dot_product_attention(q, k, v, is_causal=True).reshape(b, s, d)
        h = h + att @ p[f"wo{i}"]
        m = jax.nn.gelu(ln(h, p[f"ln2_g{i}"], p[f"ln2_b{i}"]) @ p[f"w_up{i}"],
                        approximate=False)
        h = h + m @ p[f"w_down{i}"]
    h = ln(h, p["lnf_g"], p["lnf_b"])
    return _xent_jax(h.reshape(b * s, d) @ p["w_out"], targets)


# ---- training steps ----

def torch_step(forward, params: dict, lr: float, inputs: tuple):
    """``step(batch) -> loss`` for ``forward(p, *batch)``, with ``torch.optim.Adam``."""
    import torch

    p = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    opt = torch.optim.Adam(list(p.values()), lr=lr)

    def step(batch: dict) -> float:
        opt.zero_grad(set_to_none=True)
        loss = forward(p, *(torch.from_numpy(batch[k]) for k in inputs))
        loss.backward()
        opt.step()
        return loss.detach()
    return step, p


def jax_step(forward, params: dict, lr: float, inputs: tuple,
             betas=(0.9, 0.999), eps: float = 1e-8):
    """``step(batch) -> loss``: one ``jax.jit`` of value_and_grad + Adam (Kingma and Ba)."""
    import jax
    import jax.numpy as jnp

    b1, b2 = betas

    def update(state, *batch):
        p, m, v, t = state
        loss, g = jax.value_and_grad(forward)(p, *batch)
        t = t + 1
        m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
        v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
        c1, c2 = 1 - b1 ** t, 1 - b2 ** t
        p = jax.tree.map(lambda p, m, v: p - lr * (m / c1) / (jnp.sqrt(v / c2) + eps), p, m, v)
        return loss, (p, m, v, t)

    jitted = jax.jit(update, donate_argnums=0)
    zeros = {k: np.zeros_like(v) for k, v in params.items()}
    state = [jax.device_put((dict(params), zeros, dict(zeros), np.float32(0)))]

    def step(batch: dict):
        loss, state[0] = jitted(state[0], *(batch[k] for k in inputs))
        return jax.block_until_ready(loss)
    step.jitted, step.state = jitted, state
    return step


def peers(model: str, params: dict, lr: float, heads: int = 0, layers: int = 0) -> dict:
    """system name -> step function (PyTorch and JAX when installed)."""
    out = {}
    if model == "mlp":
        fwd_t, fwd_j, inputs = mlp_torch, mlp_jax, ("x", "labels")
    else:
        fwd_t = lambda p, t, y: transformer_torch(p, t, y, heads, layers)  # noqa: E731
        fwd_j = lambda p, t, y: transformer_jax(p, t, y, heads, layers)    # noqa: E731
        inputs = ("tokens", "targets")
    try:
        out["pytorch"] = torch_step(fwd_t, params, lr, inputs)[0]
    except ImportError:
        pass
    try:
        out["jax"] = jax_step(fwd_j, params, lr, inputs)
    except ImportError:
        pass
    return out
