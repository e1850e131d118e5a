"""Complex family: ComplexNormSq, ComplexNormSqBackward and Conjugate on C64 tensors.

RLX stores a C64 element as an interleaved ``[re: f32, im: f32]`` pair (numpy's complex64).
These three kinds are the Wirtinger autodiff surface of complex graphs: ``|z|²`` is the
real loss, its VJP is ``g · z``, and Conjugate is what the VJP rules of complex Binary ops
emit. Complex Add/Sub/Mul/Div are ``Binary`` kinds (elementwise family).
"""
from __future__ import annotations

import numpy as np

from ..conformance.accuracy import exact, ulp
from ..ir.dtype import DType
from ..ir.shape import Dyn
from .opdef import Caps, OpDef, Sample, register, want

# RLX classifies the three as OpCaps::NONE (capability.rs): opaque to the optimizer
CAPS = Caps.NONE


def _check_c64(s, kind: str, name: str = "z") -> None:
    want(s.dtype is DType.C64, f"(C1) {kind} operand `{name}` must be a C64 tensor, got "
                               f"{s.dtype}")


def _work(z, ctx):
    """The complex working array: complex64 in the case dtype, complex128 in float64 mode."""
    return np.asarray(z).astype(np.complex128 if ctx.float64 else np.complex64)


def _ref_norm_sq(ctx, z):
    w = _work(z, ctx)
    with np.errstate(all="ignore"):
        return (w.real * w.real + w.imag * w.imag).astype(ctx.out_np)


def _ref_conjugate(ctx, z):
    return np.conj(_work(z, ctx)).astype(ctx.out_np)


def _ref_norm_sq_backward(ctx, z, g):
    w = _work(z, ctx)
    gr = np.asarray(g).astype(w.real.dtype)
    with np.errstate(all="ignore"):
        # (g·re, g·im): a real scale of z, not a complex product (no g·0 cross terms)
        out = np.empty(w.shape, w.dtype)
        out.real = gr * w.real
        out.imag = gr * w.imag
    return out.astype(ctx.out_np)


def _check_backward(shapes, a, out):
    z, g = shapes
    _check_c64(z, "ComplexNormSqBackward")
    want(g.dtype is DType.F32, f"(C1) ComplexNormSqBackward operand `g` must be F32 (the "
                               f"forward's output dtype), got {g.dtype}")
    same = z.rank == g.rank and all(a == b or isinstance(a, Dyn) or isinstance(b, Dyn)
                                   for a, b in zip(z.dims, g.dims))
    want(same, f"(C2) ComplexNormSqBackward needs `g` of z's shape {z.dims_text()}, got "
               f"{g.dims_text()} (no broadcasting)")


def _c64(rng, *shape):
    re = rng.standard_normal(shape).astype(np.float32)
    im = rng.standard_normal(shape).astype(np.float32)
    return (re + 1j * im).astype(np.complex64)


def _special():
    """NaN, ±inf and signed zeros in either part."""
    v = [complex(np.nan, 1), complex(1, np.nan), complex(np.inf, 0), complex(0, -np.inf),
         complex(-0.0, 0.0), complex(0.0, -0.0), complex(3e19, 0), complex(-2, 1e-20)]
    return np.array(v, np.complex64)


def _unary_samples(kind: str):
    def samples(rng):
        out = [
            Sample((_c64(rng, 2, 5),), tags=("prime-length",)),
            Sample((_c64(rng, 3, 1, 4),), tags=("rank-3",)),
            Sample((np.complex64(2 - 3j),), tags=("0-d",)),
            Sample((np.zeros((0, 3), np.complex64),), tags=("empty",)),
            Sample((_special(),), tags=("nan", "inf", "±0", "overflow")),
        ]
        z = np.array([3 + 4j, -1 + 0j, 0.5 - 2j, -0.0 - 0.0j], np.complex64)
        if kind == "ComplexNormSq":
            # 9 + 16, 1, 0.25 + 4, 0 (3e19² overflows f32 in the special sample above)
            out.append(Sample((z,), tags=("hand",),
                              expect=np.array([25, 1, 4.25, 0], np.float32)))
        else:
            out.append(Sample((z,), tags=("hand", "±0"), expect=np.conj(z)))
        return out
    return samples


def _backward_samples(rng):
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    z = np.array([3 + 4j, -1 + 2j, 0.5 - 2j], np.complex64)
    sp = _special()
    return [
        Sample((_c64(rng, 2, 5), r(2, 5)), tags=("prime-length",)),
        Sample((_c64(rng, 4), r(4)), tags=("rank-1",)),
        Sample((np.complex64(1 + 1j), np.float32(-2)), tags=("0-d",)),
        Sample((np.zeros((2, 0), np.complex64), np.zeros((2, 0), np.float32)),
               tags=("empty",)),
        Sample((sp, np.array([1, 2, 0, 1, -1, 1, 1e20, 1], np.float32)),
               tags=("nan", "inf", "±0", "overflow")),
        # g·z scales both parts: 2·(3+4i), -1·(-1+2i), 0.5·(0.5-2i)
        Sample((z, np.array([2, -1, 0.5], np.float32)), tags=("hand",),
               expect=np.array([6 + 8j, 1 - 2j, 0.25 - 1j], np.complex64)),
    ]


register(OpDef(
    kind="ComplexNormSq", family="complex", arity=1, caps=CAPS,
    infer=lambda s, a: s[0].with_dtype(DType.F32),
    check=lambda s, a, o: _check_c64(s[0], "ComplexNormSq"),
    reference=_ref_norm_sq, input_names=("z",),
    doc="Element-wise squared magnitude of a complex tensor: `|z|² = re² + im²`, an F32 "
        "tensor of z's shape (no square root, so no cancellation: every term is >= 0). "
        "The natural real-valued loss of Wirtinger reverse-mode autodiff on complex graphs.",
    constraints=("C1: z is a C64 tensor; the output has z's dims and dtype F32.",),
    samples=_unary_samples("ComplexNormSq"), dtypes=(DType.C64,),
    accuracy=ulp(2, reason="two squares and one add of non-negative terms"),
    notes="RLX defines the kind on C64 only (its CPU thunk reads interleaved f32 pairs); a "
          "C128 operand is rejected here as there.",
))

register(OpDef(
    kind="Conjugate", family="complex", arity=1, caps=CAPS,
    infer=lambda s, a: s[0], check=lambda s, a, o: _check_c64(s[0], "Conjugate"),
    reference=_ref_conjugate, input_names=("z",),
    doc="Element-wise complex conjugate `re - i·im` of a C64 tensor (the imaginary part's "
        "sign bit flips, so NaN and ±0 keep their payloads). The VJP rules of complex "
        "Binary ops emit it (`dL/dā = upstream · conj(b)`), and it is its own VJP.",
    constraints=("C1: z is a C64 tensor; the output has z's shape and dtype.",),
    samples=_unary_samples("Conjugate"), dtypes=(DType.C64,),
    accuracy=exact(reason="a sign flip"),
))

register(OpDef(
    kind="ComplexNormSqBackward", family="complex", arity=2, caps=CAPS,
    infer=lambda s, a: s[0], check=_check_backward,
    reference=_ref_norm_sq_backward, input_names=("z", "g"),
    doc="Wirtinger VJP of ComplexNormSq: with `f(z) = z·z̄`, `∂f/∂z̄ = z`, so the C64 "
        "gradient for the real upstream cotangent `g` is `g · z` element-wise, stored as "
        "`[g·re, g·im]` (a real scaling of both parts, not a complex product).",
    constraints=("C1: z is C64 and g is F32 (the forward's output dtype); the output has "
                 "z's shape and dtype.",
                 "C2: g has exactly z's shape (no broadcasting)."),
    samples=_backward_samples, dtypes=(DType.C64,),
    accuracy=ulp(1, reason="one product per part"),
    notes="The gradient convention is RLX's (`g·z`, the conjugate-cogradient without a "
          "factor 2); PyTorch's `abs(z)**2` backward returns `2·g·z`.",
))
