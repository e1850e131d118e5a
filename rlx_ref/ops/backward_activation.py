"""Backward family, activations: ReluBackward and ActivationBackward.

Both take ``[x, dy]`` (the forward input and the upstream gradient, same shape) and return
``dx`` shaped like x. Each activation's rule is one formula in ``DERIVATIVES``, written in
the operations of ``_backward_math``: the reference evaluates it with numpy, the
decomposition (``passes/decompose_backward_norm``) with graph nodes. 16-bit floats are
computed in f32 and rounded once, as the forward Activation.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..conformance.accuracy import exact, per_op, ulp
from ..ir.dtype import DType
from ..ir.shape import Dyn
from ._backward_math import NUMPY, work_arrays
from .codec import attr
from .elementwise import ACTIVATION_ENUM, ACTIVATIONS
from .opdef import Caps, OpDef, Sample, register, want

FLOATS = (DType.F32, DType.F64, DType.F16, DType.BF16)
INV_SQRT2 = 1 / math.sqrt(2)
INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)
GELU_C, GELU_A = math.sqrt(2 / math.pi), 0.044715


def _relu(x, dy, m):
    return m.where(m.gt(x, 0.0), dy, 0.0)


def _sqrt(x, dy, m):
    s = m.act("Sqrt", x)
    return m.where(m.gt(s, 0.0), 0.5 * dy / s, 0.0)


def _rsqrt(x, dy, m):
    s = m.act("Sqrt", x)
    return m.where(m.gt(s, 0.0), -0.5 * dy / (x * s), 0.0)


def _gelu(x, dy, m):
    cdf = 0.5 * (1.0 + m.act("Erf", x * INV_SQRT2))
    pdf = INV_SQRT_2PI * m.act("Exp", -(x * x) * 0.5)
    return (cdf + x * pdf) * dy


def _gelu_tanh(x, dy, m):
    t = m.act("Tanh", GELU_C * (x + GELU_A * x * x * x))
    inner = GELU_C * (1.0 + 3 * GELU_A * x * x)
    return (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * inner) * dy


def _silu(x, dy, m):
    s = m.act("Sigmoid", x)
    return s * (1.0 + x * (1.0 - s)) * dy


def _sigmoid(x, dy, m):
    s = m.act("Sigmoid", x)
    return s * (1.0 - s) * dy


def _tanh(x, dy, m):
    t = m.act("Tanh", x)
    return (1.0 - t * t) * dy


def _tan(x, dy, m):
    t = m.act("Tan", x)
    return (1.0 + t * t) * dy


def _hard_sigmoid_slope(x, m):
    """1/6 where |x| < 3, else 0 (0 at ±3 and NaN): relu(sign(3 - |x|))/6, as RLX."""
    return m.act("Relu", m.act("Sign", 3.0 - m.act("Abs", x))) * (1 / 6)


def _mish(x, dy, m):
    t = m.act("Tanh", m.act("Softplus", x))
    return (t + x * (1.0 - t * t) * m.act("Sigmoid", x)) * dy


def _softsign(x, dy, m):
    d = 1.0 + m.act("Abs", x)
    return 1.0 / (d * d) * dy


# name -> (dx in words, rule(x, dy, m) -> dx). The first 17 are RLX's ActivationBackward
# kernel; the rest follow RLX's `activation_deriv_wrt_x` (dx = dy · f'(x)).
DERIVATIVES = {
    "Gelu": ("(Φ(x) + x·φ(x))·dy (erf form)", _gelu),
    "GeluApprox": ("d/dx of the tanh form: (½(1 + t) + ½x(1 - t²)·c(1 + 3a·x²))·dy",
                   _gelu_tanh),
    "Silu": ("σ(x)(1 + x(1 - σ(x)))·dy", _silu),
    "Relu": ("dy where x > 0, else 0 (relu'(0) = 0; NaN x gives 0)", _relu),
    "Sigmoid": ("σ(x)(1 - σ(x))·dy", _sigmoid),
    "Tanh": ("(1 - tanh²x)·dy", _tanh),
    "Exp": ("e^x·dy", lambda x, dy, m: m.act("Exp", x) * dy),
    "Log": ("dy / x (for every x, as RLX)", lambda x, dy, m: dy / x),
    "Sqrt": ("½dy/√x where √x > 0, else 0 (x <= 0 and NaN give 0)", _sqrt),
    "Rsqrt": ("-½dy/(x√x) where √x > 0, else 0", _rsqrt),
    "Neg": ("-dy", lambda x, dy, m: -dy),
    "Abs": ("sign(x)·dy (0 at x = 0 and NaN)", lambda x, dy, m: m.act("Sign", x) * dy),
    "Sin": ("cos(x)·dy", lambda x, dy, m: m.act("Cos", x) * dy),
    "Cos": ("-sin(x)·dy", lambda x, dy, m: -m.act("Sin", x) * dy),
    "Tan": ("(1 + tan²x)·dy", _tan),
    "Atan": ("dy / (1 + x²)", lambda x, dy, m: dy / (1.0 + x * x)),
    "Round": ("dy (straight-through: round taken as the identity)", lambda x, dy, m: dy),
    "Recip": ("-dy / x²", lambda x, dy, m: -dy / (x * x)),
    "Floor": ("0·dy (piecewise constant)", lambda x, dy, m: dy * 0.0),
    "Ceil": ("0·dy (piecewise constant)", lambda x, dy, m: dy * 0.0),
    "Sign": ("0·dy (piecewise constant, 0 also at x = 0)", lambda x, dy, m: dy * 0.0),
    "Softplus": ("σ(x)·dy", lambda x, dy, m: m.act("Sigmoid", x) * dy),
    "Elu": ("min(e^x, 1)·dy (elu'(0) = 1; NaN x gives dy)",
            lambda x, dy, m: m.minimum(m.act("Exp", x), 1.0) * dy),
    "Erf": ("(2/√π)e^(-x²)·dy",
            lambda x, dy, m: m.act("Exp", -(x * x)) * TWO_OVER_SQRT_PI * dy),
    "HardSwish": ("(hardsigmoid(x) + x·hardsigmoid'(x))·dy: 0 for x <= -3, 1 for x >= 3",
                  lambda x, dy, m: (m.act("HardSigmoid", x) + x * _hard_sigmoid_slope(x, m))
                  * dy),
    "HardSigmoid": ("dy/6 where |x| < 3, else 0 (0 at ±3)",
                    lambda x, dy, m: _hard_sigmoid_slope(x, m) * dy),
    "Mish": ("(tanh(sp) + x(1 - tanh²(sp))σ(x))·dy, sp = softplus(x)", _mish),
    "Softsign": ("dy / (1 + |x|)²", _softsign),
    "LogSigmoid": ("σ(-x)·dy", lambda x, dy, m: m.act("Sigmoid", -x) * dy),
}
if set(DERIVATIVES) != set(ACTIVATIONS):     # a new Activation kind needs its rule here
    raise ImportError(f"ActivationBackward has no rule for "
                      f"{sorted(set(ACTIVATIONS) - set(DERIVATIVES))}")


def grad_reference(kind: str, x, dy, out_np):
    """dx of activation ``kind`` in the work dtype, rounded once to ``out_np``."""
    xw, dyw = work_arrays(x, dy)
    with np.errstate(all="ignore"):
        dx = DERIVATIVES[kind][1](xw, dyw, NUMPY)
    return np.asarray(dx).astype(out_np)


# ── shapes and checks ─────────────────────────────────────────────────────

def _check_pair(shapes, name: str):
    x, dy = shapes
    want(x.dtype.is_float, f"(C2) {name} operand `x` must be a float tensor, got {x.dtype}")
    want(dy.dtype == x.dtype, f"(C2) {name} `dy` must have x's dtype {x.dtype}, got "
                              f"{dy.dtype}")
    same = x.rank == dy.rank and all(
        a == b or isinstance(a, Dyn) or isinstance(b, Dyn) for a, b in zip(x.dims, dy.dims))
    want(same, f"(C3) {name} `dy` must have x's shape {x.dims_text()} (no broadcasting), "
               f"got {dy.dims_text()}")


def _check_activation_backward(shapes, a, out):
    if a.kind not in DERIVATIVES:
        from ..ir.pyrlx_names import did_you_mean

        want(False, f"(C1) unknown activation {a.kind!r}{did_you_mean(a.kind, DERIVATIVES)}")
    _check_pair(shapes, "ActivationBackward")


@dataclass(frozen=True)
class ActivationBackwardAttrs:
    kind: str = attr(ACTIVATION_ENUM, doc="the forward activation being differentiated")


# ── samples ───────────────────────────────────────────────────────────────

_NAN, _INF = np.nan, np.inf
# values at every rule's kinks: 0 (Relu, Abs, Sign, Elu), ±3 (HardSigmoid, HardSwish),
# integers and halves (Round, Floor, Ceil), and the non-finite values
_KINKS = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 3.0, -3.0, _INF, -_INF, _NAN],
                  np.float32)
# x, dy and the exact dx, for kinds where it is representable
_HAND = {
    "Relu": ([-1, 0, 2], [5, 5, 5], [0, 0, 5]),
    "Abs": ([-2, 0, 3], [1, 1, 1], [-1, 0, 1]),
    "Sigmoid": ([0], [4], [1]), "Silu": ([0], [2], [1]), "Gelu": ([0], [2], [1]),
    "GeluApprox": ([0], [2], [1]), "Tanh": ([0], [3], [3]), "Exp": ([0], [3], [3]),
    "Log": ([2, -4], [1, 1], [0.5, -0.25]), "Sqrt": ([4, 0, -1], [1, 1, 1], [0.25, 0, 0]),
    "Rsqrt": ([4, 0], [1, 1], [-0.0625, 0]), "Neg": ([7], [2], [-2]),
    "Sin": ([0], [3], [3]), "Tan": ([0], [3], [3]), "Atan": ([1], [1], [0.5]),
    "Round": ([0.5, 2.7], [3, -1], [3, -1]), "Recip": ([2], [1], [-0.25]),
    "Floor": ([1.5], [2], [0]), "Ceil": ([1.5], [2], [0]), "Sign": ([0, -2], [2, 2], [0, 0]),
    "Softplus": ([0], [2], [1]), "Elu": ([0, 1], [3, 3], [3, 3]),
    "HardSigmoid": ([-4, -3, 0, 3], [6, 6, 6, 6], [0, 0, 1, 0]),
    "HardSwish": ([-4, -3, 0, 3, 4], [1, 1, 1, 1, 1], [0, 0, 0.5, 1, 1]),
    "Softsign": ([1, -1], [4, 4], [1, 1]), "LogSigmoid": ([0], [2], [1]),
}


# kinds that also get the layout samples (0-d, size-1, empty): one select, one product
# and the identity; the others share their elementwise code paths
_LAYOUT_KINDS = ("Relu", "Gelu", "Round")


def pair_samples(rng, attrs, kind: str):
    """[x, dy] samples for the activation ``kind`` (ReluBackward: "Relu"). The f32 sample
    is re-run in f64, f16 and bf16 by the conformance cases; the others keep their dtype
    (f64 or f16: the f16 ones run the f32 path between casts)."""
    r = lambda *s: rng.standard_normal(s)  # noqa: E731
    # the kinks, then random points; dy ends in NaN and inf (a product propagates them,
    # a select drops them)
    x = np.concatenate([_KINKS, r(6).astype(np.float32) * 3])
    dy = r(x.size).astype(np.float32)
    dy[-2:] = (_NAN, _INF)
    out = [Sample((x, dy), attrs, tags=("prime-length", "kinks", "±0", "inf", "nan",
                                        "domain-edge", "dy-nonfinite"))]
    if kind in _LAYOUT_KINDS:
        h = lambda *s: r(*s).astype(np.float16)  # noqa: E731
        out += [
            Sample((np.float64(0.75), np.float64(-1.5)), attrs, tags=("0-d", "f64")),
            Sample((h(3, 1), h(3, 1)), attrs, tags=("size-1", "f16")),
            Sample((np.zeros((0, 3), np.float16), np.zeros((0, 3), np.float16)), attrs,
                   tags=("empty", "f16")),
        ]
    if kind in _HAND:
        xs, dys, dx = (np.asarray(v, np.float64) for v in _HAND[kind])
        out.append(Sample((xs, dys), attrs, tags=("hand", "f64"), expect=dx))
    return out


def _activation_backward_samples(rng):
    out = []
    for kind in DERIVATIVES:
        out += pair_samples(rng, ActivationBackwardAttrs(kind), kind)
    return out


_PAIR_CONSTRAINTS = (
    "C2: x is a float tensor and dy has x's dtype; the output has x's shape and dtype.",
    "C3: dy has exactly x's dims (RLX builds both from one forward node: no broadcasting).",
)

def _x_shape(s, a):
    """x's shape and dtype"""
    return s[0]


register(OpDef(
    kind="ReluBackward", family="backward", arity=2, caps=Caps.NONE,
    infer=_x_shape, check=lambda s, a, o: _check_pair(s, "ReluBackward"),
    reference=lambda ctx, x, dy: grad_reference("Relu", x, dy, ctx.out_np),
    input_names=("x", "dy"),
    doc="The gradient of Relu: `dx = dy` where `x > 0`, else `0`. At the kink the "
        "subgradient is 0 (relu'(0) = 0, also for -0), and a NaN `x` gives 0 whatever `dy` "
        "is (a select, not a product: `dy` = NaN or inf at x <= 0 still gives 0).",
    constraints=("C1: operands are `[x, dy]`, x the forward input and dy the upstream "
                 "gradient.",) + _PAIR_CONSTRAINTS,
    samples=lambda rng: pair_samples(rng, None, "Relu"), dtypes=FLOATS,
    accuracy=exact(reason="a select between dy and 0"),
    notes="RLX's autodiff emits ReluBackward for Relu and ActivationBackward for every "
          "other activation; ActivationBackward{Relu} computes the same thing.",
))

register(OpDef(
    kind="ActivationBackward", family="backward", attrs=ActivationBackwardAttrs,
    payload="struct", arity=2, caps=Caps.NONE, infer=_x_shape,
    check=_check_activation_backward,
    reference=lambda ctx, x, dy: grad_reference(ctx.attrs.kind, x, dy, ctx.out_np),
    input_names=("x", "dy"),
    doc="The closed-form gradient of the activation `kind` at the forward input `x`, "
        "applied to the upstream gradient `dy` elementwise (`dx = f'(x)·dy`). The rules "
        "(σ the logistic sigmoid, Φ/φ the normal cdf/pdf):\n\n" +
        "\n".join(f"- `{k}`: {v[0]}" for k, v in DERIVATIVES.items()) +
        "\n\nThe formulas are evaluated as written, so non-finite inputs give what they "
        "give (Silu at x = -inf: 0·(-inf) = NaN); the selects (Relu, Sqrt, Rsqrt) give "
        "0 on their else branch whatever dy is.",
    constraints=("C1: `kind` is one of the 29 activations; operands are `[x, dy]`.",)
    + _PAIR_CONSTRAINTS,
    samples=_activation_backward_samples, dtypes=FLOATS,
    # f32 ULPs: the forward function's contract, one more rounding per step of the rule,
    # and floors where the rule cancels (1 - σ, 1 - tanh², 1 + erf, 3 - |x|). Erf's
    # e^(-x²) turns the rounding of x² into a relative x²·eps/2: 40 ulps at |x| = 9.
    accuracy=per_op({
        "Gelu": ulp(24, floor=16), "GeluApprox": ulp(16, floor=12), "Silu": ulp(12, floor=8),
        "Relu": exact(), "Sigmoid": ulp(8, floor=4), "Tanh": ulp(8, floor=4),
        "Exp": ulp(4), "Log": ulp(2), "Sqrt": ulp(4), "Rsqrt": ulp(5), "Neg": exact(),
        "Abs": exact(), "Sin": ulp(5, floor=2), "Cos": ulp(5, floor=2),
        "Tan": ulp(12, floor=4), "Atan": ulp(4), "Round": exact(), "Recip": ulp(4),
        "Floor": exact(), "Ceil": exact(), "Sign": exact(), "Softplus": ulp(8),
        "Elu": ulp(4), "Erf": ulp(48), "HardSwish": ulp(4, floor=2),
        "HardSigmoid": ulp(2), "Mish": ulp(24, floor=8), "Softsign": ulp(4),
        "LogSigmoid": ulp(8)}, key="kind"),
    notes="The 17 kinds of RLX's Activation enum follow its CPU ActivationBackward kernel "
          "(Round passes dy straight through; Sqrt/Rsqrt give 0 where √x is not > 0; Abs "
          "gives 0 at 0). The other 12 follow RLX's autodiff composition `dy · f'(x)` "
          "(`activation_deriv_wrt_x`: Floor/Ceil/Sign 0, Elu min(e^x, 1), HardSigmoid "
          "1/6 on |x| < 3), which RLX emits instead of an ActivationBackward node. RLX's "
          "f64 kernel uses the erf form for GeluApprox too, and its primitive lowering "
          "uses the tanh form for Gelu and tanh(x) for Tan; here each kind has one rule.",
))
