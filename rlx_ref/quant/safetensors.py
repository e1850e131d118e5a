"""A small, strict safetensors reader and an atomic writer (the converter's input format).

The format: a u64 little-endian header length N, N bytes of JSON (``{name: {"dtype",
"shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}``, offsets from the
end of the header), then the raw little-endian tensor bytes. The header is checked
against the file before any tensor is read: lengths, offsets, dtypes, shapes and sizes.
"""
from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import numpy as np

from .._atomic import atomic_open
from .scheme import QuantError

MAX_HEADER = 100_000_000         # the reference implementation's limit on the JSON header


class SafetensorsError(QuantError):
    """A safetensors file that cannot be used; the message names the file and field."""


def _ml(name: str):
    import ml_dtypes

    return np.dtype(getattr(ml_dtypes, name))


_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4",
           "I16": "<i2", "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1",
           "BOOL": "?", "BF16": "bfloat16", "F8_E4M3": "float8_e4m3fn",
           "F8_E5M2": "float8_e5m2"}
_ML_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2")


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of a safetensors dtype name (``"BF16"`` needs ml_dtypes)."""
    spec = _DTYPES[name]
    return _ml(spec) if spec in _ML_DTYPES else np.dtype(spec)


def dtype_name(dtype: np.dtype) -> str:
    for name in _DTYPES:
        if numpy_dtype(name) == dtype.newbyteorder("<") or numpy_dtype(name) == dtype:
            return name
    raise SafetensorsError(f"dtype {dtype} has no safetensors name (expected one of "
                           f"{', '.join(_DTYPES)})")


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise SafetensorsError(f"duplicate header key {k!r}")
        out[k] = v
    return out


def _is_uint(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


class SafetensorsFile:
    """An open safetensors file: ``names()``, ``dtype(name)``, ``shape(name)``,
    ``tensor(name)`` (a read-only view of the mapping), ``metadata``."""

    def __init__(self, path):
        self.path = Path(path)
        size = os.path.getsize(self.path)
        if size < 8:
            self._fail(f"truncated file: {size} bytes, the header length alone takes 8")
        self._mm = np.memmap(self.path, dtype=np.uint8, mode="r")
        size = self._mm.size
        (n,) = struct.unpack_from("<Q", self._mm, 0)
        if n > MAX_HEADER:
            self._fail(f"header length {n} exceeds the limit of {MAX_HEADER} bytes")
        if n > size - 8:
            self._fail(f"header length {n} runs past the end of the file ({size - 8} bytes "
                       "after the length)")
        try:
            header = json.loads(bytes(self._mm[8:8 + n]).decode("utf-8"),
                                object_pairs_hook=_no_duplicates)
        except SafetensorsError as e:
            self._fail(str(e))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
            self._fail(f"header is not valid JSON: {str(e).splitlines()[0]}")
        if not isinstance(header, dict):
            self._fail(f"header is a JSON {type(header).__name__}, expected an object")
        self.data_start, self.data_len = 8 + n, size - 8 - n
        meta = header.pop("__metadata__", {})
        if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
            self._fail("'__metadata__' must be an object of strings")
        self.metadata = meta
        self._tensors = {name: self._entry(name, e) for name, e in header.items()}
        spans = sorted((b, e, name) for name, (_, _, b, e) in self._tensors.items() if e > b)
        for (_, end, a), (start, _, b) in zip(spans, spans[1:]):
            if start < end:
                self._fail(f"tensor {b!r} (bytes {start}..) overlaps tensor {a!r} "
                           f"(..{end})")

    def _fail(self, what: str):
        self._mm = None
        raise SafetensorsError(f"{self.path}: {what}")

    def _entry(self, name: str, e) -> tuple:
        what = f"tensor {name!r}"
        if not isinstance(e, dict) or set(e) != {"dtype", "shape", "data_offsets"}:
            self._fail(f"{what}: expected an object with dtype, shape and data_offsets")
        if e["dtype"] not in _DTYPES:
            self._fail(f"{what}: unknown dtype {e['dtype']!r}")
        shape, offs = e["shape"], e["data_offsets"]
        if not isinstance(shape, list) or not all(_is_uint(d) for d in shape):
            self._fail(f"{what}: shape {shape!r} must be a list of non-negative integers")
        if (not isinstance(offs, list) or len(offs) != 2 or not all(map(_is_uint, offs))
                or offs[0] > offs[1]):
            self._fail(f"{what}: data_offsets {offs!r} must be [begin, end] with "
                       "0 <= begin <= end")
        if offs[1] > self.data_len:
            self._fail(f"{what}: data_offsets end {offs[1]} is past the end of the data "
                       f"({self.data_len} bytes)")
        dtype = numpy_dtype(e["dtype"])
        n = 1
        for d in shape:
            n *= d
        if n * dtype.itemsize != offs[1] - offs[0]:
            self._fail(f"{what}: {e['dtype']} {shape} takes {n * dtype.itemsize} bytes but "
                       f"data_offsets {offs} hold {offs[1] - offs[0]}")
        return e["dtype"], tuple(shape), offs[0], offs[1]

    def names(self) -> list[str]:
        return list(self._tensors)

    def _get(self, name: str) -> tuple:
        if name not in self._tensors:
            raise SafetensorsError(f"{self.path}: no tensor {name!r}")
        return self._tensors[name]

    def dtype(self, name: str) -> str:
        return self._get(name)[0]

    def shape(self, name: str) -> tuple[int, ...]:
        return self._get(name)[1]

    def n_bytes(self, name: str) -> int:
        _, _, b, e = self._get(name)
        return e - b

    def tensor(self, name: str) -> np.ndarray:
        dt, shape, b, e = self._get(name)
        if self._mm is None:
            raise SafetensorsError(f"{self.path}: the file is closed")
        raw = np.asarray(self._mm[self.data_start + b:self.data_start + e])
        return raw.view(numpy_dtype(dt)).reshape(shape)

    def close(self) -> None:
        self._mm = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def load_safetensors(path) -> SafetensorsFile:
    """Open a safetensors file, validating its header; see ``SafetensorsFile``."""
    return SafetensorsFile(path)


def save_safetensors(path, tensors: dict, metadata: dict | None = None) -> None:
    """Write ``tensors`` (name -> numpy array) as a safetensors file, atomically."""
    header, arrays, offset = {}, [], 0
    if metadata:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise SafetensorsError("safetensors metadata must map str to str")
        header["__metadata__"] = dict(metadata)
    for name, arr in tensors.items():
        if not isinstance(name, str) or name == "__metadata__":
            raise SafetensorsError(f"tensor name {name!r} must be a string other than "
                                   "'__metadata__'")
        arr = np.asarray(arr)
        dt = dtype_name(arr.dtype)
        raw = np.ascontiguousarray(arr, dtype=numpy_dtype(dt)).reshape(-1).view(np.uint8)
        header[name] = {"dtype": dt, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + raw.size]}
        arrays.append(raw)
        offset += raw.size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)          # keeps the data 8-byte aligned
    with atomic_open(path) as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for raw in arrays:
            f.write(memoryview(raw))


__all__ = ["SafetensorsError", "SafetensorsFile", "load_safetensors", "save_safetensors"]
