"""Payload enums of the fake-quantization kinds: RLX's ``SteKind`` and ``ScaleMode``.

``ScaleMode`` has a struct variant, ``EMA { decay: f32 }``, which serde writes as
``{"EMA":{"decay":0.99}}`` (unit variants are plain strings: ``"PerBatch"``, ``"Fixed"``).
In Python a struct variant's value is ``(tag, fields)``, the fields a frozen dataclass
declared with ``attr`` as any payload: ``("EMA", EMA(decay=0.99))``; ``ema(0.99)`` builds it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .codec import (F32, Codec, CodecError, Enum, _Int, attr, attrs_from_json,
                    attrs_to_json, normalize_attrs)

U8 = _Int("u8", 0, 255)         # RLX's `bits: u8`

STE_KINDS = ("Identity", "ClippedIdentity", "Tanh", "HardTanh")
STE = Enum("SteKind", units=STE_KINDS)


class StructOf(Codec):
    """The fields of an enum's struct variant, held as a frozen dataclass ``cls``."""

    def __init__(self, cls):
        self.cls = cls
        inner = ", ".join(f"{f.name}: {f.metadata['codec'].describe()}"
                          for f in dataclasses.fields(cls))
        self.name = f"{cls.__name__} {{{inner}}}"

    def from_json(self, j):
        if not isinstance(j, dict):
            raise CodecError(f"expected an object {self.name}, got {str(j)[:40]}")
        return attrs_from_json(self.cls, j, self.cls.__name__)

    def to_json(self, v):
        return attrs_to_json(v)

    def normalize(self, v):
        return normalize_attrs(v) if isinstance(v, self.cls) else v

    def problems(self, v, path):
        if not isinstance(v, self.cls):
            yield path, f"{str(v)[:40]} is not a {self.name}"
            return
        for f in dataclasses.fields(self.cls):
            yield from f.metadata["codec"].problems(getattr(v, f.name), f"{path}.{f.name}")


@dataclass(frozen=True)
class EMA:
    """The fields of ``ScaleMode::EMA``."""

    decay: float = attr(F32, doc="weight of the running scale: s' = decay·s + (1-decay)·cur")

    def __post_init__(self):
        # stored as RLX stores it (f32), so a payload equals its text round trip
        object.__setattr__(self, "decay", F32.normalize(self.decay))


SCALE_MODE = Enum("ScaleMode", units=("PerBatch", "Fixed"), data={"EMA": StructOf(EMA)})


def ema(decay: float) -> tuple:
    """``ScaleMode::EMA { decay }`` as a payload value."""
    return ("EMA", EMA(decay))


def mode_tag(mode) -> str:
    """``PerBatch``, ``EMA`` or ``Fixed``."""
    return mode if isinstance(mode, str) else mode[0]


def needs_state(mode) -> bool:
    """EMA and Fixed read a per-channel scale state as a second operand (RLX's num_inputs)."""
    return mode_tag(mode) in ("EMA", "Fixed")
