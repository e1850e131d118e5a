"""Reading and writing the little-endian fields of GGUF blocks, vectorized over blocks."""
from __future__ import annotations

import functools

import numpy as np


def f16_at(blocks: np.ndarray, at: int) -> np.ndarray:
    """The f16 at byte ``at`` of every block (u8 [n, bytes]), as f32 [n]."""
    return blocks[:, at:at + 2].copy().view("<f2")[:, 0].astype(np.float32)


def f16_bytes(v: np.ndarray) -> np.ndarray:
    """f32 [n] -> its f16 (round to nearest even) as u8 [n, 2]."""
    return np.asarray(v, np.float32).astype("<f2").reshape(-1, 1).view(np.uint8)


def u16(b: np.ndarray) -> np.ndarray:
    """u8 [..., 2k] -> u16 [..., k], little-endian."""
    w = b.astype(np.uint16)
    return w[..., 0::2] | w[..., 1::2] << 8


def u32(b: np.ndarray) -> np.ndarray:
    """u8 [..., 4k] -> u32 [..., k], little-endian."""
    w = b.astype(np.uint32)
    return w[..., 0::4] | w[..., 1::4] << 8 | w[..., 2::4] << 16 | w[..., 3::4] << 24


def nibbles(b: np.ndarray) -> np.ndarray:
    """u8 [..., k] -> [..., 2k]: each byte's low nibble, then its high nibble."""
    return np.stack([b & 15, b >> 4], axis=-1).reshape(*b.shape[:-1], -1)


def split_halves(b: np.ndarray) -> np.ndarray:
    """u8 [..., k] -> [..., 2k]: all low nibbles, then all high nibbles (GGUF's 32-weight
    layout: byte j holds weights j and j + k)."""
    return np.concatenate([b & 15, b >> 4], axis=-1)


def join_halves(q: np.ndarray) -> np.ndarray:
    """Inverse of ``split_halves``: codes [..., 2k] (< 16) -> bytes [..., k]."""
    k = q.shape[-1] // 2
    return (q[..., :k] | q[..., k:] << 4).astype(np.uint8)


def quiet(decode):
    """Run a block decoder without numpy's overflow / invalid warnings: an inf or NaN scale
    field decodes to inf / NaN weights, which is the stored value, not an error."""
    @functools.wraps(decode)
    def run(blocks: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore"):
            return decode(blocks)
    return run
