"""A counter-based random generator whose output is bit-identical on every platform.

``CounterRNG(seed, stream)`` hashes (seed, stream, counter) with the SplitMix64 finaliser in
explicit uint64 numpy arithmetic, so the words depend on nothing but integer wrap-around.
Floats are built without libm: uniforms take the top 53 (or 24) bits of a word, and an
approximately normal value is an Irwin–Hall sum of twelve 32-bit uniforms, computed in
integers and scaled by a power of two, so no rounding happens anywhere. It implements the
part of ``numpy.random.Generator`` that the registry's ``samples(rng)`` use.
"""
from __future__ import annotations

import hashlib

import numpy as np

_U64 = np.uint64
_MASK = (1 << 64) - 1
_GAMMA = _U64(0x9E3779B97F4A7C15)          # SplitMix64's increment (the golden ratio)
_M1, _M2 = _U64(0xBF58476D1CE4E5B9), _U64(0x94D049BB133111EB)
_SALT = 0xD1B54A32D192ED03                 # separates the two key words


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser on a uint64 array (wrap-around multiplication)."""
    z = (z ^ (z >> _U64(30))) * _M1
    z = (z ^ (z >> _U64(27))) * _M2
    return z ^ (z >> _U64(31))


def _mix_int(value: int) -> int:
    with np.errstate(over="ignore"):
        return int(_mix(np.array([value & _MASK], _U64))[0])


def stream_hash(stream: str) -> int:
    """The stream name as a 64-bit integer (first 8 bytes of its sha256, little-endian)."""
    return int.from_bytes(hashlib.sha256(stream.encode("utf-8")).digest()[:8], "little")


def _count(size) -> tuple[int, tuple | None]:
    if size is None:
        return 1, None
    shape = (int(size),) if np.isscalar(size) else tuple(int(s) for s in size)
    if any(s < 0 for s in shape):
        raise ValueError(f"size must be non-negative, got {shape}")
    return int(np.prod(shape, dtype=np.int64)), shape


def _shaped(values: np.ndarray, shape):
    return values[0] if shape is None else values.reshape(shape)


class CounterRNG:
    """Deterministic stand-in for ``numpy.random.Generator`` (see the module docstring).

    Two generators with the same ``(seed, stream)`` give the same values; different streams
    are independent. Every call consumes a fixed number of words, so a sample generator
    that makes the same calls sees the same values on every machine and numpy version.
    """

    def __init__(self, seed: int = 0, stream: str = ""):
        self.seed, self.stream = int(seed), str(stream)
        k = _mix_int(_mix_int(self.seed) ^ stream_hash(self.stream))
        self._k0, self._k1 = _U64(k), _U64(_mix_int(k ^ _SALT))
        self.counter = 0

    def __repr__(self) -> str:
        return f"CounterRNG(seed={self.seed}, stream={self.stream!r}, counter={self.counter})"

    # ── raw words ──────────────────────────────────────────────────────────
    def words(self, n: int) -> np.ndarray:
        """The next ``n`` uint64 words: mix(mix(k0 + i·γ) ^ k1) for counters i."""
        ctr = np.arange(self.counter, self.counter + n, dtype=_U64)
        self.counter += n
        with np.errstate(over="ignore"):
            return _mix(_mix(self._k0 + ctr * _GAMMA) ^ self._k1)

    # ── the numpy.random.Generator subset ───────────────────────────────────
    def random(self, size=None, dtype=np.float64):
        """Uniform floats in [0, 1): the top 53 bits (24 for float32) times a power of two."""
        n, shape = _count(size)
        w = self.words(n)
        if np.dtype(dtype) == np.float32:
            out = (w >> _U64(40)).astype(np.float32) * np.float32(2.0 ** -24)
        elif np.dtype(dtype) == np.float64:
            out = (w >> _U64(11)).astype(np.float64) * (2.0 ** -53)
        else:
            raise TypeError(f"random() makes float32 or float64, got dtype {dtype}")
        return _shaped(out, shape)

    def uniform(self, low=0.0, high=1.0, size=None):
        """``low + (high - low)·u`` with u from ``random`` (broadcasting like numpy)."""
        low, high = np.asarray(low, np.float64), np.asarray(high, np.float64)
        if size is None:
            size = np.broadcast_shapes(low.shape, high.shape) or None
        u = np.asarray(self.random(size))
        out = low + (high - low) * u
        return out if out.ndim else np.float64(out)

    def standard_normal(self, size=None, dtype=np.float64):
        """Irwin–Hall: the sum of 12 uniforms minus 6 (mean 0, variance 1, support ±6).

        Twelve 32-bit integers are summed exactly, then scaled by 2**-32: every step is exact.
        A complex ``dtype`` draws the real parts, then the imaginary parts, from the stream.
        """
        if np.dtype(dtype).kind == "c":
            re = np.asarray(self.standard_normal(size))
            im = np.asarray(self.standard_normal(size))
            return _shaped((re + 1j * im).reshape(-1).astype(dtype), _count(size)[1])
        n, shape = _count(size)
        w = self.words(6 * n).reshape(n, 6)
        lo, hi = w & _U64(0xFFFFFFFF), w >> _U64(32)
        total = lo.sum(axis=1, dtype=_U64) + hi.sum(axis=1, dtype=_U64)   # < 2**36, exact
        out = total.astype(np.float64) * (2.0 ** -32) - 6.0
        return _shaped(out.astype(dtype, copy=False), shape)

    def normal(self, loc=0.0, scale=1.0, size=None):
        """``loc + scale·z`` with z from ``standard_normal``."""
        out = np.asarray(loc, np.float64) + np.asarray(scale, np.float64) * \
            np.asarray(self.standard_normal(size))
        return out if out.ndim else np.float64(out)

    def integers(self, low, high=None, size=None, dtype=np.int64, endpoint=False):
        """Uniform integers in [low, high) (numpy's rule: one bound means [0, low))."""
        if high is None:
            low, high = 0, low
        low, high = int(low), int(high) + (1 if endpoint else 0)
        span = high - low
        if not 0 < span <= 1 << 32:
            raise ValueError(f"integers() needs 0 < high - low <= 2**32, got [{low}, {high})")
        n, shape = _count(size)
        top = self.words(n) >> _U64(32)
        # Lemire's multiply-shift: floor(top·span / 2**32), exact in uint64 (bias < 2**-32·span)
        pick = (top * _U64(span)) >> _U64(32)
        out = (pick.astype(np.int64) + low).astype(dtype)
        return _shaped(out, shape)

    def permutation(self, x):
        """A shuffled ``arange(x)`` (int) or a shuffled copy of ``x`` along axis 0."""
        arr = np.arange(int(x)) if np.isscalar(x) else np.asarray(x)
        order = np.argsort(self.words(len(arr)), kind="stable")
        return arr[order]

    def choice(self, a, size=None, replace=True):
        """Elements of ``a`` (or ``arange(a)``) picked uniformly."""
        arr = np.arange(int(a)) if np.isscalar(a) else np.asarray(a)
        if replace:
            return arr[self.integers(0, len(arr), size)]
        n, shape = _count(size)
        return _shaped(self.permutation(arr)[:n], shape)
