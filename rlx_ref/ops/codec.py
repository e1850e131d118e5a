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

from ._serde_floats import format_f32, format_f64  # noqa: F401  (re-exported)


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

    def problems(self, v, path: str):
        """Yield ``(path, message)`` for each way ``v`` is not a value of this field."""
        return iter(())


def _short(v) -> str:
    """A value for an error message, cut short (a fuzzed payload may be huge)."""
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


class _Int(Codec):
    """An RLX integer type (``u32``, ``i64``, ``usize``...) with its inclusive range."""

    def __init__(self, name: str, lo: int, hi: int):
        self.name, self.lo, self.hi = name, lo, hi
        self.signed = lo < 0

    def range_text(self) -> str:
        return f"{self.name} [{self.lo}, {self.hi}]"

    def from_json(self, j):
        if isinstance(j, bool) or not isinstance(j, int):
            raise CodecError(f"expected an integer ({self.name}), got {_short(j)}")
        if not self.lo <= j <= self.hi:
            raise CodecError(f"{_short(j)} is out of range for {self.range_text()}")
        return j

    def to_json(self, v):
        return int(v)

    def problems(self, v, path):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            yield path, f"{_short(v)} is not an integer ({self.name})"
        elif not self.lo <= int(v) <= self.hi:
            yield path, f"{_short(v)} is out of range for {self.range_text()}"


# serde_json cannot print ±inf or NaN (it writes `null`, which does not read back), so
# non-finite float fields are written as these JSON strings; finite values stay numbers.
NONFINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}
_F32_MAX = float(np.finfo(np.float32).max)


def _as_float(v) -> float:
    """``float(v)``, with ints too large for a double mapped to ±inf instead of raising."""
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def _f32_overflows(v: float) -> bool:
    """True when a finite ``v`` rounds to an f32 infinity (|v| >= 2**128 - 2**103)."""
    with np.errstate(over="ignore"):
        return math.isinf(np.float32(v))


class _Float(Codec):
    def __init__(self, f32: bool):
        self.f32 = f32
        self.name = "f32" if f32 else "f64"

    def from_json(self, j):
        if isinstance(j, str) and j in NONFINITE:
            return NONFINITE[j]
        if isinstance(j, bool) or not isinstance(j, (int, float)):
            raise CodecError(f"expected a number ({self.name}) or one of \"inf\", \"-inf\", "
                             f"\"nan\", got {_short(j)}")
        try:
            v = float(j)
        except OverflowError:
            v = math.inf
        if not math.isfinite(v) or (self.f32 and _f32_overflows(v)):
            # Only the string forms spell a non-finite value; an overflowing literal is a typo.
            raise CodecError(f"{_short(j)} is out of range for {self.name} "
                             f"(write \"inf\" or \"-inf\" for an infinity)")
        return float(np.float32(v)) if self.f32 else v

    def to_json(self, v):
        if isinstance(v, int) and not isinstance(v, bool) and math.isinf(_as_float(v)):
            return v        # an int too big for any float: printed as is, rejected on reading
        v = float(v)
        if not math.isfinite(v):
            return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
        if self.f32 and _f32_overflows(v):
            return v        # printed as is, so the text reads back as the same range error
        return F32Json(v) if self.f32 else v

    def normalize(self, v):
        if isinstance(v, (int, float, np.floating)) and not isinstance(v, bool):
            if math.isnan(_as_float(v)):
                return math.nan     # one NaN object, so equal payloads compare equal
            if not math.isfinite(_as_float(v)) or self.f32 and _f32_overflows(_as_float(v)):
                return float(v)     # left for the verifier to report, not rounded to inf
            return float(np.float32(v)) if self.f32 else float(v)
        return v

    def problems(self, v, path):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)):
            yield path, f"{_short(v)} is not a number ({self.name})"
        elif isinstance(v, int) and not math.isfinite(_as_float(v)):
            yield path, f"{_short(v)} is out of range for {self.name}"
        elif self.f32 and math.isfinite(float(v)) and _f32_overflows(float(v)):
            yield path, f"{_short(v)} is out of range for f32 (largest finite {_F32_MAX:g})"


class F32Json(float):
    """A float printed with the shortest digits that round-trip through f32 (as serde)."""


class _Bool(Codec):
    name = "bool"

    def from_json(self, j):
        if not isinstance(j, bool):
            raise CodecError(f"expected true/false, got {_short(j)}")
        return j

    def problems(self, v, path):
        if not isinstance(v, (bool, np.bool_)):
            yield path, f"{_short(v)} is not a bool"


class _Str(Codec):
    name = "string"

    def from_json(self, j):
        if not isinstance(j, str):
            raise CodecError(f"expected a string, got {_short(j)}")
        return j

    def problems(self, v, path):
        if not isinstance(v, str):
            yield path, f"{_short(v)} is not a string"


class ListOf(Codec):
    def __init__(self, item: Codec):
        self.item = item
        self.name = f"[{item.describe()}]"

    def from_json(self, j):
        if not isinstance(j, list):
            raise CodecError(f"expected a list of {self.item.describe()}, got {_short(j)}")
        return tuple(self.item.from_json(x) for x in j)

    def problems(self, v, path):
        if not isinstance(v, (list, tuple)):
            yield path, f"{_short(v)} is not a list of {self.item.describe()}"
            return
        for i, x in enumerate(v):
            yield from self.item.problems(x, f"{path}[{i}]")

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
            raise CodecError(
                f"expected a {len(self.items)}-element list {self.name}, got {_short(j)}")
        return tuple(c.from_json(x) for c, x in zip(self.items, j))

    def problems(self, v, path):
        if not isinstance(v, (list, tuple)) or len(v) != len(self.items):
            yield path, f"{_short(v)} is not a {len(self.items)}-element {self.name}"
            return
        for i, (c, x) in enumerate(zip(self.items, v)):
            yield from c.problems(x, f"{path}[{i}]")

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

    def problems(self, v, path):
        return iter(()) if v is None else self.item.problems(v, path)


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
        close = ""
        if isinstance(j, str):
            from ..ir.pyrlx_names import did_you_mean

            close = did_you_mean(j, self.variants)
        raise CodecError(f"expected a {self.name} ({', '.join(self.variants)}), got "
                         f"{_short(j)}{close}")

    def to_json(self, v):
        if isinstance(v, str):
            if v not in self.units:
                raise CodecError(f"{_short(v)} is not a {self.name} ({', '.join(self.variants)})")
            return v
        tag, val = v
        return {tag: self.data[tag].to_json(val)}

    def problems(self, v, path):
        if isinstance(v, str) and v in self.units:
            return
        if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str) and v[0] in self.data:
            yield from self.data[v[0]].problems(v[1], f"{path}.{v[0]}")
            return
        yield path, f"{_short(v)} is not a {self.name} ({', '.join(self.variants)})"


class _DType(Codec):
    name = "DType"

    def from_json(self, j):
        from ..ir.dtype import DType

        try:
            return DType(j)
        except ValueError:
            raise CodecError(f"expected a DType name such as \"F32\", got {_short(j)}") from None

    def to_json(self, v):
        return v.value

    def problems(self, v, path):
        from ..ir.dtype import DType

        if not isinstance(v, DType):
            yield path, f"{_short(v)} is not a DType"


class _Graph(Codec):
    name = "Graph"

    def from_json(self, j):
        from ..ir.text import graph_from_json

        return graph_from_json(j)

    def to_json(self, v):
        from ..ir.text import graph_to_json

        return graph_to_json(v)

    def problems(self, v, path):
        from ..ir.graph import Graph

        if not isinstance(v, Graph):
            yield path, f"{_short(v)} is not a Graph"


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

    def problems(self, v, path):
        if not isinstance(v, (bytes, bytearray)):
            yield path, f"{_short(v)} is not bytes"


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


# RLX's integer payload types. usize is RLX's on its 64-bit targets.
U8 = _Int("u8", 0, 2**8 - 1)
U32 = _Int("u32", 0, 2**32 - 1)
I32 = _Int("i32", -2**31, 2**31 - 1)
I64 = _Int("i64", -2**63, 2**63 - 1)
USIZE = _Int("usize", 0, 2**64 - 1)
INT = I64
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


def payload_problems(attrs):
    """``field F = V is ...`` for every payload value outside its field's RLX type."""
    if attrs is None or not dataclasses.is_dataclass(attrs):
        return []
    out = []
    for f in dataclasses.fields(attrs):
        codec = f.metadata.get("codec")
        if codec is not None:
            for path, msg in codec.problems(getattr(attrs, f.name), f.name):
                out.append(f"field {path} = {msg}")
    return out


def fields_of(attrs_cls) -> list:
    return list(dataclasses.fields(attrs_cls))


def attrs_to_json(attrs) -> dict:
    """Struct payload → JSON object, fields in declaration order."""
    return {f.name: f.metadata["codec"].to_json(getattr(attrs, f.name)) for f in fields_of(attrs)}


def attrs_from_json(attrs_cls, j, kind: str):
    """JSON object → attrs instance; unknown or missing (non-defaulted) fields are errors."""
    if not isinstance(j, dict):
        raise CodecError(f"{kind} payload must be a JSON object, got {_short(j)}")
    fields = {f.name: f for f in fields_of(attrs_cls)}
    unknown = [k for k in j if k not in fields]
    if unknown:
        raise CodecError(
            f"{kind} has no field {_short(unknown[0])}; its fields are: {', '.join(fields)}"
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
    try:
        return attrs_cls(**kwargs)
    except (TypeError, ValueError) as e:
        raise CodecError(f"{kind}: {e}") from None


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
