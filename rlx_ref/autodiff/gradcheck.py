"""``gradcheck``: a gradient graph against float64 central finite differences of the
forward graph, both run on the oracle in float64 (as PyTorch's ``gradcheck``).

For a random cotangent ``u`` and random directions ``v`` (one per wrt), the check compares
``Σ <grad_w, v_w>`` (from the gradient graph seeded with ``u``) against
``<u, (f(w + h·v) - f(w - h·v)) / 2h>``. A projection per direction keeps it to two
forward runs per direction however large the tensors are; ``directions`` more of them
make a wrong entry ever less likely to hide.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..interpret import interpret
from ..ir.graph import Graph
from .reverse import SEED, grad_with_loss


@dataclass
class GradcheckResult:
    """Per direction: the analytic and numeric directional derivatives."""

    analytic: list
    numeric: list
    rtol: float
    atol: float

    @property
    def ok(self) -> bool:
        return all(abs(a - n) <= self.atol + self.rtol * max(abs(a), abs(n))
                   for a, n in zip(self.analytic, self.numeric))

    def __str__(self) -> str:
        rows = [f"  direction {i}: analytic {a:.10g}, numeric {n:.10g}"
                for i, (a, n) in enumerate(zip(self.analytic, self.numeric))]
        return ("gradcheck " + ("passed" if self.ok else "FAILED") +
                f" (rtol {self.rtol}, atol {self.atol})\n" + "\n".join(rows))


def _split(graph: Graph, values: dict) -> tuple[dict, dict]:
    params = {n.attrs.name for n in graph.param_nodes()}
    ins = {k: v for k, v in values.items() if k not in params}
    return ins, {k: v for k, v in values.items() if k in params}


def _f64(values: dict) -> dict:
    return {k: np.asarray(v, np.float64) if np.asarray(v).dtype.kind == "f" else np.asarray(v)
            for k, v in values.items()}


def gradcheck(graph: Graph, values: dict, wrt, *, directions: int = 3, h: float = 1e-6,
              rtol: float = 1e-5, atol: float = 1e-8, seed: int = 0,
              grad_graph: Graph | None = None) -> GradcheckResult:
    """Check ``grad_with_loss(graph, wrt)`` (or ``grad_graph``) at ``values`` (Inputs and
    Params by name; ``wrt`` names some of them)."""
    wrt = [wrt] if isinstance(wrt, str) else list(wrt)
    rng = np.random.default_rng(seed)
    values = _f64(values)
    g = grad_graph if grad_graph is not None else grad_with_loss(graph, wrt)
    out_shape = interpret(graph, *_split(graph, values), float64=True)[0].shape
    u = rng.standard_normal(out_shape)
    ins, params = _split(graph, values)
    grads = interpret(g, {**ins, SEED: u}, params, float64=True)[1:]
    analytic, numeric = [], []
    for _ in range(directions):
        v = {w: rng.standard_normal(np.shape(values[w])) for w in wrt}
        analytic.append(float(sum(np.sum(gr * v[w]) for gr, w in zip(grads, wrt))))
        plus = {k: (values[k] + h * v[k] if k in v else values[k]) for k in values}
        minus = {k: (values[k] - h * v[k] if k in v else values[k]) for k in values}
        fp = interpret(graph, *_split(graph, plus), float64=True)[0]
        fm = interpret(graph, *_split(graph, minus), float64=True)[0]
        numeric.append(float(np.sum(u * (fp - fm)) / (2 * h)))
    return GradcheckResult(analytic, numeric, rtol, atol)
