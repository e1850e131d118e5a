"""Optimizers as graph ops: one training step is one graph.

``train_step(forward, params, optimizer)`` differentiates ``forward`` (one loss output)
with respect to ``params`` (Param names) and appends the optimizer's update, so a step is
``outputs = [loss, new_param..., new_state...]``. Optimizer state and hyper-parameters
that change per step are Inputs: ``<state>_<param>`` (e.g. ``m_w``, ``v_w``) and ``step``
(Adam's bias correction, a ``[]`` f32 count from 1). ``d_output`` is fixed to 1 inside the
graph. The caller feeds each step's outputs back (``TrainState`` does it).

- ``SGD(lr, momentum)``: ``v' = momentum·v + g``; ``p' = p - lr·v'`` (momentum 0: plain
  SGD, no state);
- ``Adam(lr, beta1, beta2, eps)``: ``m' = β1·m + (1-β1)·g``, ``v' = β2·v + (1-β2)·g²``,
  ``p' = p - lr·(m'/(1-β1ᵗ)) / (√(v'/(1-β2ᵗ)) + eps)`` (Kingma and Ba).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.graph import Graph
from ..passes._rewrite import Rebuilder
from ..autodiff._build import AutodiffError, binary, expand, scalar, unary
from ..autodiff.reverse import SEED, grad_with_loss


@dataclass(frozen=True)
class SGD:
    lr: float = 0.01
    momentum: float = 0.0

    def slots(self) -> tuple:
        return ("velocity",) if self.momentum else ()

    def update(self, g: Graph, p: int, grad: int, state: dict, step: int) -> tuple:
        dt = g.shape(p).dtype
        if not self.momentum:
            return binary(g, "Sub", p, binary(g, "Mul", scalar(g, self.lr, dt), grad)), {}
        v = binary(g, "Add", binary(g, "Mul", scalar(g, self.momentum, dt), state["velocity"]),
                   grad)
        return binary(g, "Sub", p, binary(g, "Mul", scalar(g, self.lr, dt), v)), {"velocity": v}


@dataclass(frozen=True)
class Adam:
    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8

    def slots(self) -> tuple:
        return ("m", "v")

    def update(self, g: Graph, p: int, grad: int, state: dict, step: int) -> tuple:
        dt = g.shape(p).dtype
        c = lambda x: scalar(g, x, dt)  # noqa: E731 - a literal of the param's dtype
        m = binary(g, "Add", binary(g, "Mul", c(self.beta1), state["m"]),
                   binary(g, "Mul", c(1 - self.beta1), grad))
        v = binary(g, "Add", binary(g, "Mul", c(self.beta2), state["v"]),
                   binary(g, "Mul", c(1 - self.beta2), binary(g, "Mul", grad, grad)))
        t = step if g.shape(step).dtype is dt else g.op("Cast", (step,), to=dt)
        bc1 = binary(g, "Sub", c(1), binary(g, "Pow", c(self.beta1), t))
        bc2 = binary(g, "Sub", c(1), binary(g, "Pow", c(self.beta2), t))
        mhat = binary(g, "Div", m, bc1)
        denom = binary(g, "Add", unary(g, "Sqrt", binary(g, "Div", v, bc2)), c(self.eps))
        new_p = binary(g, "Sub", p, binary(g, "Mul", c(self.lr), binary(g, "Div", mhat, denom)))
        return new_p, {"m": m, "v": v}


def _seed_one(g: Graph) -> Graph:
    """``g`` with its ``d_output`` Input replaced by ones (the loss's own gradient)."""
    rb = Rebuilder(g)
    for n in g.nodes:
        if n.kind == "Input" and n.attrs.name == SEED:
            rb.map(n.id, expand(rb.new, scalar(rb.new, 1, n.shape.dtype), n.shape.dims))
        else:
            rb.copy(n)
    return rb.finish()


def train_step(forward: Graph, params, optimizer) -> Graph:
    """The training-step graph (see the module doc); ``params`` are Param names."""
    params = list(params)
    have = {n.attrs.name: n for n in forward.param_nodes()}
    missing = [p for p in params if p not in have]
    if missing:
        raise AutodiffError(f"train_step: {missing} are not Params of @{forward.name}; it has "
                            f"{sorted(have) or 'none'}")
    g = _seed_one(grad_with_loss(forward, params))
    loss, grads = g.outputs[0], g.outputs[1:]
    step = g.input("step", [], "f32")
    ids = {n.attrs.name: n.id for n in g.param_nodes()}
    new_params, new_state = [], []
    for name, gr in zip(params, grads):
        shape = g.shape(ids[name])
        state = {s: g.input(f"{s}_{name}", shape.dims, shape.dtype)
                 for s in optimizer.slots()}
        p, st = optimizer.update(g, ids[name], gr, state, step)
        new_params.append(p)
        new_state += [st[s] for s in optimizer.slots()]
    g.set_outputs([loss, *new_params, *new_state])
    g.name = f"{forward.name}_train"
    return g


class TrainState:
    """Runs a training-step graph on an executable, feeding outputs back as the next
    step's params and state. ``run(graph, inputs, params) -> outputs`` runs one step."""

    def __init__(self, step_graph: Graph, params: dict, optimizer, run):
        self.graph, self.run, self.optimizer = step_graph, run, optimizer
        self.names = list(params)
        self.params = {k: np.array(v, copy=True) for k, v in params.items()}
        self.state = {f"{s}_{k}": np.zeros_like(v) for k, v in self.params.items()
                      for s in optimizer.slots()}
        self.t = 0

    def step(self, batch: dict) -> float:
        self.t += 1
        feeds = {**batch, **self.state, "step": np.float32(self.t)}
        out = self.run(self.graph, feeds, self.params)
        loss, rest = out[0], out[1:]
        n = len(self.names)
        self.params = {k: np.asarray(v) for k, v in zip(self.names, rest[:n])}
        keys = [f"{s}_{k}" for k in self.names for s in self.optimizer.slots()]
        self.state = {k: np.asarray(v) for k, v in zip(keys, rest[n:])}
        return float(np.asarray(loss).reshape(-1)[0])
