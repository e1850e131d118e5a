"""Read GGUF files (versions 1 to 3): memory-mapped, validated before any tensor is read.

``load_gguf(path)`` parses and checks the whole header (``gguf_header``); tensor bytes
are then views of the read-only mapping, so a multi-gigabyte model costs no reads until
a tensor is used.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .gguf_format import GGUFError, TensorInfo, ValueType, ggml_type, is_plain
from .gguf_header import parse_header
from .scheme import QuantError


def _bf16_to_f32(raw: np.ndarray) -> np.ndarray:
    """bfloat16 is the top half of a float32: widen the bits, no rounding involved."""
    return (raw.view("<u2").astype(np.uint32) << 16).view(np.float32)


class GGUFReader:
    """An open GGUF file. Use ``load_gguf(path)``; close it (or use ``with``) when done.

    Arrays it returns stay valid after ``close()``: they keep the mapping alive.
    """

    def __init__(self, path):
        self.path = Path(path)
        try:
            size = os.path.getsize(self.path)
        except OSError as e:
            raise type(e)(e.errno, e.strerror, str(self.path)) from None
        if size == 0:
            raise GGUFError(f"{self.path}: truncated file: empty (expected a GGUF header)")
        self._mm = np.memmap(self.path, dtype=np.uint8, mode="r")
        size = self._mm.size            # what is mapped, should the file have changed
        try:
            self._h = parse_header(self._mm, size)
        except GGUFError as e:
            self._mm = None
            raise GGUFError(f"{self.path}: {e}") from None
        self.size = size

    # -- the header ---------------------------------------------------------------
    @property
    def version(self) -> int:
        return self._h.version

    @property
    def alignment(self) -> int:
        return self._h.alignment

    @property
    def data_offset(self) -> int:
        """Where the data section starts in the file."""
        return self._h.data_start

    @property
    def architecture(self) -> str | None:
        """``general.architecture``, or None where the file has none."""
        kv = self._h.kv.get("general.architecture")
        return None if kv is None else kv[1]

    def metadata(self, typed: bool = False) -> dict:
        """Every key/value pair, arrays as lists. ``typed``: each value as a (value,
        type name) pair (an array's pair names its item type), which ``write_gguf``
        takes back unchanged."""
        out = {}
        for key, (vt, value, item) in self._h.kv.items():
            if isinstance(value, np.ndarray):
                value = value.tolist()
            elif isinstance(value, list):
                value = list(value)
            out[key] = (value, (vt if item is None else item).name) if typed else value
        return out

    def value_type(self, key: str) -> tuple[str, str | None]:
        """The type of ``key``'s value and, for an array, its item type."""
        if key not in self._h.kv:
            raise GGUFError(f"{self.path}: no key {key!r}")
        vt, _, item = self._h.kv[key]
        return vt.name, item.name if item is not None else None

    # -- tensors ------------------------------------------------------------------
    def tensor_names(self) -> list[str]:
        return list(self._h.tensors)

    def tensor_infos(self) -> list[TensorInfo]:
        return list(self._h.tensors.values())

    def tensor_info(self, name: str) -> TensorInfo:
        try:
            return self._h.tensors[name]
        except KeyError:
            raise GGUFError(f"{self.path}: no tensor {name!r} (the file has "
                            f"{len(self._h.tensors)} tensors)") from None

    def __contains__(self, name) -> bool:
        return name in self._h.tensors

    def __len__(self) -> int:
        return len(self._h.tensors)

    def _data(self) -> np.ndarray:
        if self._mm is None:
            raise GGUFError(f"{self.path}: the file is closed")
        return self._mm

    def read_tensor_bytes(self, name: str) -> np.ndarray:
        """Exactly the tensor's bytes: a read-only uint8 view of the mapping."""
        ti = self.tensor_info(name)
        return np.asarray(self._data()[ti.file_offset:ti.file_offset + ti.n_bytes])

    def read_tensor(self, name: str) -> np.ndarray:
        """The tensor as stored: plain types as a read-only typed view in numpy shape
        (BF16 as ``ml_dtypes.bfloat16``); block types as uint8 ``[..., row bytes]``."""
        ti = self.tensor_info(name)
        raw = self.read_tensor_bytes(name)
        t = ggml_type(ti.type_id)
        if t.name == "BF16":
            import ml_dtypes

            return raw.view(ml_dtypes.bfloat16).reshape(ti.shape)
        if is_plain(t):
            return raw.view(t.dtype).reshape(ti.shape)
        row = t.n_bytes(ti.dims[0])
        return raw.reshape(ti.shape[:-1] + (row,))

    def dequant_tensor(self, name: str) -> np.ndarray:
        """The tensor as a new float32 array in numpy row-major shape."""
        ti = self.tensor_info(name)
        raw = self.read_tensor_bytes(name)
        t = ggml_type(ti.type_id)
        if t.name == "BF16":
            return _bf16_to_f32(raw).reshape(ti.shape)
        if is_plain(t):
            return raw.view(t.dtype).astype(np.float32).reshape(ti.shape)
        from . import dequant, get_scheme

        try:
            sd = get_scheme(t.name)
            if (sd.block_size, sd.block_bytes) != (t.block_size, t.type_size):
                raise GGUFError(f"scheme {sd.name} has {sd.block_bytes}-byte blocks of "
                                f"{sd.block_size}, GGUF {t.type_size} of {t.block_size}")
            flat = dequant(raw, sd.name, num_elements=ti.n_elements)
        except QuantError as e:
            raise GGUFError(f"{self.path}: tensor {name!r} ({t.name}): {e}") from None
        return flat.reshape(ti.shape)

    # -- lifetime -----------------------------------------------------------------
    def close(self) -> None:
        """Drop the mapping; it is unmapped once no returned array uses it."""
        self._mm = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        return (f"<GGUFReader {str(self.path)!r} v{self.version} "
                f"arch={self.architecture!r} {len(self)} tensors "
                f"{len(self._h.kv)} keys>")


def load_gguf(path) -> GGUFReader:
    """Open a GGUF file (v1, v2 or v3, little-endian) for reading; see ``GGUFReader``."""
    return GGUFReader(path)


__all__ = ["GGUFReader", "load_gguf", "ValueType"]
