"""RLX's ``QuantScheme`` as a payload field, and what the quant ops need to know about it.

serde writes a unit variant bare (``"GgufQ4K"``) and a struct variant as an object
(``{"Int8Block":{"block_size":32}}``). The Python value is the variant name, or
``(name, (("field", value), ...))``; a dict of fields is accepted and normalized.
Variants as RLX's ``rlx-ir/src/quant.rs`` declares them (its newest enum also has
``GgufG8_0`` and ``GgufPtq1_0``, listed by RLX's exhaustive packed-linear classifier).
"""
from __future__ import annotations

from .codec import U8, U32, Codec, CodecError, Enum, _short
from .opdef import OpError

# GGUF block formats: scales live inside the packed bytes; DequantMatMul takes (x, packed).
GGUF = (
    "GgufQ4K", "GgufQ5K", "GgufQ6K", "GgufQ8K", "GgufQ2K", "GgufQ3K", "GgufQ4_0", "GgufQ4_1",
    "GgufQ5_0", "GgufQ5_1", "GgufQ8_0", "GgufIQ4NL", "GgufIQ4XS", "GgufIQ2XXS", "GgufIQ2XS",
    "GgufIQ2S", "GgufIQ3XXS", "GgufIQ3S", "GgufIQ1S", "GgufIQ1M", "GgufTQ1_0", "GgufTQ2_0",
    "GgufMXFP4", "GgufNVFP4", "GgufQ1_0", "GgufQ2_0", "GgufFV5", "GgufFV5B", "GgufG8_0",
    "GgufPtq1_0",
)


class StructOf(Codec):
    """A struct variant's fields (``{"block_size":32}``), held as ``(("block_size", 32),)``.

    A dict of the fields normalizes to that tuple (fields in declaration order).
    """

    def __init__(self, **fields: Codec):
        self.fields = dict(fields)
        self.name = "{" + ", ".join(f"{k}: {c.describe()}" for k, c in fields.items()) + "}"

    def from_json(self, j):
        if not isinstance(j, dict) or set(j) != set(self.fields):
            raise CodecError(f"expected an object {self.name}, got {_short(j)}")
        return tuple((k, c.from_json(j[k])) for k, c in self.fields.items())

    def to_json(self, v):
        return {k: self.fields[k].to_json(x) for k, x in dict(v).items()}

    def normalize(self, v):
        if isinstance(v, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in v):
            v = dict(v)
        if not isinstance(v, dict) or set(v) != set(self.fields):
            return v
        return tuple((k, c.normalize(v[k])) for k, c in self.fields.items())

    def problems(self, v, path):
        pairs = v if isinstance(v, tuple) else ()
        names = [p[0] if isinstance(p, tuple) and len(p) == 2 else None for p in pairs]
        if not isinstance(v, tuple) or names != list(self.fields):
            yield path, f"{_short(v)} is not {self.name}"
            return
        for k, x in v:
            yield from self.fields[k].problems(x, f"{path}.{k}")


class _VariantEnum(Enum):
    """An Enum whose struct-variant values normalize through their StructOf."""

    def normalize(self, v):
        if isinstance(v, tuple) and len(v) == 2 and v[0] in self.data:
            return (v[0], self.data[v[0]].normalize(v[1]))
        return v


_BLOCK = StructOf(block_size=U32)
_GROUP = StructOf(group_size=U32)
QUANT_SCHEME = _VariantEnum(
    "QuantScheme",
    units=("Fp8E4m3", "Fp8E5m2") + GGUF[:16] + ("Nvfp4Block",) + GGUF[16:],
    data={"Int8Block": _BLOCK, "Int8BlockAsym": _BLOCK, "Int4Block": _BLOCK,
          "MlxAffine": StructOf(bits=U8, group_size=U32), "MlxMxfp4": _GROUP,
          "MlxMxfp8": _GROUP, "MxFp4x2Block": _GROUP},
)


def name_of(scheme) -> str:
    """The variant name (``"GgufQ4K"``, ``"Int8Block"``)."""
    return scheme if isinstance(scheme, str) else scheme[0]


def field(scheme, key: str) -> int:
    """A struct variant's field (``block_size``, ``bits``, ``group_size``)."""
    return dict(scheme[1])[key]


def text(scheme) -> str:
    """For messages: ``GgufQ4K`` or ``Int8Block{block_size=32}``."""
    if isinstance(scheme, str):
        return scheme
    return scheme[0] + "{" + ", ".join(f"{k}={v}" for k, v in scheme[1]) + "}"


def is_gguf(scheme) -> bool:
    return name_of(scheme) in GGUF


def gguf_def(scheme, cid: str):
    """The SchemeDef that decodes a GGUF variant; OpError naming it when none does."""
    from ..quant import QuantError, all_schemes, get_scheme

    name = name_of(scheme)
    try:
        sd = get_scheme(name)
    except QuantError:
        sd = None
    if sd is None or sd.kind != "gguf" or sd.rlx != name:
        have = sorted(s.rlx for s in all_schemes() if s.kind == "gguf" and s.rlx)
        raise OpError(f"({cid}) rlx_ref cannot decode the GGUF scheme {name}: no quant "
                      f"scheme maps to it (decodable: {', '.join(have) or 'none'})")
    return sd


class SchemeAttrsMixin:
    """Normalizes ``scheme`` on construction (a dict of fields becomes the tuple form)."""

    def __post_init__(self):
        object.__setattr__(self, "scheme", QUANT_SCHEME.normalize(self.scheme))


def scale_block(scheme, k: int) -> int:
    """Elements along K sharing one scale of a 4-operand linear scheme (FP8: all of K)."""
    from ..quant.linear import LINEAR

    fixed = LINEAR[name_of(scheme)].block
    if fixed == 0:
        return max(k, 1)
    return fixed if fixed is not None else field(scheme, "block_size")
