"""OpenCL C of the gather/scatter kernels: index decoding, bit-copy gathers, scatters.

Indices arrive as f32-encoded integers (any float dtype) or an integer tensor. A kernel
decodes each index where it reads it: a non-integral, non-finite or out-of-range value
writes ``err_code + ERR_INDEX`` to the error word and the work-item stops before touching
memory through it. Gathers copy raw bits (element size only). Scatters combine values in
row-major update order, one work-item owning each output element it writes (a column of
the target slices, or one line along the scatter axis), so duplicate targets behave as
the oracle's sequential ``ufunc.at``; f16/bf16 scatter into an f32 shadow rounded once.
"""
from __future__ import annotations

from string import Template

from ...ir.dtype import DType
from ._move_src import bits_type, named
from .lowering import C_TYPE, ERR_INDEX

SIXTEEN = (DType.F16, DType.BF16)
# how an index or update buffer of each dtype is declared (16-bit floats: storage types)
STORE_TYPE = {**C_TYPE, DType.F16: "half", DType.BF16: "ushort"}
# what a scatter combines in
VALUE_TYPE = {**C_TYPE, DType.F16: "float", DType.BF16: "float"}


def load(dt: DType, buf: str, i: str) -> str:
    """C expression: element ``i`` of ``buf`` (a ``dt`` buffer) as its compute value."""
    if dt is DType.F16:
        return f"vload_half({i}, {buf})"
    if dt is DType.BF16:
        return f"rlx_bf16_load({buf}[{i}])"
    return f"{buf}[{i}]"


def decode(var: str, dt: DType, i: str, n: str, negative_ok: bool) -> str:
    """C statements declaring ``long var``: index ``i`` of ``idx`` (negatives wrapped when
    allowed); a bad index leaves ``var`` outside ``0..n-1`` (``LONG_MIN`` if not integral)."""
    if dt.is_float:
        ft, sfx = ("double", "") if dt is DType.F64 else ("float", "f")
        out = (f"{ft} {var}_f = {load(dt, 'idx', i)};\n"
               f"long {var} = ({var}_f == floor({var}_f) && fabs({var}_f) < 4.0e18{sfx})"
               f" ? (long){var}_f : LONG_MIN;\n")
    else:
        out = f"long {var} = (long){load(dt, 'idx', i)};\n"
    if negative_ok:
        out += f"if ({var} < 0) {var} += {n};\n"
    return out


def _bad(var: str, n: str) -> str:
    return f"!({var} >= 0 && {var} < {n})"


def _render(template: str, base: str, **subs) -> tuple[str, str]:
    subs.setdefault("ERR", str(ERR_INDEX))
    return named(Template(template).substitute(**subs), base)


# ── gathers ────────────────────────────────────────────────────────────────

_GATHER = """
__kernel void KNAME(__global $T* out, __global const $T* x, __global const $IT* idx,
                    long outer, long nk, long n_axis, long inner, long chunk, long nchunks,
                    __global int* rlx_err, int err_code)
{
    long gid = get_global_id(0);
    if (gid >= outer * nk * nchunks) return;
    long w = gid / nchunks;
    long j0 = (gid - w * nchunks) * chunk;
    long j1 = min(j0 + chunk, inner);
    long o = w / nk;
    long p = w - o * nk;
    $DECODE
    if ($BAD) { *rlx_err = err_code + $ERR; return; }
    __global const $T* s = x + (o * n_axis + v) * inner;
    __global $T* d = out + w * inner;
    for (long j = j0; j < j1; ++j) d[j] = s[j];
}
"""

_GATHER_ELEMENTS = """
__kernel void KNAME(__global $T* out, __global const $T* x, __global const $IT* idx,
                    __global const long* geo, int rank, int axis, long n, long n_axis,
                    __global int* rlx_err, int err_code)
{
    long p = get_global_id(0);
    if (p >= n) return;
    $DECODE
    if ($BAD) { *rlx_err = err_code + $ERR; return; }
    long r = p, off = 0;
    for (int d = rank - 1; d >= 0; --d) {      /* geo: index dims, then data strides */
        long dim = geo[d];
        long c = r % dim;
        r /= dim;
        off += (d == axis ? v : c) * geo[rank + d];
    }
    out[p] = x[off];
}
"""

_GATHER_ND = """
__kernel void KNAME(__global $T* out, __global const $T* x, __global const $IT* idx,
                    __global const long* geo, int k, long nq, long per_batch,
                    long batch_stride, long inner, long chunk, long nchunks,
                    __global int* rlx_err, int err_code)
{
    long gid = get_global_id(0);
    if (gid >= nq * nchunks) return;
    long q = gid / nchunks;
    long j0 = (gid - q * nchunks) * chunk;
    long j1 = min(j0 + chunk, inner);
    long off = q / per_batch * batch_stride;
    for (int t = 0; t < k; ++t) {              /* geo: axis sizes, then data strides */
        long nt = geo[t];
        $DECODE
        if ($BAD) { *rlx_err = err_code + $ERR; return; }
        off += v * geo[k + t];
    }
    __global const $T* s = x + off;
    __global $T* d = out + q * inner;
    for (long j = j0; j < j1; ++j) d[j] = s[j];
}
"""

_CHECK = """
__kernel void KNAME(__global const $IT* idx, __global const long* sizes, int k, long n,
                    __global int* rlx_err, int err_code)
{
    long p = get_global_id(0);
    if (p >= n) return;
    long nt = sizes[p % k];
    $DECODE
    if ($BAD) *rlx_err = err_code + $ERR;
}
"""


def gather_kernel(size: int, idt: DType) -> tuple[str, str]:
    return _render(_GATHER, "rlx_gather", T=bits_type(size), IT=STORE_TYPE[idt],
                   DECODE=decode("v", idt, "p", "n_axis", False), BAD=_bad("v", "n_axis"))


def gather_elements_kernel(size: int, idt: DType) -> tuple[str, str]:
    return _render(_GATHER_ELEMENTS, "rlx_gather_el", T=bits_type(size), IT=STORE_TYPE[idt],
                   DECODE=decode("v", idt, "p", "n_axis", True), BAD=_bad("v", "n_axis"))


def gather_nd_kernel(size: int, idt: DType) -> tuple[str, str]:
    return _render(_GATHER_ND, "rlx_gather_nd", T=bits_type(size), IT=STORE_TYPE[idt],
                   DECODE=decode("v", idt, "q * k + t", "nt", True), BAD=_bad("v", "nt"))


def check_kernel(idt: DType, negative_ok: bool) -> tuple[str, str]:
    """Checks every index (coordinate ``p % k`` against ``sizes``) of an empty-output op."""
    return _render(_CHECK, "rlx_idx_check", IT=STORE_TYPE[idt],
                   DECODE=decode("v", idt, "p", "nt", negative_ok), BAD=_bad("v", "nt"))


# ── scatters ───────────────────────────────────────────────────────────────

_SCATTER_ND = """
__kernel void KNAME(__global $A* acc, __global const $UT* upd, __global const $IT* idx,
                    __global const long* geo, int k, long nu, long inner, long chunk,
                    long nchunks, __global int* rlx_err, int err_code)
{
    long gid = get_global_id(0);
    if (gid >= nchunks) return;
    long j0 = gid * chunk;
    long j1 = min(j0 + chunk, inner);
    for (long u = 0; u < nu; ++u) {            /* update order: duplicates as the oracle */
        long off = 0;
        for (int t = 0; t < k; ++t) {          /* geo: axis sizes, then data strides */
            long nt = geo[t];
            $DECODE
            if ($BAD) { *rlx_err = err_code + $ERR; return; }
            off += v * geo[k + t];
        }
        for (long j = j0; j < j1; ++j) {
            $A a = acc[off + j];
            $A b = $ULOAD;
            acc[off + j] = $COMBINE;
        }
    }
}
"""

_SCATTER_ELEMENTS = """
__kernel void KNAME(__global $A* acc, __global const $UT* upd, __global const $IT* idx,
                    __global const long* geo, int rank, int axis, long nlines, long n_axis,
                    __global int* rlx_err, int err_code)
{
    long l = get_global_id(0);
    if (l >= nlines) return;
    long r = l, ib = 0, db = 0;
    for (int d = rank - 1; d >= 0; --d) {      /* geo: index dims, index/data strides */
        if (d == axis) continue;
        long dim = geo[d];
        long c = r % dim;
        r /= dim;
        ib += c * geo[rank + d];
        db += c * geo[2 * rank + d];
    }
    long m_n = geo[axis], ist = geo[rank + axis], dst = geo[2 * rank + axis];
    for (long m = 0; m < m_n; ++m) {           /* along the axis: row-major order */
        long p = ib + m * ist;
        $DECODE
        if ($BAD) { *rlx_err = err_code + $ERR; return; }
        long o = db + v * dst;
        $A a = acc[o];
        $A b = $ULOAD;
        acc[o] = $COMBINE;
    }
}
"""

_WIDEN = """
__kernel void KNAME(__global float* acc, __global const $ST* x, long n)
{
    long p = get_global_id(0);
    if (p < n) acc[p] = $LOAD;
}
"""

_NARROW = """
__kernel void KNAME(__global $ST* out, __global const float* acc, long n)
{
    long p = get_global_id(0);
    if (p < n) $STORE;
}
"""


def combine(reduction: str, dt: DType) -> str:
    """C expression combining ``a`` (what is there) with ``b`` (the update)."""
    if dt is DType.BOOL:            # on 0/1 bytes: or = max, and = min (numpy's bool ufuncs)
        reduction = {"Add": "Max", "Mul": "Min"}.get(reduction, reduction)
    a = VALUE_TYPE[dt]
    if reduction == "None":
        return "b"
    if dt.is_float:
        return {"Add": "a + b", "Mul": "a * b",
                "Max": "(b != b) ? a : ((a != a) ? b : (a >= b ? a : b))",
                "Min": "(b != b) ? a : ((a != a) ? b : (a <= b ? a : b))"}[reduction]
    return {"Add": f"({a})((ulong)a + (ulong)b)",        # wraps, as numpy's integers
            "Mul": f"({a})((ulong)a * (ulong)b)",
            "Max": "a >= b ? a : b", "Min": "a <= b ? a : b"}[reduction]


def _scatter_subs(dt: DType, idt: DType, reduction: str, i: str) -> dict:
    return {"A": VALUE_TYPE[dt], "UT": STORE_TYPE[dt], "IT": STORE_TYPE[idt],
            "ULOAD": load(dt, "upd", i), "COMBINE": combine(reduction, dt)}


def scatter_nd_kernel(dt: DType, idt: DType, reduction: str,
                      negative_ok: bool = True) -> tuple[str, str]:
    return _render(_SCATTER_ND, "rlx_scatter_nd",
                   **_scatter_subs(dt, idt, reduction, "u * inner + j"),
                   DECODE=decode("v", idt, "u * k + t", "nt", negative_ok), BAD=_bad("v", "nt"))


def scatter_elements_kernel(dt: DType, idt: DType, reduction: str) -> tuple[str, str]:
    return _render(_SCATTER_ELEMENTS, "rlx_scatter_el",
                   **_scatter_subs(dt, idt, reduction, "p"),
                   DECODE=decode("v", idt, "p", "n_axis", True), BAD=_bad("v", "n_axis"))


def widen_kernel(dt: DType) -> tuple[str, str]:
    """f16/bf16 → the f32 shadow a scatter combines in."""
    return _render(_WIDEN, "rlx_widen", ST=STORE_TYPE[dt], LOAD=load(dt, "x", "p"))


def narrow_kernel(dt: DType) -> tuple[str, str]:
    """The f32 shadow → f16/bf16, rounded once to nearest even."""
    store = ("vstore_half_rte(acc[p], p, out)" if dt is DType.F16 else
             "out[p] = rlx_bf16_bits(rlx_rnd_bf16(acc[p]))")
    return _render(_NARROW, "rlx_narrow", ST=STORE_TYPE[dt], STORE=store)
