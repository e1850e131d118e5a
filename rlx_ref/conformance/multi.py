"""Multi-op conformance cases: small models and control flow built with the Graph builder.

Each case is named ``multi:<name>``: an MLP, an attention block, two conv blocks, and If /
While / Scan graphs with work before and after the control-flow node. Weights are Params
(fed through ``Case.params``) in the MLP and plain Inputs elsewhere, so both paths are used.
"""
from __future__ import annotations

import numpy as np

from ..ir.dtype import DType
from ..ir.graph import Graph
from ..ir.shape import Shape
from ..ops._control_bodies import add, binary, constant, make_body
from ..ops.opdef import get
from .cases import make_case
from .model import Case
from .rng import CounterRNG

F32 = DType.F32


class _Feeds:
    """Draws named f32 tensors from one CounterRNG stream and declares them in ``g``."""

    def __init__(self, g: Graph, rng: CounterRNG):
        self.g, self.rng, self.inputs, self.params = g, rng, {}, {}

    def _draw(self, shape, scale, shift):
        return (self.rng.standard_normal(shape) * scale + shift).astype(np.float32)

    def input(self, name, shape, scale=1.0, shift=0.0, value=None) -> int:
        self.inputs[name] = self._draw(shape, scale, shift) if value is None else value
        return self.g.input(name, list(np.shape(self.inputs[name])),
                            DType.of(np.asarray(self.inputs[name])))

    def param(self, name, shape, scale=1.0, shift=0.0) -> int:
        self.params[name] = self._draw(shape, scale, shift)
        return self.g.param(name, list(shape))


def _case(name: str, seed: int, build, tags=(), stream: str | None = None) -> Case:
    g = Graph(name.replace("-", "_"))
    f = _Feeds(g, CounterRNG(seed, f"multi:{stream or name}"))
    g.set_outputs([build(g, f)])
    return make_case(f"multi:{name}", F32.display, g, f.inputs, ("multi-op",) + tuple(tags),
                     f.params, (), seed, "multi")


# ── models ───────────────────────────────────────────────────────────────────

def _mlp(g, f):
    x = f.input("x", (4, 8))
    h = g.gelu(g.add(g.matmul(x, f.param("w1", (8, 16), 0.35)), f.param("b1", (16,), 0.1)))
    logits = g.add(g.matmul(h, f.param("w2", (16, 5), 0.25)), f.param("b2", (5,), 0.1))
    return g.softmax(logits, -1)


def _attention_block(g, f):
    x = f.input("x", (2, 5, 8))
    h = g.layer_norm(x, f.input("gamma", (8,), 0.1, 1.0), f.input("beta", (8,), 0.1),
                     axis=-1, eps=1e-5)
    q, k, v = (g.matmul(h, f.input(f"w{n}", (8, 8), 0.35)) for n in "qkv")
    a = g.attention(q, k, v, num_heads=2, head_dim=4, v_head_dim=None, mask_kind="Causal",
                    score_scale=None, attn_logit_softcap=None)
    return g.add(x, g.matmul(a, f.input("wo", (8, 8), 0.35)))


def _pool(g, x, reduce: str, stride) -> int:
    return g.op("Pool", (x,), kind=reduce, kernel_size=(2, 2), stride=stride)


def _conv_groupnorm(g, f):
    x = f.input("x", (1, 3, 8, 8))
    y = g.conv(x, f.input("w", (4, 3, 3, 3), 0.3), kernel_size=(3, 3), stride=(1, 1),
               padding=(1, 1), dilation=(1, 1), groups=1)
    y = g.group_norm(y, f.input("gamma", (4,), 0.1, 1.0), f.input("beta", (4,), 0.1),
                     num_groups=2, eps=1e-5)
    return _pool(g, g.relu(y), "Max", (2, 2))


def _conv_batchnorm(g, f):
    x = f.input("x", (2, 2, 7, 7))
    y = g.conv(x, f.input("w", (3, 2, 3, 3), 0.3), kernel_size=(3, 3), stride=(2, 2),
               padding=(1, 1), dilation=(1, 1), groups=1)
    stats = [f.input("gamma", (3,), 0.1, 1.0), f.input("beta", (3,), 0.1),
             f.input("mean", (3,), 0.1), f.input("var", (3,), 0.1, 1.0)]
    # BatchNormInference normalises the LAST axis: go NHWC and back
    y = g.batch_norm_inference(g.transpose(y, (0, 2, 3, 1)), *stats, eps=1e-5)
    y = g.transpose(y, (0, 3, 1, 2))
    return _pool(g, g.silu(y), "Mean", (1, 1))


# ── control flow ─────────────────────────────────────────────────────────────

def _if(taken: bool):
    def build(g, f):
        pred = f.input("pred", (), value=np.bool_(taken))
        x, y = f.input("x", (6,)), f.input("y", (6,))
        s = Shape([6], F32)
        tanh = get("Activation").attrs("Tanh")
        then = make_body("then", [s, s], lambda b, p, q: binary(
            b, "Add", add(b, "Activation", tanh, p), q))
        other = make_body("else", [s, s], lambda b, p, q: binary(
            b, "Sub", binary(b, "Mul", p, q), constant(b, 1.0)))
        out = g.op("If", (pred, g.mul(x, y), y), then_branch=then, else_branch=other)
        return g.add(out, x)
    return build


def _while(g, f):
    """Carried (acc [4], i []): while i < 5: acc = acc·0.5 + 1, i += 1; then acc + x."""
    x = f.input("x", (4,))
    i0 = f.input("i0", (), value=np.float32(0.0))
    sa, si = Shape([4], F32), Shape([], F32)
    lt = get("Compare").attrs("Lt")
    cond = make_body("cond", [sa, si], lambda b, acc, i: add(
        b, "Compare", lt, i, constant(b, 5.0)))
    body = make_body("body", [sa, si], lambda b, acc, i: [
        binary(b, "Add", binary(b, "Mul", acc, constant(b, 0.5)), constant(b, 1.0)),
        binary(b, "Add", i, constant(b, 1.0))])
    out = g.op("While", (g.mul(x, x), i0), cond=cond, body=body, max_iterations=None)
    return g.add(out, x)


def _rnn(trajectory: bool):
    """An RNN cell h' = tanh(h @ W + x_t) scanned over 6 steps (trajectory on or off)."""
    def build(g, f):
        hid, steps = 4, 6
        h0 = f.input("h0", (1, hid), 0.5)
        w = f.input("w", (hid, hid), 0.5)
        xs = g.matmul(f.input("xs", (steps, 1, 3)), f.input("w_in", (3, hid), 0.5))
        sh, sw = Shape([1, hid], F32), Shape([hid, hid], F32)
        tanh = get("Activation").attrs("Tanh")
        cell = make_body("cell", [sh, sw, sh], lambda b, h, m, xt: add(
            b, "Activation", tanh, binary(b, "Add", add(b, "MatMul", None, h, m), xt)))
        return g.op("Scan", (h0, w, xs), body=cell, length=steps, save_trajectory=trajectory,
                    num_bcast=1, num_xs=1, num_checkpoints=0)
    return build


def multi_op_cases(seed: int = 0) -> list[Case]:
    """The multi-op cases, ops named ``multi:<name>``: the models, fused chains
    (``_cases_fused``) and the gradient graphs (``_cases_grad``)."""
    from ._cases_grad import grad_cases

    return base_multi_cases(seed) + grad_cases(seed)


def base_multi_cases(seed: int = 0) -> list[Case]:
    """The multi-op cases written by hand and the fused chains."""
    from ._cases_fused import fused_cases
    from ._cases_offset import variance_cases

    return fused_cases(seed) + variance_cases(seed) + [
        _case("mlp", seed, _mlp, ("mlp",)),
        _case("attention-block", seed, _attention_block, ("attention", "causal")),
        _case("conv-groupnorm", seed, _conv_groupnorm, ("conv",)),
        _case("conv-batchnorm", seed, _conv_batchnorm, ("conv", "stride")),
        _case("if-then", seed, _if(True), ("control-flow", "if", "then"), "if"),
        _case("if-else", seed, _if(False), ("control-flow", "if", "else"), "if"),
        _case("while-count", seed, _while, ("control-flow", "while", "loop")),
        # one stream for both: the trajectory's last row is the other case's output
        _case("scan-rnn", seed, _rnn(False), ("control-flow", "scan"), "rnn"),
        _case("scan-rnn-trajectory", seed, _rnn(True), ("control-flow", "scan", "trajectory"),
              "rnn"),
    ]
