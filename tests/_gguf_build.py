"""Build GGUF files byte by byte for tests (any version, well-formed or not), recording
where each header field sits so a test can patch it; and a Q8_0 stand-in scheme."""
from __future__ import annotations

import struct

import numpy as np

from rlx_ref.quant import QuantError, SchemeDef, get_scheme, register

SCALAR_FMT = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<B",
              10: "<Q", 11: "<q", 12: "<d"}
STRING, ARRAY = 8, 9


class Builder:
    """Appends little-endian fields; ``at[label] = (position, width)``."""

    def __init__(self, version: int = 3):
        self.version, self.buf, self.at = version, bytearray(), {}

    def put(self, fmt: str, value, label: str | None = None) -> None:
        if label:
            self.at[label] = (len(self.buf), struct.calcsize(fmt))
        self.buf += struct.pack(fmt, value)

    def count(self, n: int, label: str | None = None) -> None:
        self.put("<Q" if self.version >= 2 else "<I", n, label)

    def string(self, s, label: str | None = None) -> None:
        raw = s.encode() if isinstance(s, str) else s
        self.count(len(raw), label)
        self.buf += raw

    def value(self, vtype: int, value, label: str) -> None:
        if vtype == STRING:
            self.string(value, f"{label}.len")
        elif vtype == ARRAY:
            item, items = value
            self.put("<I", item, f"{label}.item")
            self.count(len(items), f"{label}.count")
            for i, v in enumerate(items):
                self.value(item, v, f"{label}[{i}]")
        else:
            self.put(SCALAR_FMT[vtype], value, label)


def gguf_bytes(kv=(), tensors=(), version: int = 3, alignment: int = 32,
               magic: bytes = b"GGUF"):
    """(file bytes, field positions). kv: (key, type id, value), an array's value being
    (item type, items); tensors: (name, GGUF-order dims, ggml type id, raw bytes) laid
    out in order at aligned offsets, or (name, dims, type, raw, offset) to place one."""
    b = Builder(version)
    b.buf += magic
    b.put("<I", version, "version")
    b.count(len(tensors), "n_tensors")
    b.count(len(kv), "n_kv")
    for i, (key, vtype, value) in enumerate(kv):
        b.string(key, f"kv{i}.key")
        b.put("<I", vtype, f"kv{i}.type")
        b.value(vtype, value, f"kv{i}")
    offset, placed = 0, []
    for i, t in enumerate(tensors):
        name, dims, type_id, raw = t[:4]
        off = t[4] if len(t) > 4 else offset
        b.string(name, f"ti{i}.name")
        b.put("<I", len(dims), f"ti{i}.n_dims")
        for k, d in enumerate(dims):
            b.put("<Q" if version >= 2 else "<I", d, f"ti{i}.dim{k}")
        b.put("<I", type_id, f"ti{i}.type")
        b.put("<Q", off, f"ti{i}.offset")
        placed.append((off, raw))
        offset = -(-(off + len(raw)) // alignment) * alignment
    b.buf += bytes(-len(b.buf) % alignment)
    start = len(b.buf)
    end = max([off + len(raw) for off, raw in placed] + [0])
    data = bytearray(-(-end // alignment) * alignment)
    for off, raw in placed:
        data[off:off + len(raw)] = raw
    return bytes(b.buf) + bytes(data), b.at, start


def patch(data: bytes, at, label: str, value: int) -> bytes:
    """``data`` with the field ``label`` set to ``value`` (masked to the field's width)."""
    pos, width = at[label]
    value &= (1 << (8 * width)) - 1
    return data[:pos] + value.to_bytes(width, "little") + data[pos + width:]


def _q8_0_dequant(blocks: np.ndarray) -> np.ndarray:
    d = blocks[:, :2].copy().view("<f2").astype(np.float32)
    return d * blocks[:, 2:].view(np.int8).astype(np.float32)


def _q8_0_quant(x: np.ndarray) -> np.ndarray:
    d = np.abs(x).max(axis=1, keepdims=True) / 127
    with np.errstate(divide="ignore"):
        inv = np.where(d == 0, 0, 1 / np.where(d == 0, 1, d))
    q = np.clip(np.rint(x * inv), -127, 127).astype(np.int8)
    return np.concatenate([d.astype("<f2").view(np.uint8), q.view(np.uint8)], axis=1)


def ensure_q8_0() -> str:
    """A usable Q8_0 scheme: the real one where it is registered, else a plain-numpy
    stand-in with ggml's Q8_0 layout (f16 scale, 32 int8), registered for this run."""
    try:
        get_scheme("Q8_0")
    except QuantError:
        register(SchemeDef("Q8_0", 32, 34, _q8_0_dequant, _q8_0_quant, ggml_type=8,
                           doc="test stand-in: f16 scale then 32 int8 values"))
    return "Q8_0"
