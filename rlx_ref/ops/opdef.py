"""The ``OpDef`` record and the registry: every op kind is defined exactly once.

Builder, verifier, shape inference, text form, interpreter, docs and conformance all
read these records; nothing else in rlx_ref knows an op's semantics.
"""
from __future__ import annotations

import dataclasses
import enum
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..ir.dtype import DType
from ..ir.shape import Shape, ShapeError


class Caps(enum.IntFlag):
    """RLX's ``OpCaps`` flags (bit values as RLX's ``capability.rs``)."""

    NONE = 0
    LEAF = 1 << 0
    ELEMENTWISE = 1 << 1
    CONST_FOLDABLE = 1 << 2
    BLAS = 1 << 3
    FUSION_BOUNDARY = 1 << 4
    REDUCTION = 1 << 5
    TRANSFORM = 1 << 6
    FUSED = 1 << 7
    NESTED_BODY = 1 << 8
    NONDETERMINISTIC = 1 << 9

    def names(self) -> list[str]:
        return [c.name for c in Caps if c and c in self]


class OpError(ValueError):
    """An op-local rule was broken; the message names what is wrong and what was expected."""


@dataclass
class Sample:
    """One small input set for an op: arrays, payload, optional declared output, tags.

    ``out`` is needed only for kinds whose shape rule returns None (declared shape is
    authoritative). ``tags`` name the edge cases a sample covers (``empty``, ``0-d``,
    ``broadcast``, ``nan``, ``ties``...). ``expect`` (optional) is a hand-computed result.
    """

    inputs: tuple
    attrs: Any = None
    out: Shape | None = None
    tags: tuple = ()
    name: str = ""
    expect: Any = None


@dataclass
class RefCtx:
    """What a reference function may see besides its input arrays."""

    attrs: Any
    out: Shape
    float64: bool = False
    run_body: Callable | None = None
    node: Any = None

    def np_dtype(self, dtype: DType) -> np.dtype:
        """Storage dtype, with floats widened to f64 in float64 mode."""
        if self.float64 and dtype.is_float:
            return np.dtype(np.float64)
        if self.float64 and dtype is DType.C64:
            return np.dtype(np.complex128)
        return dtype.np

    def __post_init__(self):
        self._out_np = self.np_dtype(self.out.dtype)

    @property
    def out_np(self) -> np.dtype:
        """The numpy dtype the reference must return (cached: read on every node run)."""
        return self._out_np

    @property
    def out_dims(self) -> tuple:
        return self.out.static_dims()


@dataclass
class OpDef:
    """Everything rlx_ref knows about one RLX op kind.

    infer(shapes, attrs) -> Shape | None; check(shapes, attrs) raises OpError;
    reference(ctx, *arrays) -> ndarray; samples(rng) -> list[Sample].
    """

    kind: str
    family: str
    doc: str
    attrs: type | None = None
    payload: str = "unit"            # unit | newtype | struct
    arity: int | None = 1            # None = variadic
    min_arity: int = 0
    caps: Caps = Caps.NONE
    infer: Callable | None = None
    check: Callable | None = None
    reference: Callable | None = None
    constraints: tuple = ()
    samples: Callable | None = None
    dtypes: tuple = ()
    subgraphs: Callable | None = None   # attrs -> list[Graph]
    input_names: tuple = ()
    notes: str = ""
    accuracy: Any = None   # conformance contract (conformance/accuracy.py); None = default

    def __post_init__(self):
        if self.payload not in ("unit", "newtype", "struct"):
            raise ValueError(f"{self.kind}: payload must be unit/newtype/struct")
        if self.payload != "unit" and self.attrs is None:
            raise ValueError(f"{self.kind}: a {self.payload} payload needs an attrs class")
        if self.payload == "newtype" and len(dataclasses.fields(self.attrs)) != 1:
            raise ValueError(f"{self.kind}: a newtype payload has exactly one field")

    def bodies(self, attrs) -> list:
        return list(self.subgraphs(attrs)) if self.subgraphs else []

    def infer_shape(self, shapes: list[Shape], attrs) -> Shape | None:
        return self.infer(shapes, attrs) if self.infer else None

    def make_attrs(self, *args, **kwargs):
        if self.attrs is None:
            if args or kwargs:
                raise OpError(f"{self.kind} takes no attributes, got {args or kwargs}")
            return None
        try:
            return self.attrs(*args, **kwargs)
        except TypeError as e:
            names = ", ".join(f.name for f in dataclasses.fields(self.attrs))
            raise OpError(f"{self.kind} attributes are ({names}): {e}") from None


_REGISTRY: dict[str, OpDef] = {}


def register(opdef: OpDef) -> OpDef:
    """Add an OpDef; a kind may be registered only once."""
    if opdef.kind in _REGISTRY:
        raise ValueError(f"op kind {opdef.kind!r} is already registered")
    _REGISTRY[opdef.kind] = opdef
    return opdef


def get(kind: str) -> OpDef:
    """The OpDef of ``kind``; KeyError naming close matches when unknown."""
    _ensure_loaded()
    try:
        return _REGISTRY[kind]
    except KeyError:
        import difflib

        near = difflib.get_close_matches(kind, _REGISTRY, n=3)
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        raise KeyError(f"unknown op kind {kind!r}{hint}") from None


def all_opdefs() -> list[OpDef]:
    _ensure_loaded()
    return list(_REGISTRY.values())


def kinds() -> list[str]:
    _ensure_loaded()
    return list(_REGISTRY)


_LOADED = False               # True once every family is registered
_LOADING = threading.RLock()  # other threads wait for the load; the loading one re-enters
_IN_LOAD = []


def _ensure_loaded():
    global _LOADED
    if _LOADED:
        return
    with _LOADING:
        if _LOADED or _IN_LOAD:     # done, or this thread's own load asking again
            return
        _IN_LOAD.append(True)
        try:
            from . import load_families

            load_families()
            _LOADED = True
        finally:
            _IN_LOAD.clear()


# ── helpers shared by family files ──────────────────────────────────────────

def want(cond: bool, message: str) -> None:
    """Raise OpError(message) unless ``cond``."""
    if not cond:
        raise OpError(message)


_LOW_PRECISION = frozenset({np.dtype(np.float16), DType.BF16.np})


def compute_dtype(x: np.ndarray) -> np.ndarray:
    """Upcast f16/bf16 to f32 for arithmetic (RLX computes low precision in f32)."""
    if x.dtype in _LOW_PRECISION:
        return x.astype(np.float32)
    return x


def same_dtype(shapes: list[Shape], what: str = "operands") -> DType:
    """All shapes share one dtype; OpError naming the dtypes otherwise."""
    dts = {s.dtype for s in shapes}
    if len(dts) > 1:
        raise OpError(
            f"{what} must share one dtype, got {', '.join(str(s.dtype) for s in shapes)}"
        )
    return shapes[0].dtype


__all__ = [
    "Caps", "OpDef", "OpError", "RefCtx", "Sample", "ShapeError", "register", "get",
    "all_opdefs", "kinds", "want", "compute_dtype", "same_dtype", "field",
]
