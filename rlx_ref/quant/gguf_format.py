"""GGUF format constants: value types, GGML tensor types, and the records both sides share.

A GGUF file is: magic ``GGUF``, a u32 version, the tensor and key/value counts (u32 in
version 1, u64 from version 2), the key/value pairs, the tensor infos (name, dims in GGML
order ``ne0`` first, GGML type, offset into the data section), padding to the alignment,
then the data section. Everything is little-endian. The type ids and block sizes below
are the format's constants, as ggml defines them (``ggml.h`` / ``ggml-common.h``).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from .scheme import QuantError

MAGIC = b"GGUF"
VERSIONS = (1, 2, 3)
WRITE_VERSION = 3
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4                      # GGML_MAX_DIMS
MAX_INT64 = (1 << 63) - 1


class GGUFError(QuantError):
    """A GGUF (or safetensors) file or request that cannot be used; names the field."""


class ValueType(enum.IntEnum):
    """The type tag of a metadata value."""

    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


# Scalar value types and their little-endian numpy dtypes (BOOL is one byte, 0 or 1).
SCALAR_DTYPES = {
    ValueType.UINT8: np.dtype("<u1"), ValueType.INT8: np.dtype("<i1"),
    ValueType.UINT16: np.dtype("<u2"), ValueType.INT16: np.dtype("<i2"),
    ValueType.UINT32: np.dtype("<u4"), ValueType.INT32: np.dtype("<i4"),
    ValueType.UINT64: np.dtype("<u8"), ValueType.INT64: np.dtype("<i8"),
    ValueType.FLOAT32: np.dtype("<f4"), ValueType.FLOAT64: np.dtype("<f8"),
    ValueType.BOOL: np.dtype("u1"),
}


def value_type(key) -> ValueType:
    """A value type by enum, id or name (``"UINT32"``, ``"u32"``, ``"f32"``, ``"str"``)."""
    if isinstance(key, ValueType):
        return key
    if isinstance(key, str):
        k = key.strip().upper()
        k = _SHORT_NAMES.get(k, k)
        if k in ValueType.__members__:
            return ValueType[k]
    elif isinstance(key, int) and not isinstance(key, bool):
        if key in ValueType._value2member_map_:
            return ValueType(key)
    raise GGUFError(f"unknown GGUF value type {key!r}; expected one of "
                    f"{', '.join(ValueType.__members__)}")


_SHORT_NAMES = {"U8": "UINT8", "I8": "INT8", "U16": "UINT16", "I16": "INT16",
                "U32": "UINT32", "I32": "INT32", "U64": "UINT64", "I64": "INT64",
                "F32": "FLOAT32", "F64": "FLOAT64", "STR": "STRING"}


@dataclass(frozen=True)
class GGMLType:
    """One GGML tensor type: ``block_size`` elements take ``type_size`` bytes."""

    id: int
    name: str
    block_size: int
    type_size: int
    dtype: str | None = None       # numpy dtype of plain types (None: a block format)

    def n_bytes(self, n_elements: int) -> int:
        return n_elements // self.block_size * self.type_size


_TYPES = [
    GGMLType(0, "F32", 1, 4, "<f4"), GGMLType(1, "F16", 1, 2, "<f2"),
    GGMLType(2, "Q4_0", 32, 18), GGMLType(3, "Q4_1", 32, 20),
    GGMLType(6, "Q5_0", 32, 22), GGMLType(7, "Q5_1", 32, 24),
    GGMLType(8, "Q8_0", 32, 34), GGMLType(9, "Q8_1", 32, 36),
    GGMLType(10, "Q2_K", 256, 84), GGMLType(11, "Q3_K", 256, 110),
    GGMLType(12, "Q4_K", 256, 144), GGMLType(13, "Q5_K", 256, 176),
    GGMLType(14, "Q6_K", 256, 210), GGMLType(15, "Q8_K", 256, 292),
    GGMLType(16, "IQ2_XXS", 256, 66), GGMLType(17, "IQ2_XS", 256, 74),
    GGMLType(18, "IQ3_XXS", 256, 98), GGMLType(19, "IQ1_S", 256, 50),
    GGMLType(20, "IQ4_NL", 32, 18), GGMLType(21, "IQ3_S", 256, 110),
    GGMLType(22, "IQ2_S", 256, 82), GGMLType(23, "IQ4_XS", 256, 136),
    GGMLType(24, "I8", 1, 1, "<i1"), GGMLType(25, "I16", 1, 2, "<i2"),
    GGMLType(26, "I32", 1, 4, "<i4"), GGMLType(27, "I64", 1, 8, "<i8"),
    GGMLType(28, "F64", 1, 8, "<f8"), GGMLType(29, "IQ1_M", 256, 56),
    GGMLType(30, "BF16", 1, 2, None), GGMLType(34, "TQ1_0", 256, 54),
    GGMLType(35, "TQ2_0", 256, 66), GGMLType(39, "MXFP4", 32, 17),
    GGMLType(40, "NVFP4", 64, 36), GGMLType(41, "Q1_0", 128, 18),
]
GGML_TYPES: dict[int, GGMLType] = {t.id: t for t in _TYPES}
_BY_NAME = {t.name: t for t in _TYPES}
PLAIN_TYPES = ("F32", "F16", "BF16", "F64", "I8", "I16", "I32", "I64")

# Ids ggml once used and has since removed from files (a file holding one is refused).
_REMOVED = {4: "Q4_2", 5: "Q4_3", 31: "Q4_0_4_4", 32: "Q4_0_4_8", 33: "Q4_0_8_8",
            36: "IQ4_NL_4_4", 37: "IQ4_NL_4_8", 38: "IQ4_NL_8_8"}


def ggml_type(key) -> GGMLType:
    """A GGML type by id (12) or name (``"Q4_K"``); GGUFError naming the key otherwise."""
    if isinstance(key, GGMLType):
        return key
    if isinstance(key, str) and key.upper() in _BY_NAME:
        return _BY_NAME[key.upper()]
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        if int(key) in GGML_TYPES:
            return GGML_TYPES[int(key)]
        if int(key) in _REMOVED:
            raise GGUFError(f"ggml type {int(key)} ({_REMOVED[int(key)]}) was removed from "
                            "the GGUF format and is not supported")
        raise GGUFError(f"unknown ggml type {int(key)}")
    raise GGUFError(f"unknown ggml type {key!r}; expected one of {', '.join(_BY_NAME)}")


def is_plain(t: GGMLType) -> bool:
    return t.name in PLAIN_TYPES


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a GGUF file.

    dims: GGUF order (``ne0``, the contiguous axis, first); shape: numpy row-major order
    (``dims`` reversed). offset: from the start of the data section; file_offset: from the
    start of the file.
    """

    name: str
    dims: tuple[int, ...]
    shape: tuple[int, ...]
    ggml_type: str
    type_id: int
    offset: int
    file_offset: int
    n_elements: int
    n_bytes: int


@dataclass(frozen=True)
class QuantizedTensor:
    """Packed GGML blocks to write as one tensor: ``data`` uint8 bytes, ``shape`` in
    numpy row-major order (its last axis is GGUF's ``ne0``), ``ggml_type`` e.g. ``"Q4_K"``.
    """

    data: np.ndarray
    shape: tuple[int, ...]
    ggml_type: str

    def __post_init__(self):
        t = ggml_type(self.ggml_type)
        shape = tuple(int(d) for d in self.shape)
        if any(d < 0 for d in shape) or not 1 <= len(shape) <= MAX_DIMS:
            raise GGUFError(f"QuantizedTensor shape {list(shape)} must have 1 to "
                            f"{MAX_DIMS} non-negative dims")
        if shape[-1] % t.block_size:
            raise GGUFError(f"QuantizedTensor shape {list(shape)}: the last axis must be a "
                            f"multiple of {t.name}'s block size {t.block_size}")
        raw = np.asarray(self.data)
        if raw.dtype != np.uint8:
            raise GGUFError(f"QuantizedTensor data must be uint8 bytes, got {raw.dtype}")
        n = int(np.prod(shape, dtype=object))
        if raw.size != t.n_bytes(n):
            raise GGUFError(f"QuantizedTensor {t.name} {list(shape)}: expected "
                            f"{t.n_bytes(n)} bytes, got {raw.size}")
        object.__setattr__(self, "data", raw.reshape(-1))
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "ggml_type", t.name)


def align_up(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment
