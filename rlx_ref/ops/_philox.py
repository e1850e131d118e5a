"""RLX's Philox4x32-10 counter RNG (``rlx-ir/src/rng.rs``), vectorised in numpy.

RLX's ``Philox4x32`` has the round, key schedule and counter of Philox4x32-10 (Salmon et
al., Random123) but its first multiplier is ``0xD2561A75``, not the published
``0xD2511F53``: its stream is not Random123's. (The round code here takes the multiplier,
so the published known-answer vectors check the round itself.) A 64-bit seed is the key
``[lo, hi]``, the 128-bit counter starts at 0 and counts blocks, and each block yields four
u32 words used in order (lane 0 first). So word ``i`` of a stream is lane ``i % 4`` of
block ``i // 4``, and any slice of the stream can be computed directly.

On top of the words RLX maps ``u32 -> f32`` as ``(w >> 8) / 2^24`` (exact, in [0, 1)),
uniforms as ``lo + f * (hi - lo)`` in f32, and normals by Box-Muller from two consecutive
words, keeping only the cosine half (two words per normal). Every step rounds to f32 as
RLX's f32 code does; ``ln`` and ``cos`` are taken correctly rounded (computed in f64 and
rounded once), where RLX calls the platform's ``logf``/``cosf``.
"""
from __future__ import annotations

import numpy as np

M0, M1 = 0xD2561A75, 0xCD9E8D57           # rng.rs's multipliers (M0 differs from Random123)
RANDOM123_M0 = 0xD2511F53                 # the published Philox4x32 M0
W0, W1 = 0x9E3779B9, 0xBB67AE85           # key schedule (golden ratio, sqrt(3) - 1)
ROUNDS = 10
MASK32 = np.uint64(0xFFFFFFFF)
DEFAULT_GLOBAL_SEED = 42                  # RngOptions::default().seed in rng.rs
SAMPLE_DEFAULT_SEED = 0xDEADBEEF          # the CPU Sample kernel's seed when seed == 0
GOLDEN64 = 0x9E3779B97F4A7C15             # combine_seed's key multiplier
F32_MIN_POSITIVE = np.float32(np.finfo(np.float32).tiny)
TWO_PI_F32 = np.float32(2.0) * np.float32(np.pi)    # `2.0 * std::f32::consts::PI`


def combine_seed(global_seed: int, key: int) -> int:
    """RLX's ``combine_seed``: ``global + key * 0x9E3779B97F4A7C15`` (mod 2^64)."""
    return (global_seed + key * GOLDEN64) % 2**64


def philox_blocks(counters: np.ndarray, key: tuple, m0: int = M0) -> np.ndarray:
    """Philox4x32-10 of each row of ``counters`` ([n, 4] u32) under ``key`` (k0, k1)."""
    s = [np.asarray(counters[:, i], np.uint64) for i in range(4)]
    k0, k1 = int(key[0]) & 0xFFFFFFFF, int(key[1]) & 0xFFFFFFFF
    for _ in range(ROUNDS):
        p0 = s[0] * np.uint64(m0)         # < 2^64: exact in u64
        p1 = s[2] * np.uint64(M1)
        s = [(p1 >> np.uint64(32)) ^ s[1] ^ np.uint64(k0), p1 & MASK32,
             (p0 >> np.uint64(32)) ^ s[3] ^ np.uint64(k1), p0 & MASK32]
        k0, k1 = (k0 + W0) & 0xFFFFFFFF, (k1 + W1) & 0xFFFFFFFF
    return np.stack(s, axis=1).astype(np.uint32)


def seed_key(seed: int) -> tuple:
    """The Philox key of a u64 seed: ``[lo, hi]`` (``Philox4x32::new``)."""
    return seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF


def words(seed: int, n: int, start: int = 0) -> np.ndarray:
    """Words ``start .. start + n`` of the stream of ``Philox4x32::new(seed)`` (u32)."""
    if n <= 0:
        return np.zeros(0, np.uint32)
    first, last = start // 4, (start + n - 1) // 4
    blocks = np.arange(first, last + 1, dtype=np.uint64)
    ctr = np.zeros((blocks.size, 4), np.uint64)
    ctr[:, 0] = blocks & MASK32
    ctr[:, 1] = blocks >> np.uint64(32)
    flat = philox_blocks(ctr, seed_key(seed)).reshape(-1)
    off = start - first * 4
    return flat[off:off + n]


def unit_f32(w: np.ndarray) -> np.ndarray:
    """``next_f32``: the top 24 bits over 2^24, exact in f32, in [0, 1)."""
    return ((w >> np.uint32(8)).astype(np.float32) * np.float32(2.0 ** -24)).astype(np.float32)


def uniform_f32(seed: int, n: int, low, high) -> np.ndarray:
    """``n`` draws of ``Philox4x32::uniform(low, high)`` from ``seed``'s stream."""
    lo, hi = np.float32(low), np.float32(high)
    with np.errstate(over="ignore", invalid="ignore"):
        return lo + unit_f32(words(seed, n)) * (hi - lo)


def normal_f32(seed: int, n: int) -> np.ndarray:
    """``n`` draws of ``Philox4x32::normal()`` (Box-Muller, cosine half, 2 words each)."""
    w = words(seed, 2 * n).reshape(n, 2)
    u1 = np.maximum(unit_f32(w[:, 0]), F32_MIN_POSITIVE)
    u2 = unit_f32(w[:, 1])
    ln = np.log(u1.astype(np.float64)).astype(np.float32)
    r = np.sqrt(np.float32(-2.0) * ln)
    theta = TWO_PI_F32 * u2
    return r * np.cos(theta.astype(np.float64)).astype(np.float32)


def normal_like(n: int, mean, scale, key: int,
                global_seed: int = DEFAULT_GLOBAL_SEED) -> np.ndarray:
    """``fill_normal_like`` on the Philox backend: ``mean + scale * N(0, 1)`` in f32."""
    seed = combine_seed(global_seed, key)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.float32(mean) + np.float32(scale) * normal_f32(seed, n)


def uniform_like(n: int, low, high, key: int,
                 global_seed: int = DEFAULT_GLOBAL_SEED) -> np.ndarray:
    """``fill_uniform_like`` on the Philox backend: ``low + u * (high - low)`` in f32."""
    return uniform_f32(combine_seed(global_seed, key), n, low, high)
