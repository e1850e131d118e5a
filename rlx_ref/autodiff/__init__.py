"""Transforms over the IR (graph in, graph out), as RLX's autodiff.

- ``grad_with_loss(graph, wrt)`` / ``grad(graph, wrt)``: reverse mode (``reverse.py``),
  one rules table keyed by op kind (``vjp.py``; rules in ``rules_*.py``);
- ``prepare_for_ad``: the pre-pass (unfuse, If → Where, While unrolled, CustomFn inlined,
  decompositions) every transform runs first (``prepare.py``);
- ``jvp(graph, tangent_for)`` / ``hvp(graph, wrt)``: forward mode and forward over
  reverse (``jvp.py``; rules in ``jvp_rules.py``, the rest derived from the VJP rules);
- ``nth_order_grad``, ``directional_nth_grad``, ``jacfwd``, ``jacrev``: stacked
  transforms (``higher_order.py``);
- ``vmap(graph, in_axes, batch_size)``: batching (``vmap.py``; rules in ``batch_*.py``);
- ``gradcheck``: a gradient against float64 finite differences on the oracle.
"""
from ._build import AutodiffError
from .gradcheck import GradcheckResult, gradcheck
from .higher_order import directional_nth_grad, jacfwd, jacrev, nth_order_grad
from .jvp import hvp, jvp, jvp_rule
from .prepare import prepare_for_ad
from .reverse import SEED, grad, grad_with_loss
from .vjp import NON_DIFFERENTIABLE, rule_kinds, vjp_rule
from ._batching import VmapError, batch_kinds, batch_rule
from .vmap import vmap

__all__ = ["AutodiffError", "GradcheckResult", "NON_DIFFERENTIABLE", "SEED", "grad",
           "grad_with_loss", "gradcheck", "hvp", "jvp", "jvp_rule", "prepare_for_ad",
           "rule_kinds", "vjp_rule", "nth_order_grad", "directional_nth_grad", "jacfwd",
           "jacrev", "VmapError", "batch_kinds", "batch_rule", "vmap"]


def _dsl_grad(self, loss, wrt, with_loss: bool = False):
    """``g.grad(loss, wrt=[w, ...])``: the gradient graph of ``loss`` (a DSL node) with
    respect to ``wrt`` (DSL nodes, Input/Param names or node ids); ``with_loss`` keeps the
    loss as the first output (``grad_with_loss``)."""
    g = self.graph.copy()
    g.set_outputs([self._own(loss).id])
    ids = [w if isinstance(w, str) else getattr(w, "id", w) for w in
           ([wrt] if isinstance(wrt, str) or hasattr(wrt, "id") else wrt)]
    return (grad_with_loss if with_loss else grad)(g, ids)


def _install_dsl() -> None:
    from ..ir.dsl import GraphBuilder

    GraphBuilder.grad = _dsl_grad


_install_dsl()
