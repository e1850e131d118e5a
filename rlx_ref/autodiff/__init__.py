"""Transforms over the IR (graph in, graph out), as RLX's autodiff.

- ``grad_with_loss(graph, wrt)`` / ``grad(graph, wrt)``: reverse mode (``reverse.py``),
  one rules table keyed by op kind (``vjp.py``; rules in ``rules_*.py``);
- ``prepare_for_ad``: the pre-pass (unfuse, If → Where, While unrolled, CustomFn inlined,
  decompositions) every transform runs first (``prepare.py``);
- ``gradcheck``: a gradient against float64 finite differences on the oracle.
"""
from ._build import AutodiffError
from .gradcheck import GradcheckResult, gradcheck
from .prepare import prepare_for_ad
from .reverse import SEED, grad, grad_with_loss
from .vjp import NON_DIFFERENTIABLE, rule_kinds, vjp_rule

__all__ = ["AutodiffError", "GradcheckResult", "NON_DIFFERENTIABLE", "SEED", "grad",
           "grad_with_loss", "gradcheck", "prepare_for_ad", "rule_kinds", "vjp_rule"]
