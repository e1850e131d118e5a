"""Gradient cases: the backward graph of every differentiable kind, and of the multi-op
models, run on every backend against the oracle's backward graph.

A case ``multi:grad-<Kind>`` is ``grad_with_loss`` of a one-op case (its float operands are
the wrt; index operands keep their values), fed smooth-region values and a cotangent
``d_output`` from the counter RNG; ``multi:grad-<model>`` does the same for the multi-op
models. Both are ordinary multi-op cases (composite contracts), tagged ``grad``. The oracle's
own gradients are checked against finite differences by ``rlx-ref selfcheck --grad`` and
the tests.
"""
from __future__ import annotations

import numpy as np

from .rng import CounterRNG

POSITIVE_DOMAIN = {"Log", "Sqrt", "Rsqrt", "Recip", "Pow"}   # ops whose inputs must be > 0
AWAY_FROM_ZERO = {"Div", "Mod", "Atan2"}                      # ops with a pole or jump at 0
# operands that must be > 0 (positive mel filters keep every mel off LogMel's frame floor)
POSITIVE_OPERANDS = ("running_var", "filters")
# kinds differentiable only at invertible matrices: their square operands are drawn
# diagonally dominant; Cholesky's symmetric positive definite
SOLVES = {"DenseSolve", "BatchedDenseSolve", "Det", "LogDet", "TriangularSolve"}
STRAIGHT_THROUGH = {"Round"}     # gradient 1 by design (RLX): no finite-difference check
PER_KIND = 1                     # one-op sources per sub-op in the default tier
_BAD_TAGS = {"nan", "inf", "non-finite", "empty", "overflow", "denormal", "subnormal"}


def _ops(graph) -> set:
    return {str(getattr(n.attrs, "op", "")) for n in graph.nodes}


INDEX_OPERANDS = ("indices", "labels", "expert_idx")


def _leaves_at(case, wanted) -> set:
    """Names of the leaves bound to operands called one of ``wanted``."""
    out = set()
    for n in case.graph.nodes:
        names = n.op.opdef.input_names
        for pos, src in enumerate(n.inputs):
            leaf = case.graph.nodes[src]
            if pos < len(names) and wanted(n.kind, names[pos]) and \
                    leaf.kind in ("Input", "Param"):
                out.add(leaf.attrs.name)
    return out


def index_names(case) -> set:
    """Names of the leaves bound to an index operand (integral, even as floats)."""
    return _leaves_at(case, lambda kind, name: name in INDEX_OPERANDS)


def float_names(case) -> list:
    """The case's float leaves that are not indices nor operands the backward kinds treat
    as constants: the wrt of its gradient."""
    from ..autodiff.vjp import CONSTANT_OPERANDS

    skip = index_names(case) | _leaves_at(
        case, lambda kind, name: name in CONSTANT_OPERANDS.get(kind, ()))
    return [k for k, v in {**case.inputs, **case.params}.items()
            if np.asarray(v).dtype.kind == "f" and k not in skip]


def narrowing_cast(graph) -> bool:
    """A Cast to a narrower float: straight-through, its rounding hides a finite step."""
    return any(n.kind == "Cast" and n.shape.dtype.np.itemsize
               < graph.nodes[n.inputs[0]].shape.dtype.np.itemsize for n in graph.nodes)


def differentiable_case(case) -> bool:
    """A one-op case whose gradient is worth checking: f32/f64, one float output, small,
    static, no special values, no straight-through op."""
    g = case.graph
    return (not case.expect_error and case.dtype in ("f32", "f64")
            and not _BAD_TAGS & set(case.tags) and bool(float_names(case))
            and all(n.shape.is_static and (n.shape.numel or 0) <= 4096 for n in g.nodes)
            and not STRAIGHT_THROUGH & _ops(g) and not narrowing_cast(g)
            and len(g.outputs) == 1 and g.nodes[g.outputs[0]].shape.dtype.is_float)


def smooth_values(case, rng) -> dict:
    """Fresh values for the case's float leaves, away from domain edges (index leaves and
    integer data keep theirs); ``rng`` has ``standard_normal``."""
    ops, out = _ops(case.graph), {}
    idx = index_names(case)
    solve = case.op in SOLVES
    positive_leaves = _leaves_at(case, lambda kind, name: name in POSITIVE_OPERANDS)
    for name, arr in {**case.inputs, **case.params}.items():
        arr = np.asarray(arr)
        if arr.dtype.kind != "f" or name in idx:
            out[name] = arr
            continue
        v = np.asarray(rng.standard_normal(arr.shape), np.float64).reshape(arr.shape)
        if POSITIVE_DOMAIN & ops or solve:
            v = np.abs(v) + 0.5
        if AWAY_FROM_ZERO & ops:
            v = np.sign(v) * (np.abs(v) + 0.5)
        if name in positive_leaves:
            v = np.abs(v) + 0.5
        if "Tan" in ops:
            v = 0.3 * v
        if solve and arr.ndim >= 2 and arr.shape[-1] == arr.shape[-2]:
            v = v + 4 * arr.shape[-1] * np.eye(arr.shape[-1])
        if case.op == "Cholesky":
            v = v @ np.swapaxes(v, -1, -2) + arr.shape[-1] * np.eye(arr.shape[-1])
        out[name] = v.astype(arr.dtype)
    return out


def _variant(case) -> str:
    """The payload's sub-op (Binary Add, Activation Gelu, Reduce Max, Pool Max...), its
    window rank and mask kind: each gets its own sources."""
    a = case.graph.nodes[case.graph.outputs[0]].attrs
    parts = [getattr(a, "op", ""), getattr(a, "kind", ""), getattr(a, "mask_kind", ""),
             len(getattr(a, "kernel_size", ()) or ())]
    return "/".join(str(p) for p in parts)


def source_cases(kind: str, limit: int = PER_KIND, seed: int = 0) -> list:
    """Up to ``limit`` differentiable one-op cases of ``kind`` per sub-op."""
    from ..ops.opdef import get
    from .cases import _op_cases

    out, seen = [], {}
    for c in _op_cases(get(kind), seed):
        if differentiable_case(c) and seen.get(_variant(c), 0) < limit:
            seen[_variant(c)] = seen.get(_variant(c), 0) + 1
            out.append(c)
    return out


def _grad_case(name: str, source, seed: int, tags=(), redraw: bool = True):
    from ..autodiff import SEED, grad_with_loss
    from .multi import make_case

    rng = CounterRNG(seed, f"grad:{name}:{source.id}")
    values = smooth_values(source, rng) if redraw else {**source.inputs, **source.params}
    g = grad_with_loss(source.graph, float_names(source))
    out = g.nodes[g.outputs[0]].shape
    params = {k: v for k, v in values.items() if k in source.params}
    feeds = {k: v for k, v in values.items() if k not in params}
    feeds[SEED] = np.asarray(rng.standard_normal(out.static_dims()), out.dtype.np).reshape(
        out.static_dims())
    return make_case(f"multi:grad-{name}", source.dtype, g, feeds, ("grad", *tags), params,
                     seed=seed, source=f"grad of {source.id}")


def grad_cases(seed: int = 0) -> list:
    """``multi:grad-<Kind>`` for every kind with a VJP rule, ``multi:grad-<model>`` for the
    differentiable multi-op models."""
    from ..autodiff import NON_DIFFERENTIABLE, AutodiffError, rule_kinds
    from ..autodiff.vjp import LOOP_FORM_KINDS
    from ..ops.opdef import kinds

    out = []
    for kind in rule_kinds():
        # the sequence kinds' gradients are Scan trajectories of their loop form: a backend
        # compiles minutes of step kernels for one case, and the scan-rnn models already
        # reach Scan's backward; their calculus is checked on the oracle (gradcheck)
        if kind in NON_DIFFERENTIABLE | LOOP_FORM_KINDS or kind not in kinds():
            continue
        for src in source_cases(kind, seed=seed):
            try:
                out.append(_grad_case(kind, src, seed))
            except (AutodiffError, KeyError):   # a payload variant without a rule yet
                continue
    return out + model_grad_cases(seed)


MODELS = ("mlp", "attention-block", "conv-groupnorm", "conv-batchnorm", "if-then", "if-else",
          "scan-rnn", "scan-rnn-trajectory")


def model_grad_cases(seed: int) -> list:
    from ..autodiff import AutodiffError
    from .multi import base_multi_cases

    out = []
    for c in base_multi_cases(seed):
        name = c.op.split(":", 1)[1]
        if name in MODELS:
            try:
                out.append(_grad_case(name, c, seed, ("model",), redraw=False))
            except (AutodiffError, KeyError):
                continue
    return out
