"""Sort and ArgSort as CUDA kernels: a parallel, stable, bottom-up merge sort per line.

The input is read as a C-contiguous ``[outer, n, inner]`` block; a line is one (outer,
inner) pair. Its values (f64 for floats, i64 for integers: exact for every dtype here)
travel with their source indices through ``ceil(log2 n)`` merge passes over scratch
buffers, one thread per element: an element finds its place in the merged run by a binary
search of the other run, counting the right run's elements that rank strictly before it
(for a left element) or the left run's elements that do not rank after it (for a right
element). Equal values therefore keep input order in both directions (stable, as RLX's
``sort_by``), and every element of every line moves at once. Ranking is the oracle's:
NaN above +inf, last ascending and first descending. ArgSort writes indices in the
output's dtype.
"""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType
from .device import device_dtype, import_cuda, launch_shape
from .geometry import read_expr, split3, store_expr
from .kernels import Launch, array_type, compile_kernel, int_type
from .lower_reduce import _render
from .lowering import FLOATS, INTS, SIXTEEN, SIXTEEN_NOTE, Step, lowers

DTYPES = FLOATS + SIXTEEN + INTS

_INIT = '''
def {name}(v, ix, x, n, inner):
    e = cuda.grid(1)
    step = cuda.gridsize(1)
    while e < v.size:
        line = e // n
        k = e - line * n
        o = line // inner
        v[e] = {read}
        ix[e] = k
        e += step
'''
_PASS = '''
def {name}(dv, di, sv, si, n, width):
    e = cuda.grid(1)
    step = cuda.gridsize(1)
    while e < sv.size:
        line = e // n
        k = e - line * n
        off = line * n
        lo = (k // (2 * width)) * (2 * width)
        mid = min(lo + width, n)
        hi = min(lo + 2 * width, n)
        v = sv[e]
        if k < mid:
            a = mid
            b = hi
            while a < b:
                m = (a + b) // 2
                w = sv[off + m]
                if {w_before_v}:
                    a = m + 1
                else:
                    b = m
            pos = k + a - mid
        else:
            a = lo
            b = mid
            while a < b:
                m = (a + b) // 2
                w = sv[off + m]
                if not ({v_before_w}):
                    a = m + 1
                else:
                    b = m
            pos = k - mid + a
        dv[off + pos] = v
        di[off + pos] = si[e]
        e += step
'''
_OUT = '''
def {name}(out, sv, si, n, inner):
    e = cuda.grid(1)
    step = cuda.gridsize(1)
    while e < sv.size:
        line = e // n
        k = e - line * n
        o = line // inner
        idx = si[e]
        out[o * n * inner + (line - o * inner) + k * inner] = {store}
        e += step
'''


def _before(a: str, b: str, desc: bool, is_float: bool) -> str:
    """``a`` ranks strictly before ``b``: ascending with NaN last, descending NaN first."""
    if not is_float:
        return f"{a} {'>' if desc else '<'} {b}"
    if desc:
        return f"{b} == {b} and ({a} != {a} or {a} > {b})"
    return f"{a} == {a} and ({b} != {b} or {a} < {b})"


class LineSort:
    """The merge sort of the lines of ``src`` values, into (values, indices) scratch."""

    def __init__(self, src: DType, desc: bool):
        is_float = src.is_float or src in (DType.F16, DType.BF16)
        self.work = np.dtype(np.float64 if is_float else np.int64)
        i64, wt, it = int_type(), array_type(self.work), array_type(np.int64)
        name, source = _render(_INIT, "sortinit", read=read_expr(
            src, "x[o * n * inner + (line - o * inner) + k * inner]"))
        self.init = Launch(compile_kernel(name, source),
                           (wt, it, array_type(device_dtype(src)), i64, i64))
        name, source = _render(_PASS, "sortpass",
                               w_before_v=_before("w", "v", desc, is_float),
                               v_before_w=_before("v", "w", desc, is_float))
        self.merge = Launch(compile_kernel(name, source), (wt, it, wt, it, i64, i64))
        self.launches = [self.init, self.merge]
        self._scratch: list = []        # two (values, indices) pairs, made on first use

    def __call__(self, x, total: int, n: int, inner: int) -> tuple:
        """Sort ``x``'s lines; the sorted (values, source indices), line-major ``[line,
        n]``."""
        if not self._scratch:
            cuda = import_cuda()
            self._scratch.extend(cuda.device_array(total, dt)
                                 for dt in (self.work, np.int64) * 2)
        sv, si, dv, di = self._scratch
        blocks, threads = launch_shape(total)
        self.init(blocks, threads, sv, si, x, n, inner)
        width = 1
        while width < n:
            self.merge(blocks, threads, dv, di, sv, si, n, width)
            sv, si, dv, di = dv, di, sv, si
            width *= 2
        return sv, si


@lowers("Sort", DTYPES, reason=SIXTEEN_NOTE)
@lowers("ArgSort", DTYPES, reason=SIXTEEN_NOTE)
def lower_sort(node, ins, ctx) -> Step:
    ax, desc = node.attrs.axis, node.attrs.descending
    outer, n, inner = split3(ins[0].dims, ax, ax + 1)
    total = outer * n * inner
    dst = node.shape.dtype
    lines = LineSort(ins[0].dtype, desc)
    value = ("np.float64(idx)" if dst.is_float or dst in (DType.F16, DType.BF16) else "idx") \
        if node.kind == "ArgSort" else "sv[e]"
    name, source = _render(_OUT, "sortout", store=store_expr(dst, value))
    i64 = int_type()
    fin = Launch(compile_kernel(name, source),
                 (array_type(device_dtype(dst)), array_type(lines.work),
                  array_type(np.int64), i64, i64))

    def run(out, x):
        if total:
            sv, si = lines(x, total, n, inner)
            blocks, threads = launch_shape(total)
            fin(blocks, threads, out, sv, si, n, inner)
    return Step(run, lines.launches + [fin])
