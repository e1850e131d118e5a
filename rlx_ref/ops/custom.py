"""Custom family: RLX's ``Custom`` op and the registry that gives each name its meaning.

A ``Custom`` node carries only ``name``, ``num_inputs`` and an opaque ``attrs`` byte blob
(RLX's ``Op::Custom``). What the op computes lives in a registry keyed by ``name``, as
RLX's ``op_registry``; users add ops there without editing rlx_ref::

    from rlx_ref.ops.custom import register_custom

    @register_custom("my.softclip", num_inputs=1, infer=lambda shapes, attrs: shapes[0])
    def softclip(ctx, x):
        return np.tanh(x)

The ``Custom`` OpDef's infer, check and reference dispatch on the payload's ``name``.
"""
from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..ir.dtype import DType
from ..ir.shape import Shape, ShapeError
from .codec import BYTES, STR, U32, attr
from .opdef import Caps, OpDef, OpError, Sample, compute_dtype, register, want


@dataclass(frozen=True)
class CustomAttrs:
    name: str = attr(STR, doc="the registry key of the custom op")
    num_inputs: int = attr(U32, doc="operand count, captured when the node was built")
    attrs: bytes = attr(BYTES, b"", doc="opaque per-instance bytes, decoded by the op")


@dataclass
class CustomCtx:
    """What a custom op's reference sees: its attrs bytes and the declared output."""

    name: str
    attrs: bytes
    out: Shape
    float64: bool = False

    def np_dtype(self, dtype: DType) -> np.dtype:
        """Storage dtype, with floats widened to f64 in float64 mode."""
        if self.float64 and dtype.is_float:
            return np.dtype(np.float64)
        return dtype.np

    @property
    def out_np(self) -> np.dtype:
        return self.np_dtype(self.out.dtype)

    @property
    def out_dims(self) -> tuple:
        return self.out.static_dims()


@dataclass(frozen=True)
class CustomOp:
    """One registered custom op (RLX's ``OpExtension`` plus a reference kernel).

    infer(shapes, attrs) -> Shape; reference(ctx: CustomCtx, *arrays) -> ndarray;
    check(shapes, attrs) -> messages (or raises OpError); samples(rng) -> [Sample].
    """

    name: str
    num_inputs: int
    infer: Callable
    reference: Callable
    check: Callable | None = None
    doc: str = ""
    samples: Callable | None = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        """``with register_custom(...):`` unregisters the op on leaving the block."""
        if _CUSTOM.get(self.name) is self:
            del _CUSTOM[self.name]
        return False


_CUSTOM: dict[str, CustomOp] = {}


def register_custom(name: str, *, num_inputs: int, infer: Callable,
                    reference: Callable | None = None, check: Callable | None = None,
                    doc: str = "", samples: Callable | None = None, replace: bool = False):
    """Register custom op ``name``; returns its CustomOp (also a context manager that
    unregisters it). Without ``reference`` it is a decorator for the reference function.
    A taken name is an error unless ``replace=True`` (RLX's ``register_op_strict``)."""
    if reference is None:
        def decorate(fn):
            register_custom(name, num_inputs=num_inputs, infer=infer, reference=fn,
                            check=check, doc=doc or (fn.__doc__ or ""), samples=samples,
                            replace=replace)
            return fn
        return decorate
    if not isinstance(name, str) or not name:
        raise ValueError(f"a custom op name is a non-empty string, got {name!r}")
    if isinstance(num_inputs, bool) or not isinstance(num_inputs, int) or num_inputs < 0:
        raise ValueError(f"custom op {name!r}: num_inputs must be an int >= 0, "
                         f"got {num_inputs!r}")
    for what, fn in (("infer", infer), ("reference", reference), ("check", check),
                     ("samples", samples)):
        if fn is not None and not callable(fn):
            raise TypeError(f"custom op {name!r}: {what} must be callable, got {fn!r}")
    if name in _CUSTOM and not replace:
        raise ValueError(f"custom op {name!r} is already registered (pass replace=True, or "
                         "unregister_custom it first)")
    op = CustomOp(name, num_inputs, infer, reference, check, doc, samples)
    _CUSTOM[name] = op
    return op


def unregister_custom(name: str) -> CustomOp:
    """Remove custom op ``name`` and return it; KeyError listing the registered names."""
    op = lookup_custom(name)
    del _CUSTOM[name]
    return op


def lookup_custom(name: str) -> CustomOp:
    """The CustomOp registered as ``name``; KeyError listing the registered names."""
    try:
        return _CUSTOM[name]
    except KeyError:
        raise KeyError(_not_registered(name)) from None


def custom_ops() -> dict[str, CustomOp]:
    """A snapshot of the registry, name → CustomOp."""
    return dict(_CUSTOM)


def _not_registered(name: str) -> str:
    names = ", ".join(sorted(_CUSTOM)) or "none"
    return (f"custom op {name!r} is not registered (registered: {names}); add it with "
            "rlx_ref.ops.custom.register_custom")


def custom_attrs(name: str, attrs: bytes = b"") -> CustomAttrs:
    """The Custom payload for registered op ``name`` (num_inputs taken from the registry)."""
    return CustomAttrs(name, lookup_custom(name).num_inputs, bytes(attrs))


# ── the Custom OpDef: dispatch on the payload's name ──────────────────────

def _registered(a: CustomAttrs) -> CustomOp:
    want(a.name in _CUSTOM, f"(C1) {_not_registered(a.name)}")
    return _CUSTOM[a.name]


def _check_arity(op: CustomOp, n_operands: int, a: CustomAttrs) -> None:
    want(n_operands == a.num_inputs, f"(C2) Custom {a.name!r} declares num_inputs="
                                     f"{a.num_inputs} but has {n_operands} operand(s)")
    want(op.num_inputs == a.num_inputs, f"(C2) custom op {a.name!r}: registered op expects "
                                        f"{op.num_inputs} inputs, got {a.num_inputs}")


def _infer_custom(shapes, a):
    op = _registered(a)
    _check_arity(op, len(shapes), a)
    try:
        out = op.infer(list(shapes), a.attrs)
    except (OpError, ShapeError):
        raise
    except Exception as e:  # noqa: BLE001  (a user's rule failing reads as a verifier message)
        raise OpError(f"(C4) custom op {a.name!r}: infer failed: {type(e).__name__}: {e}")
    want(isinstance(out, Shape), f"(C4) custom op {a.name!r}: infer returned {out!r}, "
                                 "expected a Shape")
    return out


def _check_custom(shapes, a, out):
    op = _registered(a)
    _check_arity(op, len(shapes), a)
    if op.check is None:
        return
    try:
        messages = list(op.check(list(shapes), a.attrs) or ())
    except (OpError, ShapeError) as e:
        messages = [str(e)]
    want(not messages, "(C3) " + "; ".join(f"{a.name}: {m}" for m in messages))


def _ref_custom(ctx, *arrays):
    a = ctx.attrs
    op = _registered(a)
    _check_arity(op, len(arrays), a)
    return op.reference(CustomCtx(a.name, a.attrs, ctx.out, ctx.float64), *arrays)


def _custom_samples(rng):
    out = []
    for op in list(_CUSTOM.values()):
        out += op.samples(rng) if op.samples else []
    return out


register(OpDef(
    kind="Custom", family="custom", attrs=CustomAttrs, payload="struct", arity=None,
    caps=Caps.NONE, infer=_infer_custom, check=_check_custom, reference=_ref_custom,
    doc="A user-registered op. The payload names the op (`name`), fixes its operand count "
        "(`num_inputs`) and carries opaque per-instance bytes (`attrs`) that only the op "
        "decodes. Its shape rule, local checks and reference come from the custom-op "
        "registry (`rlx_ref.ops.custom.register_custom`), keyed by `name`, as RLX's "
        "`op_registry`; rlx_ref ships one demo op, `rlx_ref.demo.scale`.",
    constraints=("C1: `name` is registered.",
                 "C2: the operand count equals `num_inputs`, which equals the registered "
                 "op's input count.",
                 "C3: the registered op's check accepts the operand shapes and attrs.",
                 "C4: the output shape is what the registered op's infer returns."),
    samples=_custom_samples,
    notes="RLX computes a Custom node's shape once, when the node is built, and its "
          "verifier never re-infers it and skips unregistered names; rlx_ref re-infers the "
          "shape on every verify and rejects a name that is not registered, because the "
          "oracle cannot run it. Autodiff, lowering and vmap rules are not part of the "
          "registry yet.",
))


# ── the demo op: scale by an f32 factor held in attrs ─────────────────────

DEMO_SCALE = "rlx_ref.demo.scale"


def scale_attrs(factor: float) -> bytes:
    """attrs of ``rlx_ref.demo.scale``: the factor as 4 little-endian f32 bytes."""
    return struct.pack("<f", factor)


def _demo_check(shapes, attrs):
    msgs = []
    if len(attrs) != 4:
        msgs.append(f"attrs must be one little-endian f32 (4 bytes), got {len(attrs)} bytes")
    if not shapes[0].dtype.is_float:
        msgs.append(f"the input must be float, got {shapes[0].dtype}")
    return msgs


def _demo_scale(ctx, x):
    """y = x · factor, computed in the input's compute dtype and rounded once."""
    (factor,) = struct.unpack("<f", ctx.attrs)
    y = compute_dtype(x)
    return (y * y.dtype.type(factor)).astype(ctx.out_np)


def _demo_samples(rng):
    def s(x, factor, tags=(), expect=None):
        return Sample((x,), custom_attrs(DEMO_SCALE, scale_attrs(factor)), tags=tags,
                      expect=expect)
    f = np.float32
    special = np.array([0.0, -0.0, 1.5, np.inf, -np.inf, np.nan], f)
    return [
        s(np.array([1.0, -2.0, 0.5], f), 2.0, expect=np.array([2.0, -4.0, 1.0], f)),
        s(special, -1.0, ("±0", "inf", "nan"), expect=-special),
        s(f(3.0), 0.5, ("0-d",), expect=f(1.5)),
        s(np.zeros((0, 2), f), 3.0, ("empty",)),
        s(rng.standard_normal(7).astype(np.float16), 1.5, ("f16", "prime-length")),
        s(rng.standard_normal((2, 3)), 0.25, ("f64",)),
    ]


register_custom(DEMO_SCALE, num_inputs=1, infer=lambda shapes, attrs: shapes[0],
                reference=_demo_scale, check=_demo_check, samples=_demo_samples,
                doc="Demo: `x · factor`, the factor stored in attrs as one f32.")
