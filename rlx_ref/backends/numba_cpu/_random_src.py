"""Numba source of RngNormal, RngUniform and Sample: RLX's Philox4x32-10 in ``njit``.

Word ``i`` of a stream is lane ``i % 4`` of block ``i // 4``, so every block is computed
on its own (prange over blocks): the output is the same for any thread count. All Philox
arithmetic is u64 with u64 constants (a signed operand would make Numba go through
float64). Floats follow the oracle (``ops/_philox.py``, ``ops/_sample_row.py``) operation
by operation in f32, with ln, cos and exp taken in f64 and rounded once.
"""
from __future__ import annotations

from ...ops import _philox

SOURCE = f'''
_NJ = dict(inline="always", error_model="numpy", cache=True)
_KJ = dict(cache=True, error_model="numpy", nogil=True)
_MASK = np.uint64(0xFFFFFFFF)
_M0 = np.uint64({_philox.M0:#x})
_M1 = np.uint64({_philox.M1:#x})
_W0 = np.uint64({_philox.W0:#x})
_W1 = np.uint64({_philox.W1:#x})
_S32 = np.uint64(32)
_S8 = np.uint64(8)
_INV24 = np.float32(2.0 ** -24)
_TINY = np.float32(np.finfo(np.float32).tiny)
_TWO_PI = np.float32(2.0) * np.float32(np.pi)


@njit(**_NJ)
def _block(b, k0, k1):
    """The four words of block ``b`` (counter [b lo, b hi, 0, 0]) under key (k0, k1)."""
    s0 = np.uint64(b) & _MASK
    s1 = np.uint64(b) >> _S32
    s2 = np.uint64(0)
    s3 = np.uint64(0)
    for _ in range({_philox.ROUNDS}):
        p0 = s0 * _M0
        p1 = s2 * _M1
        s0, s1, s2, s3 = (p1 >> _S32) ^ s1 ^ k0, p1 & _MASK, (p0 >> _S32) ^ s3 ^ k1, p0 & _MASK
        k0 = (k0 + _W0) & _MASK
        k1 = (k1 + _W1) & _MASK
    return s0, s1, s2, s3


@njit(**_NJ)
def _lane(w, i):
    if i == 0:
        return w[0]
    if i == 1:
        return w[1]
    if i == 2:
        return w[2]
    return w[3]


@njit(**_NJ)
def _unit(w):
    return np.float32(w >> _S8) * _INV24


@njit(**_NJ)
def _word(t, k0, k1):
    """Word ``t`` of the stream."""
    return _lane(_block(t // 4, k0, k1), t % 4)
'''

KERNELS = '''
@njit(**_KJ{par})
def uniform_fill{sfx}(out, k0, k1, lo, hi):
    n = out.size
    span = hi - lo
    for blk in {rng}((n + 3) // 4):
        w = _block(blk, k0, k1)
        for lane in range(4):
            j = blk * 4 + lane
            if j < n:
                out[j] = lo + _unit(_lane(w, lane)) * span


@njit(**_KJ{par})
def normal_fill{sfx}(out, k0, k1, mean, scale):
    n = out.size
    for blk in {rng}((n + 1) // 2):
        w = _block(blk, k0, k1)
        for half in range(2):
            j = blk * 2 + half
            if j < n:
                u1 = _unit(_lane(w, 2 * half))
                u2 = _unit(_lane(w, 2 * half + 1))
                if u1 < _TINY:
                    u1 = _TINY
                ln = np.float32(math.log(np.float64(u1)))
                r = np.float32(math.sqrt(np.float64(np.float32(-2.0) * ln)))
                theta = _TWO_PI * u2
                z = r * np.float32(math.cos(np.float64(theta)))
                out[j] = mean + scale * z


@njit(**_KJ{par})
def sample_rows{sfx}(out, x, k0, k1, top_k, top_p, use_p, temp):
    batch, v = x.shape
    for b in {rng}(batch):
        out[b] = _sample_row(x[b], _unit(_word(b, k0, k1)), top_k, top_p, use_p, temp)
'''

SAMPLE = '''
@njit(**_NJ)
def _renorm(p):
    s = np.float32(0.0)
    for k in range(p.size):
        s = s + p[k]
    if not s >= _TINY:
        s = _TINY
    inv = np.float32(1.0) / s
    for k in range(p.size):
        p[k] = p[k] * inv


@njit(**_NJ)
def _sample_row(row, r, top_k, top_p, use_p, temp):
    """One id (as a float; -1.0 when a NaN would reach RLX's sorts, which panic)."""
    v = row.size
    p = np.empty(v, np.float32)
    for k in range(v):
        p[k] = row[k] / temp
    if top_k > 0 and top_k < v:
        for k in range(v):
            if p[k] != p[k]:
                return -1.0
        cutoff = np.sort(p)[v - top_k]
        for k in range(v):
            if p[k] < cutoff:
                p[k] = -np.inf
    m = np.float32(-np.inf)
    for k in range(v):
        if p[k] > m:
            m = p[k]
    for k in range(v):
        p[k] = np.float32(math.exp(np.float64(np.float32(p[k] - m))))
    _renorm(p)
    if use_p:
        for k in range(v):
            if p[k] != p[k]:
                return -1.0
        order = np.argsort(-p, kind="mergesort")
        cum = np.float32(0.0)
        last = v - 1
        for j in range(v):
            cum = cum + p[order[j]]
            if cum >= top_p:
                last = j
                break
        for j in range(last + 1, v):
            p[order[j]] = np.float32(0.0)
        _renorm(p)
    acc = np.float32(0.0)
    for k in range(v):
        acc = acc + p[k]
        if r <= acc:
            return np.float64(k)
    return np.float64(v - 1)
'''


def source() -> tuple[str, str]:
    """(kernel name, Numba source) of the random family."""
    parts = [SOURCE, SAMPLE]
    for sfx, rng, par in (("", "range", ""), ("_par", "prange", ", parallel=True")):
        parts.append(KERNELS.format(sfx=sfx, rng=rng, par=par))
    return "uniform_fill", "\n".join(parts)
