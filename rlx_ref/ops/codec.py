"""Serde-JSON codecs for op payload fields, matching RLX's serde derives.

RLX serialises ``Op`` externally tagged: a unit variant is ``"MatMul"``, a newtype
variant ``{"Activation":"Relu"}``, a struct variant ``{"Reshape":{"new_shape":[64]}}``.
Each payload field carries one of these codecs; Python values are immutable
(tuples for lists, ``str`` or ``(tag, value)`` for enums with data).
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np


class CodecError(ValueError):
    """A JSON payload value does not have the shape its field expects."""


class Codec:
    """Converts one field between its Python value and its serde JSON value."""

    name = "value"

    def to_json(self, v):
        return v

    def from_json(self, j):
        return j

    def normalize(self, v):
        """The value as it will read back from JSON (e.g. an f32 field rounded to f32)."""
        return v

    def describe(self) -> str:
        return self.name


class _Int(Codec):
    def __init__(self, signed: bool, name: str):
        self.signed, self.name = signed, name

    def from_json(self, j):
        if isinstance(j, bool) or not isinstance(j, int):
            raise CodecError(f"expected an integer ({self.name}), got {j!r}")
        if not self.signed and j < 0:
            raise CodecError(f"expected a non-negative integer ({self.name}), got {j}")
        return j

    def to_json(self, v):
        return int(v)


class _Float(Codec):
    def __init__(self, f32: bool):
        self.f32 = f32
        self.name = "f32" if f32 else "f64"

    def from_json(self, j):
        if isinstance(j, bool) or not isinstance(j, (int, float)):
            raise CodecError(f"expected a number ({self.name}), got {j!r}")
        v = float(j)
        return float(np.float32(v)) if self.f32 else v

    def to_json(self, v):
        return F32Json(v) if self.f32 else float(v)

    def normalize(self, v):
        if isinstance(v, (int, float, np.floating)) and not isinstance(v, bool):
            return float(np.float32(v)) if self.f32 else float(v)
        return v


class F32Json(float):
    """A float printed with the shortest digits that round-trip through f32 (as serde)."""


class _Bool(Codec):
    name = "bool"

    def from_json(self, j):
        if not isinstance(j, bool):
            raise CodecError(f"expected true/false, got {j!r}")
        return j


class _Str(Codec):
    name = "string"

    def from_json(self, j):
        if not isinstance(j, str):
            raise CodecError(f"expected a string, got {j!r}")
        return j


class ListOf(Codec):
    def __init__(self, item: Codec):
        self.item = item
        self.name = f"[{item.describe()}]"

    def from_json(self, j):
        if not isinstance(j, list):
            raise CodecError(f"expected a list of {self.item.describe()}, got {j!r}")
        return tuple(self.item.from_json(x) for x in j)

    def to_json(self, v):
        return [self.item.to_json(x) for x in v]

    def normalize(self, v):
        return tuple(self.item.normalize(x) for x in v) if isinstance(v, (list, tuple)) else v


class TupleOf(Codec):
    """A fixed-length Rust tuple or array, e.g. ``[usize; 2]``."""

    def __init__(self, *items: Codec):
        self.items = items
        self.name = "(" + ", ".join(i.describe() for i in items) + ")"

    def from_json(self, j):
        if not isinstance(j, list) or len(j) != len(self.items):
            raise CodecError(f"expected a {len(self.items)}-element list {self.name}, got {j!r}")
        return tuple(c.from_json(x) for c, x in zip(self.items, j))

    def to_json(self, v):
        return [c.to_json(x) for c, x in zip(self.items, v)]

    def normalize(self, v):
        if isinstance(v, (list, tuple)) and len(v) == len(self.items):
            return tuple(c.normalize(x) for c, x in zip(self.items, v))
        return v


class Optional(Codec):
    def __init__(self, item: Codec):
        self.item = item
        self.name = f"{item.describe()}?"

    def from_json(self, j):
        return None if j is None else self.item.from_json(j)

    def to_json(self, v):
        return None if v is None else self.item.to_json(v)

    def normalize(self, v):
        return None if v is None else self.item.normalize(v)


class Enum(Codec):
    """A Rust enum. Unit variants are ``str``; data variants are ``(tag, value)``."""

    def __init__(self, name: str, units=(), data: dict | None = None):
        self.name, self.units, self.data = name, tuple(units), dict(data or {})

    @property
    def variants(self) -> tuple:
        return self.units + tuple(self.data)

    def from_json(self, j):
        if isinstance(j, str) and j in self.units:
            return j
        if isinstance(j, dict) and len(j) == 1:
            (tag, val), = j.items()
            if tag in self.data:
                return (tag, self.data[tag].from_json(val))
        raise CodecError(f"expected a {self.name} ({', '.join(self.variants)}), got {j!r}")

    def to_json(self, v):
        if isinstance(v, str):
            if v not in self.units:
                raise CodecError(f"{v!r} is not a {self.name} ({', '.join(self.variants)})")
            return v
        tag, val = v
        return {tag: self.data[tag].to_json(val)}


class _DType(Codec):
    name = "DType"

    def from_json(self, j):
        from ..ir.dtype import DType

        try:
            return DType(j)
        except ValueError:
            raise CodecError(f"expected a DType name such as \"F32\", got {j!r}") from None

    def to_json(self, v):
        return v.value


class _Graph(Codec):
    name = "Graph"

    def from_json(self, j):
        from ..ir.text import graph_from_json

        return graph_from_json(j)

    def to_json(self, v):
        from ..ir.text import graph_to_json

        return graph_to_json(v)


class _Bytes(Codec):
    name = "bytes"

    def from_json(self, j):
        if not isinstance(j, list) or not all(
            isinstance(b, int) and not isinstance(b, bool) and 0 <= b < 256 for b in j
        ):
            raise CodecError("expected a list of bytes (integers 0..255)")
        return bytes(j)

    def to_json(self, v):
        return list(v)


class Raw(Codec):
    """Any JSON value kept as-is (frozen into tuples so attrs stay immutable)."""

    name = "json"

    def from_json(self, j):
        return _freeze(j)

    def to_json(self, v):
        return _thaw(v)


def _freeze(j):
    if isinstance(j, list):
        return ("__list__",) + tuple(_freeze(x) for x in j)
    if isinstance(j, dict):
        return ("__dict__",) + tuple((k, _freeze(v)) for k, v in j.items())
    return j


def _thaw(v):
    if isinstance(v, tuple) and v and v[0] == "__list__":
        return [_thaw(x) for x in v[1:]]
    if isinstance(v, tuple) and v and v[0] == "__dict__":
        return {k: _thaw(x) for k, x in v[1:]}
    return v


INT = _Int(True, "i64")
USIZE = _Int(False, "usize")
F32 = _Float(True)
F64 = _Float(False)
BOOL = _Bool()
STR = _Str()
DTYPE = _DType()
GRAPH = _Graph()
BYTES = _Bytes()
RAW = Raw()


def attr(codec: Codec, default=dataclasses.MISSING, doc: str = ""):
    """Declare a payload field with its codec (and an optional default and doc)."""
    md = {"codec": codec, "doc": doc}
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata=md)
    return dataclasses.field(default=default, metadata=md)


def normalize_attrs(attrs):
    """A copy of ``attrs`` whose field values equal what the text form reads back."""
    if attrs is None or not dataclasses.is_dataclass(attrs):
        return attrs
    changes = {}
    for f in dataclasses.fields(attrs):
        codec = f.metadata.get("codec")
        if codec is None:
            continue
        v = getattr(attrs, f.name)
        n = codec.normalize(v)
        if n is not v and n != v or type(n) is not type(v):
            changes[f.name] = n
    return dataclasses.replace(attrs, **changes) if changes else attrs


def fields_of(attrs_cls) -> list:
    return list(dataclasses.fields(attrs_cls))


def attrs_to_json(attrs) -> dict:
    """Struct payload → JSON object, fields in declaration order."""
    return {f.name: f.metadata["codec"].to_json(getattr(attrs, f.name)) for f in fields_of(attrs)}


def attrs_from_json(attrs_cls, j, kind: str):
    """JSON object → attrs instance; unknown or missing (non-defaulted) fields are errors."""
    if not isinstance(j, dict):
        raise CodecError(f"{kind} payload must be a JSON object, got {j!r}")
    fields = {f.name: f for f in fields_of(attrs_cls)}
    unknown = [k for k in j if k not in fields]
    if unknown:
        raise CodecError(
            f"{kind} has no field {unknown[0]!r}; its fields are: {', '.join(fields)}"
        )
    kwargs = {}
    for name, f in fields.items():
        if name in j:
            try:
                kwargs[name] = f.metadata["codec"].from_json(j[name])
            except CodecError as e:
                raise CodecError(f"{kind}.{name}: {e}") from None
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            if isinstance(f.metadata["codec"], Optional):
                kwargs[name] = None
            else:
                raise CodecError(f"{kind} is missing field {name!r}")
    return attrs_cls(**kwargs)


def _ryu(sci: str, hi: int, lo: int) -> str:
    """Lay out shortest digits as Rust's ryu does (serde_json's printer): plain notation
    for decimal exponents in (lo, hi], scientific otherwise (f32: 13/-6, f64: 16/-5)."""
    sign = "-" if sci.startswith("-") else ""
    mant, exp = sci.lstrip("-").split("e")
    digits = mant.replace(".", "").rstrip("0") or "0"
    if digits == "0":
        return sign + "0.0"
    kk = int(exp) + 1                       # value = 0.digits × 10^kk
    n = len(digits)
    if n <= kk <= hi:
        body = digits + "0" * (kk - n) + ".0"
    elif 0 < kk <= hi:
        body = digits[:kk] + "." + digits[kk:]
    elif lo < kk <= 0:
        body = "0." + "0" * (-kk) + digits
    elif n == 1:
        body = f"{digits}e{kk - 1}"
    else:
        body = f"{digits[0]}.{digits[1:]}e{kk - 1}"
    return sign + body


def format_f32(v: float) -> str:
    """Shortest decimal that round-trips through f32, laid out as serde_json prints it."""
    if math.isnan(v) or math.isinf(v):
        return "null"
    return _ryu(np.format_float_scientific(np.float32(v), unique=True, trim="0"), 13, -6)


def format_f64(v: float) -> str:
    """Shortest round-trip f64 decimal, laid out as serde_json prints it (``1.0``, ``1e-7``)."""
    if math.isnan(v) or math.isinf(v):
        return "null"
    return _ryu(np.format_float_scientific(np.float64(v), unique=True, trim="0"), 16, -5)


def dumps(j) -> str:
    """Compact JSON as serde_json prints it (no spaces, non-ASCII kept, f32 shortest)."""
    if j is None:
        return "null"
    if j is True:
        return "true"
    if j is False:
        return "false"
    if isinstance(j, F32Json):
        return format_f32(j)
    if isinstance(j, float):
        return format_f64(j)
    if isinstance(j, int):
        return str(j)
    if isinstance(j, str):
        import json

        return json.dumps(j, ensure_ascii=False)
    if isinstance(j, (list, tuple)):
        return "[" + ",".join(dumps(x) for x in j) + "]"
    if isinstance(j, dict):
        return "{" + ",".join(dumps(str(k)) + ":" + dumps(v) for k, v in j.items()) + "}"
    raise CodecError(f"cannot serialise {type(j).__name__} {j!r}")
