"""The oracle's derivatives checked by calculus: ``rlx-ref gradcheck``.

For each differentiable one-op case (``_cases_grad.source_cases``), at smooth-region
values, in float64 on the oracle:

- reverse mode against central finite differences (``autodiff.gradcheck``);
- forward mode against central finite differences of the same directions;
- JVP/VJP consistency ``<J v, u> = <v, Jᵀ u>``;
- on a representative set (``SECOND_ORDER``), forward over reverse (``hvp``) against
  central differences of the gradient.

A payload variant whose rule is not written yet must say so (``AutodiffError``); it is
reported as ``no rule`` and is not a failure.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._cases_grad import float_names, smooth_values, source_cases
from .rng import CounterRNG


@dataclass
class KindCheck:
    kind: str
    checked: int = 0
    no_rule: int = 0
    failures: list = None

    def __post_init__(self):
        self.failures = self.failures or []

    def line(self) -> str:
        state = "ok" if not self.failures else f"FAILED {len(self.failures)}"
        extra = f", {self.no_rule} without a rule yet" if self.no_rule else ""
        return f"{self.kind:<24} {state}: {self.checked} case(s) checked{extra}"


def _split(graph, values):
    params = {n.attrs.name for n in graph.param_nodes()}
    return ({k: v for k, v in values.items() if k not in params},
            {k: v for k, v in values.items() if k in params})


def _run(graph, values):
    from ..interpret import interpret

    return interpret(graph, *_split(graph, values), float64=True)


def _close(a: float, b: float, rtol: float = 1e-5, atol: float = 1e-7) -> bool:
    return abs(a - b) <= atol + rtol * max(abs(a), abs(b))


def check_case(case, seed: int = 0, h: float = 1e-6) -> str | None:
    """None when the case's derivatives agree, else what disagreed."""
    from ..autodiff import SEED, grad, gradcheck, jvp

    rng = CounterRNG(seed, f"gradcheck:{case.id}")
    values = {k: np.asarray(v, np.float64) if np.asarray(v).dtype.kind == "f" else v
              for k, v in smooth_values(case, rng).items()}
    names = float_names(case)
    res = gradcheck(case.graph, values, names, seed=seed, h=h)
    if not res.ok:
        return f"reverse mode vs finite differences:\n{res}"
    v = {k: np.asarray(rng.standard_normal(np.shape(values[k]))).reshape(np.shape(values[k]))
         for k in names}
    tangent = _run(jvp(case.graph, names), {**values, **{f"tangent_{k}": v[k] for k in names}})
    tangent = np.asarray(tangent[-1], np.float64)
    plus = {k: values[k] + h * v[k] if k in v else values[k] for k in values}
    minus = {k: values[k] - h * v[k] if k in v else values[k] for k in values}
    fd = (np.asarray(_run(case.graph, plus)[0]) - np.asarray(_run(case.graph, minus)[0])) / (2 * h)
    if not np.allclose(tangent, fd, rtol=1e-5, atol=1e-7):
        worst = float(np.max(np.abs(tangent - fd)))
        return f"forward mode vs finite differences: worst difference {worst:.3g}"
    u = np.asarray(rng.standard_normal(tangent.shape)).reshape(tangent.shape)
    back = _run(grad(case.graph, names), {**values, SEED: u})
    lhs = float(np.sum(tangent * u))
    rhs = float(sum(np.sum(np.asarray(b) * v[k]) for b, k in zip(back, names)))
    if not _close(lhs, rhs, rtol=1e-6, atol=1e-10):     # casts round tangents to f32
        return f"<J v, u> = {lhs!r} but <v, Jᵀ u> = {rhs!r}"
    return None


def _check_sources(label: str, kind: str, check, seed: int, limit: int) -> KindCheck:
    """``check(case, seed)`` on each source case of ``kind``; a payload variant without a
    rule is counted apart, as ``no rule``."""
    from ..autodiff import AutodiffError

    out = KindCheck(label)
    for case in source_cases(kind, limit, seed):
        try:
            why = check(case, seed)
        except AutodiffError as e:
            if "no VJP rule" in str(e):
                out.no_rule += 1
                continue
            why = f"AutodiffError: {e}"
        out.checked += 1
        if why:
            out.failures.append(f"{case.id} ({case.source}): {why}")
    return out


def check_kind(kind: str, seed: int = 0, limit: int = 2) -> KindCheck:
    """Every source case of ``kind`` checked (``limit`` per sub-op)."""
    return _check_sources(kind, kind, check_case, seed, limit)


def differentiable_kinds() -> list:
    from ..autodiff import NON_DIFFERENTIABLE, rule_kinds
    from ..autodiff.vjp import STRAIGHT_THROUGH_KINDS
    from ..ir.dtype import DType
    from ..ops.opdef import get, kinds

    # complex-only kinds (Conjugate, ComplexNormSq) have no real case to difference here;
    # tests/test_autodiff_complex.py checks them on the real and imaginary parts
    return [k for k in rule_kinds() if k not in NON_DIFFERENTIABLE | STRAIGHT_THROUGH_KINDS
            and k in kinds() and {DType.F32, DType.F64} & set(get(k).dtypes)]


def main(op: str | None = None, seed: int = 0) -> int:
    """``rlx-ref gradcheck [--op TEXT]``: a line per kind (then the second-order checks of
    the representative set); exit 1 when any check fails."""
    bad = 0
    checks = [(k, check_kind) for k in differentiable_kinds()]
    checks += [(k, check_kind_second_order) for k in SECOND_ORDER]
    for kind, check in checks:
        if op and op not in kind:
            continue
        res = check(kind, seed)
        print(res.line())
        for f in res.failures:
            print("  " + f.replace("\n", "\n    "))
        bad += len(res.failures)
    return 1 if bad else 0


# a representative set for second order: every family's core kinds
SECOND_ORDER = ("Activation", "Binary", "Softmax", "Reduce", "MatMul", "LayerNorm", "RmsNorm",
                "Attention", "Conv", "Pool", "Gather", "Cumsum", "SoftmaxCrossEntropyWithLogits",
                "Scan")


def check_second_order(case, seed: int = 0, h: float = 1e-5) -> str | None:
    """Forward over reverse (``hvp``) against central differences of the gradient, with
    the same cotangent: None when they agree."""
    from ..autodiff import SEED, grad, hvp

    rng = CounterRNG(seed, f"hvp:{case.id}")
    values = {k: np.asarray(v, np.float64) if np.asarray(v).dtype.kind == "f" else v
              for k, v in smooth_values(case, rng).items()}
    names = float_names(case)
    out_shape = np.shape(_run(case.graph, values)[0])
    u = np.asarray(rng.standard_normal(out_shape)).reshape(out_shape)
    v = {k: np.asarray(rng.standard_normal(np.shape(values[k]))).reshape(np.shape(values[k]))
         for k in names}
    got = _run(hvp(case.graph, names), {**values, SEED: u,
                                        **{f"tangent_{k}": v[k] for k in names}})
    hv = got[-len(names):]
    gg = grad(case.graph, names)
    plus = {k: values[k] + h * v[k] if k in v else values[k] for k in values}
    minus = {k: values[k] - h * v[k] if k in v else values[k] for k in values}
    gp, gm = _run(gg, {**plus, SEED: u}), _run(gg, {**minus, SEED: u})
    for k, a, p, m in zip(names, hv, gp, gm):
        fd = (np.asarray(p) - np.asarray(m)) / (2 * h)
        if not np.allclose(np.asarray(a, np.float64), fd, rtol=1e-4, atol=1e-6):
            worst = float(np.max(np.abs(np.asarray(a) - fd)))
            return f"H·v for {k} vs finite differences of the gradient: worst {worst:.3g}"
    return None


def check_kind_second_order(kind: str, seed: int = 0, limit: int = 1) -> KindCheck:
    return _check_sources(f"{kind} (2nd order)", kind, check_second_order, seed, limit)
