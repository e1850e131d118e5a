"""Lowering of the sort family: Sort and ArgSort.

The input is read as a C-contiguous [outer, n, inner] block; every line (one (outer,
inner) pair) is sorted on its own, lines in prange from ``numba-cpu:par_elements``
elements. A line's values travel with their source indices through a bottom-up merge sort
that takes from the right run only when its head ranks strictly before the left one, so equal values keep input
order (stable, as RLX's ``sort_by``) in both directions; runs of up to 16 are first put
in order by insertion, which is stable too. Ranking is the oracle's: NaN above +inf.
f16/bf16 run through f32 shadows (exact both ways); ArgSort writes indices in the
output's dtype. Lines of f32 (and shadows) or i32 from RADIX_MIN elements take the stable
radix path of ``_sort_radix`` instead, its passes split over the threads.
"""
from __future__ import annotations

import math

from ...ir.dtype import DType
from ._reduce_geom import (SHADOW_NOTE, finish, is_parallel, kernel_out, shadow, split3,
                           threads)
from ._sort_radix import RADIX_SOURCE
from .kernels import compile_kernel
from .lowering import Step, lowers

DTYPES = (DType.F32, DType.F64, DType.F16, DType.BF16, DType.I32)
RUN = 16                 # insertion-sorted run length before merging
RADIX_MIN = 4096         # f32/i32 lines from this length take the radix path

SOURCE = '''
_NJ = dict(inline="always", error_model="numpy", cache=True)
_KJ = dict(cache=True, error_model="numpy", nogil=True)


@njit(**_NJ)
def _before(a, b, desc):
    """a ranks strictly before b: ascending with NaN last, or descending with NaN first."""
    if desc:
        if a != a:
            return b == b
        return b == b and a > b
    return a == a and (b != b or a < b)


@njit(**_NJ)
def _line_sort(v, idx, tv, ti, desc):
    """Sort the line ``v`` with its source indices ``idx`` (``tv``/``ti`` are scratch);
    returns the (values, indices) arrays that hold the result."""
    n = v.size
    for k in range(n):
        idx[k] = k
    for lo in range(0, n, {run}):
        hi = min(lo + {run}, n)
        for k in range(lo + 1, hi):
            cv = v[k]
            ci = idx[k]
            j = k - 1
            while j >= lo and _before(cv, v[j], desc):
                v[j + 1] = v[j]
                idx[j + 1] = idx[j]
                j -= 1
            v[j + 1] = cv
            idx[j + 1] = ci
    sv, si, dv, di = v, idx, tv, ti
    width = {run}
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i, j = lo, mid
            for k in range(lo, hi):
                if j < hi and (i >= mid or _before(sv[j], sv[i], desc)):
                    dv[k] = sv[j]
                    di[k] = si[j]
                    j += 1
                else:
                    dv[k] = sv[i]
                    di[k] = si[i]
                    i += 1
        sv, si, dv, di = dv, di, sv, si
        width *= 2
    return sv, si
'''

_KERNEL = '''
@njit(**_KJ{par})
def sort_lines{sfx}(out, x, n, inner, desc, arg):
    lines = x.size // n
    for t in {rng}(lines):
        o = t // inner
        base = o * n * inner + t % inner
        v = np.empty(n, x.dtype)
        for k in range(n):
            v[k] = x[base + k * inner]
        sv, si = _line_sort(v, np.empty(n, np.int64), np.empty(n, x.dtype),
                            np.empty(n, np.int64), desc)
        for k in range(n):
            if arg:
                out[base + k * inner] = si[k]
            else:
                out[base + k * inner] = sv[k]
'''


def source() -> tuple[str, str]:
    """(kernel name, Numba source) of Sort/ArgSort."""
    parts = [SOURCE.format(run=RUN), RADIX_SOURCE]
    for sfx, rng, par in (("", "range", ""), ("_par", "prange", ", parallel=True")):
        parts.append(_KERNEL.format(sfx=sfx, rng=rng, par=par))
    return "sort_lines", "\n".join(parts)


@lowers("Sort", DTYPES, reason=SHADOW_NOTE)
@lowers("ArgSort", DTYPES, reason=SHADOW_NOTE)
def lower_sort(node, ins, ctx) -> Step:
    dims = ins[0].dims
    ax, desc = node.attrs.axis, node.attrs.descending
    outer, n, inner = split3(dims, ax, ax + 1)
    kernel = compile_kernel(*source())
    fn = kernel.get("sort_lines_par" if is_parallel(math.prod(dims)) else "sort_lines")
    arg = node.kind == "ArgSort"
    radix = n >= RADIX_MIN and ins[0].dtype in (DType.F32, DType.F16, DType.BF16, DType.I32)
    fkey = ins[0].dtype != DType.I32
    if radix:
        fn = kernel.get("sort_lines_radix")

    def run(out, x):
        buf, rounded = kernel_out(out)
        if buf.size:
            if radix:
                fn(buf, shadow(x), n, inner, desc, arg, threads(), fkey)
            else:
                fn(buf, shadow(x), n, inner, desc, arg)
        finish(out, buf, rounded)
    return Step(run, [kernel])
