"""Numba source of the Reduce kernels (Sum, Mean, Prod, Max, Min) over [outer, K, inner].

One module per sub-op: the op is three tiny inline functions (``_c`` combines a value into
an accumulator, ``_fin`` finishes it, ``_fix0`` settles the sign of a zero Max/Min), pasted
above shared kernel bodies that Numba specializes per dtype. Integers accumulate in i64 and
wrap when stored; Max/Min run in the input's own dtype (exact anyway, and half the vector
width of f64), 64 independent lanes in memory, so the loop vectorizes without
reassociating anything. Float Sum/Mean (``source(op, floats=True)``) accumulate in the
accumulator's type (f64: the backend promises f64 accumulation for f32/f16/bf16) as vector
lanes held in registers (this module's one use of fastmath ``reassoc``), so the error is
about eps64·‖x‖₂ before the one rounding to the output dtype, and overflow, inf and NaN
come out as in an f64 sum. On a 64M f32 sum, 64 f64 lanes kept in memory (a store-to-load
round trip per vector) ran 20% slower than f32 lanes, f64 lanes in registers about 10%.
"""
from __future__ import annotations

LANES = 64

_OPS = {
    "Sum": ("a + v", "a", None),
    "Mean": ("a + v", "a / count", None),
    "Prod": ("a * v", "a", None),
    # fmax/fmin skip NaN (lanes start at ∓inf, never NaN); an all-NaN slice keeps ∓inf
    "Max": ("np.fmax(a, v)", "a", "pos"),
    "Min": ("np.fmin(a, v)", "a", "neg"),
}

_HELPERS = '''
_NJ = dict(inline="always", error_model="numpy", cache=True)
_KJ = dict(cache=True, error_model="numpy", nogil=True)


@njit(**_NJ)
def _c(a, v):
    return {comb}


@njit(**_NJ)
def _fin(a, count):
    return {fin}


@njit(**_NJ)
def _fix0(x, lo, n, step, a):
{fix0}
'''

_LANE_FOLD = '''
@njit(**_NJ)
def _fold(x, lo, hi, init, lanes):
    # {lanes} lanes in memory: the loop vectorizer runs them as independent vector chains,
    # nothing is reassociated. Views indexed from 0 spare Numba's negative-index
    # wraparound, which would block vectorization.
    nb = (hi - lo) // {lanes}
    acc = init
    if nb:                              # short rows skip the lanes entirely
        for j in range({lanes}):
            lanes[j] = init
        for i in range(nb):
            xs = x[lo + i * {lanes}:lo + i * {lanes} + {lanes}]
            for j in range({lanes}):
                lanes[j] = _c(lanes[j], xs[j])
        for j in range({lanes}):
            acc = _c(acc, lanes[j])
    tail = x[lo + nb * {lanes}:hi]
    for i in range(tail.size):
        acc = _c(acc, tail[i])
    return acc
'''

_FLOAT_SUM = '''
@njit(cache=True, error_model="numpy", nogil=True, fastmath={"reassoc"})
def _bsum(xs, z):
    # reassoc lets LLVM keep the partial sums in vector registers (lanes x chains); they
    # have z's type, the accumulator's
    for i in range(xs.size):
        z += xs[i]
    return z


@njit(**_NJ)
def _fold(x, lo, hi, init, lanes):
    return _bsum(x[lo:hi], init)
'''

# Max (Min) of floats: +0 (-0) wins over the other zero when present, as the oracle.
_FIX0 = {
    None: "    return a",
    "pos": '''    if a != 0:
        return a
    for t in range(n):
        v = x[lo + t * step]
        if v == 0 and math.copysign(1.0, v) > 0:
            return a - a
    return -(a - a)''',
    "neg": '''    if a != 0:
        return a
    for t in range(n):
        v = x[lo + t * step]
        if v == 0 and math.copysign(1.0, v) < 0:
            return -(a - a)
    return a - a''',
}

_KERNELS = '''
@njit(**_KJ{par})
def {name}_rows{sfx}(out, x, K, init, ntask):
    """out[o] = fold of the contiguous row x[o*K : o*K + K]; ``ntask`` row ranges."""
    rows = out.size
    for t in {rng}(ntask):
        lanes = np.full({lanes}, init)
        for o in range(t * rows // ntask, (t + 1) * rows // ntask):
            lo = o * K
            out[o] = _fin(_fix0(x, lo, K, 1, _fold(x, lo, lo + K, init, lanes)), K)


@njit(**_KJ{par})
def {name}_cols{sfx}(out, x, K, inner, init, ib):
    """out[o, i] = fold over k of x[o, k, i]; tiles of ``ib`` columns vectorize over i."""
    nb = (inner + ib - 1) // ib
    outer = out.size // inner
    for t in {rng}(outer * nb):
        o = t // nb
        i0 = (t % nb) * ib
        w = min(ib, inner - i0)
        acc = np.full(w, init)
        for k in range(K):
            base = (o * K + k) * inner + i0
            xs = x[base:base + w]
            for i in range(w):
                acc[i] = _c(acc[i], xs[i])
        dst = out[o * inner + i0:o * inner + i0 + w]
        for i in range(w):
            dst[i] = _fin(_fix0(x, o * K * inner + i0 + i, K, inner, acc[i]), K)
'''

_CHUNKED = '''
@njit(**_KJ, parallel=True)
def {name}_chunks_par(out, x, K, init, chunk):
    """Few long rows: fold fixed chunks in parallel, then the partials in order."""
    outer = out.size
    nch = (K + chunk - 1) // chunk
    part = np.full(outer * nch, init)
    for t in prange(outer * nch):
        o = t // nch
        lo = o * K + (t % nch) * chunk
        part[t] = _fold(x, lo, min(lo + chunk, o * K + K), init, np.full({lanes}, init))
    lanes = np.full({lanes}, init)
    for o in range(outer):
        a = _fold(part, o * nch, o * nch + nch, init, lanes)
        out[o] = _fin(_fix0(x, o * K, K, 1, a), K)


{name} = {name}_rows
'''


def source(op: str, floats: bool = False) -> tuple[str, str]:
    """(kernel name, Numba source) of Reduce ``op``; ``floats``: float input (Sum and Mean
    then use the register-lane sum)."""
    comb, fin, fix = _OPS[op]
    blocks = floats and op in ("Sum", "Mean")
    name = f"reduce_{op.lower()}{'_f' if blocks else ''}"
    parts = [_HELPERS.format(comb=comb, fin=fin, fix0=_FIX0[fix]),
             _FLOAT_SUM if blocks else _LANE_FOLD.format(lanes=LANES)]
    for sfx, rng, par in (("", "range", ""), ("_par", "prange", ", parallel=True")):
        parts.append(_KERNELS.format(name=name, sfx=sfx, rng=rng, par=par, lanes=LANES))
    parts.append(_CHUNKED.format(name=name, lanes=LANES))
    return name, "\n".join(parts)
