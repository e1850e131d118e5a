"""Leaves: Input, Param, Constant — the values a graph starts from."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.dtype import DType
from ..ir.shape import Shape
from .codec import BYTES, STR, attr
from .opdef import Caps, OpDef, Sample, register, want


@dataclass(frozen=True)
class Named:
    name: str = attr(STR, doc="the name the value is bound by at run time")


@dataclass(frozen=True)
class ConstantAttrs:
    data: bytes = attr(BYTES, doc="little-endian element bytes, row-major")


def _check_named(shapes, a, out):
    want(isinstance(a.name, str) and a.name != "", "(C1) a leaf needs a non-empty name")


def _ref_fed(ctx):
    raise RuntimeError("Input/Param values are fed by the interpreter, not computed")


def _leaf_samples(rng):
    return [Sample((), Named("x"), Shape([3], DType.F32), ("leaf",))]


for _kind, _what in (("Input", "a model input"), ("Param", "a weight (parameter)")):
    register(OpDef(
        kind=_kind, family="leaves", attrs=Named, payload="struct", arity=0, caps=Caps.LEAF,
        check=_check_named, reference=_ref_fed,
        doc=f"{_what.capitalize()} bound by `name` at run time; its shape and dtype are the "
            "node's declared shape, and a value of any other shape or dtype is rejected.",
        constraints=("C1: name is non-empty.", "C2: the node has no operands.",
                     "C3: the fed value's shape and dtype equal the declared shape."),
        samples=_leaf_samples,
    ))


def constant_bytes(array: np.ndarray) -> bytes:
    """The payload bytes of a Constant holding ``array`` (little-endian, row-major)."""
    a = np.ascontiguousarray(array)
    return a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()


def _check_constant(shapes, a, out):
    n = out.numel
    want(n is not None, "(C2) a Constant's shape must be static")
    expect = n * out.dtype.size_bytes
    want(len(a.data) == expect,
         f"(C1) Constant data has {len(a.data)} bytes, expected {expect} "
         f"({n} x {out.dtype} of {out.dtype.size_bytes} bytes)")


def _ref_constant(ctx):
    dt = ctx.out.dtype
    raw = np.frombuffer(ctx.attrs.data, dtype=dt.np.newbyteorder("<"))
    return raw.astype(ctx.out_np).reshape(ctx.out_dims)


def _constant_samples(rng):
    vals = np.array([[1.5, -2.0, 0.0], [np.inf, -0.0, 3.25]], np.float32)
    ints = np.array([-3, 0, 7], np.int32)
    return [
        Sample((), ConstantAttrs(constant_bytes(vals)), Shape([2, 3], DType.F32), ("inf", "-0"),
               expect=vals),
        Sample((), ConstantAttrs(constant_bytes(ints)), Shape([3], DType.I32), ("int",),
               expect=ints),
        Sample((), ConstantAttrs(constant_bytes(np.float32(2.5))), Shape([], DType.F32),
               ("0-d",), expect=np.float32(2.5)),
        Sample((), ConstantAttrs(b""), Shape([0, 4], DType.F32), ("empty",),
               expect=np.zeros((0, 4), np.float32)),
    ]


register(OpDef(
    kind="Constant", family="leaves", attrs=ConstantAttrs, payload="struct", arity=0,
    caps=Caps.LEAF, check=_check_constant, reference=_ref_constant,
    doc="A literal tensor. `data` holds its elements as little-endian bytes of the declared "
        "dtype in row-major order (bool is one byte, 0 or 1).",
    constraints=("C1: len(data) == numel(shape) * size_bytes(dtype).",
                 "C2: the shape is static."),
    samples=_constant_samples,
))
