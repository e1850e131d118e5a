"""Parse and validate a GGUF header from a byte buffer, trusting no size it holds.

Every count, length and dimension read from the file is checked against the bytes left
before anything is allocated or read from it, so a damaged or hostile header gives a
``GGUFError`` naming the field, never a read past the end or a huge allocation.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from .gguf_format import (DEFAULT_ALIGNMENT, MAGIC, MAX_DIMS, MAX_INT64, SCALAR_DTYPES,
                          VERSIONS, GGUFError, TensorInfo, ValueType, align_up, ggml_type)


@dataclass
class Header:
    """What the header says: version, key/values (key -> (type, value, item type)),
    the tensor infos in file order, and where the data section starts."""

    version: int
    kv: dict = field(default_factory=dict)
    tensors: dict = field(default_factory=dict)
    alignment: int = DEFAULT_ALIGNMENT
    data_start: int = 0


class _Cursor:
    """Reads little-endian fields from ``buf``, checking each against the end first."""

    def __init__(self, buf, size: int):
        self.buf, self.size, self.pos = buf, size, 0
        self.wide = True                      # u64 counts and lengths (version >= 2)

    def left(self) -> int:
        return self.size - self.pos

    def need(self, n: int, what: str) -> None:
        if n > self.left():
            raise GGUFError(f"truncated file: {what} needs {n} bytes at offset {self.pos}, "
                            f"but only {self.left()} remain")

    def unpack(self, fmt: str, n: int, what: str):
        self.need(n, what)
        v = struct.unpack_from(fmt, self.buf, self.pos)[0]
        self.pos += n
        return v

    def u32(self, what: str) -> int:
        return self.unpack("<I", 4, what)

    def count(self, what: str) -> int:
        """A count or length: u64 from version 2, u32 in version 1."""
        return self.unpack("<Q", 8, what) if self.wide else self.unpack("<I", 4, what)

    @property
    def count_size(self) -> int:
        return 8 if self.wide else 4

    def raw(self, n: int, what: str) -> bytes:
        self.need(n, what)
        out = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return out

    def string(self, what: str) -> bytes:
        n = self.count(f"{what} length")
        if n > self.left():
            raise GGUFError(f"{what}: string length {n} at offset {self.pos} runs past the "
                            f"end of the file ({self.left()} bytes remain)")
        return self.raw(n, what)

    def array(self, dtype: np.dtype, n: int, what: str) -> np.ndarray:
        self.need(n * dtype.itemsize, what)
        out = np.frombuffer(self.buf, dtype=dtype, count=n, offset=self.pos).copy()
        self.pos += n * dtype.itemsize
        return out


def _text(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise GGUFError(f"{what} is not valid UTF-8 ({e.reason} at byte {e.start})") from None


def _value_type(cur: _Cursor, what: str) -> ValueType:
    tag = cur.u32(f"{what} type")
    if tag not in ValueType._value2member_map_:
        raise GGUFError(f"{what}: unknown value type {tag}")
    return ValueType(tag)


def _scalar(cur: _Cursor, vt: ValueType, what: str):
    v = cur.array(SCALAR_DTYPES[vt], 1, what)[0]
    if vt == ValueType.BOOL:
        if v > 1:
            raise GGUFError(f"{what}: bool value {int(v)} is not 0 or 1")
        return bool(v)
    return v.item()


def _value(cur: _Cursor, vt: ValueType, what: str):
    """One value of type ``vt``: (value, item type); strings keep undecodable bytes as
    surrogate escapes so that a file round-trips unchanged."""
    if vt in SCALAR_DTYPES:
        return _scalar(cur, vt, what), None
    if vt == ValueType.STRING:
        return cur.string(what).decode("utf-8", "surrogateescape"), None
    item = _value_type(cur, f"{what} array item")
    n = cur.count(f"{what} array count")
    if item == ValueType.ARRAY:
        raise GGUFError(f"{what}: nested arrays are not supported")
    min_size = cur.count_size if item == ValueType.STRING else SCALAR_DTYPES[item].itemsize
    if n * min_size > cur.left():
        raise GGUFError(f"{what}: array count {n} of {item.name} needs at least "
                        f"{n * min_size} bytes, but only {cur.left()} remain")
    if item == ValueType.STRING:
        return [cur.string(f"{what}[{i}]").decode("utf-8", "surrogateescape")
                for i in range(n)], item
    arr = cur.array(SCALAR_DTYPES[item], n, what)
    if item == ValueType.BOOL:
        if arr.size and arr.max() > 1:
            raise GGUFError(f"{what}: bool array holds the value {int(arr.max())}, not 0 or 1")
        arr = arr.astype(bool)
    return arr, item


def _version(cur: _Cursor) -> int:
    magic = cur.raw(4, "the magic")
    if magic != MAGIC:
        raise GGUFError(f"not a GGUF file: magic {magic!r} (expected {MAGIC!r})")
    version = cur.u32("the version")
    swapped = int.from_bytes(version.to_bytes(4, "little"), "big")
    if version not in VERSIONS and swapped in VERSIONS:
        raise GGUFError(f"version field reads {swapped} big-endian: big-endian GGUF files "
                        "are not supported (convert the file to little-endian)")
    if version not in VERSIONS:
        raise GGUFError(f"unsupported GGUF version {version} (expected 1, 2 or 3)")
    return version


def _read_kv(cur: _Cursor, h: Header) -> int:
    """Read the counts and every key/value pair; returns the tensor count."""
    n_tensors = cur.count("the tensor count")
    n_kv = cur.count("the key/value count")
    # each pair takes at least a key length, a type tag and a one-byte value
    min_kv = cur.count_size + 4 + 1
    if n_kv * min_kv > cur.left():
        raise GGUFError(f"key/value count {n_kv} needs at least {n_kv * min_kv} bytes, but "
                        f"only {cur.left()} remain")
    for i in range(n_kv):
        key = _text(cur.string(f"key #{i}"), f"key #{i}")
        if key in h.kv:
            raise GGUFError(f"duplicate key {key!r}")
        vt = _value_type(cur, f"key {key!r}")
        value, item = _value(cur, vt, f"key {key!r}")
        h.kv[key] = (vt, value, item)
    # each tensor info takes at least a name length, n_dims, a type and an offset
    min_ti = cur.count_size + 4 + 4 + 8
    if n_tensors * min_ti > cur.left():
        raise GGUFError(f"tensor count {n_tensors} needs at least {n_tensors * min_ti} "
                        f"bytes, but only {cur.left()} remain")
    return n_tensors


def _alignment(h: Header) -> int:
    if "general.alignment" not in h.kv:
        return DEFAULT_ALIGNMENT
    vt, a, _ = h.kv["general.alignment"]
    if vt != ValueType.UINT32:
        raise GGUFError(f"key 'general.alignment' has type {vt.name}, expected UINT32")
    if a == 0 or a & (a - 1):
        raise GGUFError(f"key 'general.alignment': {a} is not a power of two")
    return a


def _read_tensor_info(cur: _Cursor, i: int):
    name = _text(cur.string(f"tensor #{i} name"), f"tensor #{i} name")
    what = f"tensor {name!r}"
    n_dims = cur.u32(f"{what} n_dims")
    if n_dims > MAX_DIMS:
        raise GGUFError(f"{what}: n_dims {n_dims} exceeds the maximum {MAX_DIMS}")
    dims = cur.array(np.dtype("<u8") if cur.wide else np.dtype("<u4"), n_dims,
                     f"{what} dims")
    type_id = cur.u32(f"{what} type")
    try:
        t = ggml_type(type_id)
    except GGUFError as e:
        raise GGUFError(f"{what}: {e}") from None
    offset = cur.unpack("<Q", 8, f"{what} offset")
    return name, tuple(int(d) for d in dims), t, offset


def _check_tensor(name, dims, t, offset, h: Header, size: int) -> TensorInfo:
    what = f"tensor {name!r}"
    n = 1
    for k, d in enumerate(dims):
        if d > MAX_INT64:
            raise GGUFError(f"{what}: dim {k} = {d} exceeds the int64 range")
        n *= d
        if n > MAX_INT64:
            raise GGUFError(f"{what}: dims {list(dims)} hold more than 2**63-1 elements")
    if dims and dims[0] % t.block_size:
        raise GGUFError(f"{what}: row length (dim 0) {dims[0]} is not a multiple of "
                        f"{t.name}'s block size {t.block_size}")
    if not dims and t.block_size != 1:
        raise GGUFError(f"{what}: a 0-d tensor cannot be of block type {t.name}")
    n_bytes = t.n_bytes(n)
    if offset % h.alignment:
        raise GGUFError(f"{what}: offset {offset} is not a multiple of the alignment "
                        f"{h.alignment}")
    start = h.data_start + offset
    if start + n_bytes > size:
        raise GGUFError(f"{what}: data at file offset {start} + {n_bytes} bytes runs past "
                        f"the end of the file ({size} bytes)")
    return TensorInfo(name, dims, tuple(reversed(dims)), t.name, t.id, offset, start, n,
                      n_bytes)


def _check_overlaps(infos) -> None:
    spans = sorted((ti.offset, ti.offset + ti.n_bytes, ti.name) for ti in infos
                   if ti.n_bytes)
    for (_, end, a), (start, _, b) in zip(spans, spans[1:]):
        if start < end:
            raise GGUFError(f"tensor {b!r} (offset {start}) overlaps tensor {a!r} "
                            f"(which ends at offset {end})")


def parse_header(buf, size: int) -> Header:
    """The validated header of the GGUF bytes ``buf`` (``size`` of them)."""
    cur = _Cursor(buf, size)
    version = _version(cur)
    cur.wide = version >= 2
    h = Header(version)
    n_tensors = _read_kv(cur, h)
    h.alignment = _alignment(h)
    arch = h.kv.get("general.architecture")
    if arch is not None and arch[0] != ValueType.STRING:
        raise GGUFError(f"key 'general.architecture' has type {arch[0].name}, "
                        "expected STRING")
    raw = []
    seen = set()
    for i in range(n_tensors):
        name, dims, t, offset = _read_tensor_info(cur, i)
        if name in seen:
            raise GGUFError(f"duplicate tensor name {name!r}")
        seen.add(name)
        raw.append((name, dims, t, offset))
    h.data_start = align_up(cur.pos, h.alignment)
    infos = [_check_tensor(*r, h, size) for r in raw]
    _check_overlaps(infos)
    h.tensors = {ti.name: ti for ti in infos}
    return h
