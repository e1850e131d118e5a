"""Write GGUF version 3 files, atomically, one tensor at a time.

``write_gguf(path, {name: array or QuantizedTensor}, architecture=...)`` lays out the
header, the key/values, the tensor infos and the aligned data section; tensors are
streamed to the file, so the converter can quantize each one just before it is written.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._atomic import atomic_open
from .gguf_format import (DEFAULT_ALIGNMENT, MAGIC, MAX_DIMS, WRITE_VERSION, GGMLType,
                          GGUFError, QuantizedTensor, align_up, ggml_type)
from .gguf_values import encode_key, encode_value

_NUMPY_TYPES = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16",
                np.dtype(np.float64): "F64", np.dtype(np.int8): "I8",
                np.dtype(np.int16): "I16", np.dtype(np.int32): "I32",
                np.dtype(np.int64): "I64"}


@dataclass
class TensorEntry:
    """One tensor to write: GGUF-order dims, its type, and a function giving its bytes
    (called once, when the tensor's turn comes)."""

    name: str
    dims: tuple[int, ...]
    type: GGMLType
    produce: Callable[[], np.ndarray]

    @property
    def n_bytes(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return self.type.n_bytes(n)


def _ggml_name(arr: np.ndarray, what: str) -> str:
    if arr.dtype.name == "bfloat16":
        return "BF16"
    name = _NUMPY_TYPES.get(arr.dtype.newbyteorder("="))
    if name is None:
        raise GGUFError(f"{what}: dtype {arr.dtype} has no GGML type (use float32, "
                        "float16, bfloat16, float64, int8, int16, int32 or int64)")
    return name


def _little_endian_bytes(arr: np.ndarray) -> np.ndarray:
    """The array's elements as little-endian bytes, in row-major order."""
    if arr.dtype.name == "bfloat16":
        arr = arr.view(np.uint16)
    arr = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
    return arr.reshape(-1).view(np.uint8)


def tensor_entry(name, tensor) -> TensorEntry:
    """The entry for one ``write_gguf`` tensor: an array or a ``QuantizedTensor``."""
    if not isinstance(name, str) or not name:
        raise GGUFError(f"tensor name {name!r} must be a non-empty string")
    what = f"tensor {name!r}"
    if isinstance(tensor, QuantizedTensor):
        data = tensor.data
        return TensorEntry(name, tuple(reversed(tensor.shape)), ggml_type(tensor.ggml_type),
                           lambda: data)
    if not isinstance(tensor, (np.ndarray, np.generic)):
        raise GGUFError(f"{what}: expected a numpy array or a QuantizedTensor, got "
                        f"{type(tensor).__name__}")
    arr = np.asarray(tensor)
    if arr.ndim > MAX_DIMS:
        raise GGUFError(f"{what}: {arr.ndim} dims exceed GGUF's maximum of {MAX_DIMS}")
    t = ggml_type(_ggml_name(arr, what))
    return TensorEntry(name, tuple(reversed(arr.shape)), t,
                       lambda: _little_endian_bytes(arr))


def check_alignment(alignment) -> int:
    if (not isinstance(alignment, (int, np.integer)) or isinstance(alignment, bool)
            or alignment <= 0 or alignment & (alignment - 1) or alignment >= 1 << 32):
        raise GGUFError(f"alignment {alignment!r} must be a power of two below 2**32")
    return int(alignment)


def metadata_bytes(architecture, metadata, alignment: int) -> list[bytes]:
    """The encoded key/value pairs: general.architecture first, then general.alignment
    (when not the default, or when given), then ``metadata`` in its order."""
    if not isinstance(architecture, str) or not architecture:
        raise GGUFError(f"architecture {architecture!r} must be a non-empty string")
    meta = dict(metadata or {})
    for key, want in (("general.architecture", architecture),
                      ("general.alignment", alignment)):
        if key in meta:
            got = meta.pop(key)
            got = got[0] if isinstance(got, tuple) and len(got) == 2 else got
            if not np.array_equal(got, want):
                raise GGUFError(f"metadata {key!r} = {got!r} contradicts the argument "
                                f"{want!r}")
    out = [encode_key("general.architecture")
           + encode_value(architecture, "key 'general.architecture'")]
    if alignment != DEFAULT_ALIGNMENT or "general.alignment" in (metadata or {}):
        out.append(encode_key("general.alignment")
                   + encode_value((alignment, "UINT32"), "key 'general.alignment'"))
    for key, value in meta.items():
        out.append(encode_key(key) + encode_value(value, f"key {key!r}"))
    return out


def _tensor_info(e: TensorEntry, offset: int) -> bytes:
    raw = e.name.encode("utf-8")
    return (struct.pack("<Q", len(raw)) + raw + struct.pack("<I", len(e.dims))
            + struct.pack(f"<{len(e.dims)}Q", *e.dims) + struct.pack("<IQ", e.type.id, offset))


def write_entries(path, kv: list[bytes], entries: list[TensorEntry], alignment: int) -> None:
    """Write a whole GGUF v3 file from encoded key/values and tensor entries."""
    names = set()
    for e in entries:
        if e.name in names:
            raise GGUFError(f"duplicate tensor name {e.name!r}")
        names.add(e.name)
        if e.dims and e.dims[0] % e.type.block_size:
            raise GGUFError(f"tensor {e.name!r}: row length {e.dims[0]} is not a multiple "
                            f"of {e.type.name}'s block size {e.type.block_size}")
    head = [MAGIC, struct.pack("<IQQ", WRITE_VERSION, len(entries), len(kv)), *kv]
    offset = 0
    for e in entries:
        head.append(_tensor_info(e, offset))
        offset = align_up(offset + e.n_bytes, alignment)
    head = b"".join(head)
    with atomic_open(path) as f:
        f.write(head)
        f.write(bytes(align_up(len(head), alignment) - len(head)))
        for e in entries:
            data = e.produce()
            if data.nbytes != e.n_bytes:
                raise GGUFError(f"tensor {e.name!r}: produced {data.nbytes} bytes, its "
                                f"{e.type.name} dims {list(e.dims)} need {e.n_bytes}")
            f.write(memoryview(np.ascontiguousarray(data).reshape(-1).view(np.uint8)))
            f.write(bytes(align_up(e.n_bytes, alignment) - e.n_bytes))


def write_gguf(path, tensors: dict, *, architecture: str, metadata: dict | None = None,
               alignment: int = DEFAULT_ALIGNMENT) -> None:
    """Write ``tensors`` (name -> numpy array or ``QuantizedTensor``) as a GGUF v3 file.

    Arrays keep their dtype (float32, float16, bfloat16, float64, int8/16/32/64) and
    shape (numpy order; GGUF's ``ne0`` is the last axis). ``metadata`` values are typed
    as ``gguf_values`` describes. The file appears whole or not at all.
    """
    alignment = check_alignment(alignment)
    if not isinstance(tensors, dict):
        raise GGUFError(f"tensors must be a dict of name -> array, got "
                        f"{type(tensors).__name__}")
    kv = metadata_bytes(architecture, metadata, alignment)
    write_entries(path, kv, [tensor_entry(n, t) for n, t in tensors.items()], alignment)


__all__ = ["write_gguf", "QuantizedTensor", "TensorEntry", "write_entries",
           "metadata_bytes", "tensor_entry", "check_alignment"]
