"""OpenCL C sources of Fft: a direct DFT (any N) and radix-2 Stockham stages (N = 2^m).

Rows are read in RLX's layouts (the 2N real block for f32/f64, interleaved pairs for
C64); twiddles come from a host table of cos/sin(2π·m/N) in the accumulation type, read at
(j·k) mod N, so no angle is rounded on the device. Sums run in the accumulation type
(double where the device has fp64) and the norm's scale is applied once at the store.
"""
from __future__ import annotations

from ...ir.dtype import DType
from ._linalg_cl import named

_BUF = {DType.F32: "float", DType.F64: "double", DType.C64: "float2"}

# (re, im) of element j of row r, and the store of element k
_LAYOUT = {
    "block": ("x[r * 2 * n + {j}]", "x[r * 2 * n + n + {j}]",
              "out[r * 2 * n + {k}] = ({t})({re}); out[r * 2 * n + n + {k}] = ({t})({im});"),
    "pairs": ("x[r * n + {j}].x", "x[r * n + {j}].y",
              "out[r * n + {k}] = (float2)((float)({re}), (float)({im}));"),
}

_DIRECT = """
__kernel void {name}(__global {b}* out, __global const {b}* x, __global const {at}* tw,
                     const long rows, const long n, const {at} sign, const {at} scale)
{{
    const long o = get_global_id(0);
    if (o >= rows * n) return;
    const long r = o / n, k = o % n;
    {at} re = 0, im = 0;
    long m = 0;                    /* (j * k) mod n, stepped without overflow */
    for (long j = 0; j < n; j++) {{
        const {at} c = tw[2 * m], s = sign * tw[2 * m + 1];
        const {at} xr = {xr}, xi = {xi};
        re += xr * c - xi * s;
        im += xr * s + xi * c;
        m += k;
        if (m >= n) m -= n;
    }}
    {store}
}}
"""

# Stockham radix-2: stage with half-span l (1, 2, 4, ...), work-item per butterfly.
# Reads a [rows, n] (re, im) pair array, writes the next one; stage 0 reads the input
# layout and the last stage writes the output layout with the scale.
_STAGE = """
__kernel void {name}(__global {ob}* out, __global const {ib}* x, __global const {at}* tw,
                     const long rows, const long n, const long l, const {at} sign,
                     const {at} scale)
{{
    const long o = get_global_id(0);
    const long hn = n / 2;
    if (o >= rows * hn) return;
    const long r = o / hn, q = o % hn;
    const long j = q % l, g = q / l;          /* butterfly j of group g */
    const long m = j * (n / (2 * l));         /* twiddle exp(sign·2πi·j / 2l) */
    const {at} c = tw[2 * m], s = sign * tw[2 * m + 1];
    const long i0 = g * l + j, i1 = i0 + hn;
    const {at} ar = {ar}, ai = {ai}, br0 = {br}, bi0 = {bi};
    const {at} br = br0 * c - bi0 * s, bi = br0 * s + bi0 * c;
    const long d0 = g * 2 * l + j, d1 = d0 + l;
    {store0}
    {store1}
}}
"""


def _layout(dt: DType) -> str:
    return "pairs" if dt is DType.C64 else "block"


def direct_source(dt: DType, acc: str) -> tuple[str, str]:
    """(name, source) of the direct DFT over rows of ``dt``."""
    xr, xi, st = _LAYOUT[_layout(dt)]
    text = _DIRECT.format(name="{name}", b=_BUF[dt], at=acc, xr=xr.format(j="j"),
                          xi=xi.format(j="j"),
                          store=st.format(k="k", t=_BUF[dt], re="re * scale",
                                          im="im * scale"))
    name = named("fft_direct", text)
    return name, text.replace("{name}", name)


def _pair_io(i: str, k_store: str):
    load = (f"x[(r * n + {i}) * 2]", f"x[(r * n + {i}) * 2 + 1]")
    store = (f"out[(r * n + {k_store}) * 2] = {{re}}; "
             f"out[(r * n + {k_store}) * 2 + 1] = {{im}};")
    return load, store


def stage_source(dt: DType, acc: str, first: bool, last: bool) -> tuple[str, str]:
    """(name, source) of one Stockham stage (``first`` reads x's layout, ``last`` writes
    the output's, scaled); between stages rows are (re, im) pairs in the ``acc`` type."""
    xr, xi, st = _LAYOUT[_layout(dt)]
    if first:
        ar, ai, br, bi = (xr.format(j="i0"), xi.format(j="i0"), xr.format(j="i1"),
                          xi.format(j="i1"))
        ib = _BUF[dt]
    else:
        (ar, ai), _ = _pair_io("i0", "")
        (br, bi), _ = _pair_io("i1", "")
        ib = acc
    if last:
        s0 = st.format(k="d0", t=_BUF[dt], re="(ar + br) * scale", im="(ai + bi) * scale")
        s1 = st.format(k="d1", t=_BUF[dt], re="(ar - br) * scale", im="(ai - bi) * scale")
        ob = _BUF[dt]
    else:
        s0 = _pair_io("", "d0")[1].format(re="ar + br", im="ai + bi")
        s1 = _pair_io("", "d1")[1].format(re="ar - br", im="ai - bi")
        ob = acc
    text = _STAGE.format(name="{name}", ob=ob, ib=ib, at=acc, ar=ar, ai=ai, br=br, bi=bi,
                         store0=s0, store1=s1)
    name = named("fft_stage", text)
    return name, text.replace("{name}", name)


# Bluestein (chirp-z) for other long rows: a = x·w (w[j] = exp(sign·iπ·j²/N), j < N, zero
# padded to M = 2^m >= 2N - 1), A = FFT_M(a), C = A·B (B = FFT_M of the conjugate chirp,
# from the host), c = IFFT_M(C) by the same stages with the opposite sign, X[k] = w[k]·c[k]/M.
_CHIRP_IN = """
__kernel void {name}(__global {at}* out, __global const {b}* x, __global const {at}* w,
                     const long rows, const long n, const long m)
{{
    const long o = get_global_id(0);
    if (o >= rows * m) return;
    const long r = o / m, j = o % m;
    {at} re = 0, im = 0;
    if (j < n) {{
        const {at} xr = {xr}, xi = {xi}, c = w[2 * j], s = w[2 * j + 1];
        re = xr * c - xi * s;
        im = xr * s + xi * c;
    }}
    out[2 * o] = re;
    out[2 * o + 1] = im;
}}
"""

_POINTWISE = """
__kernel void {name}(__global {at}* a, __global const {at}* bf, const long rows, const long m)
{{
    const long o = get_global_id(0);
    if (o >= rows * m) return;
    const long j = o % m;
    const {at} ar = a[2 * o], ai = a[2 * o + 1], br = bf[2 * j], bi = bf[2 * j + 1];
    a[2 * o] = ar * br - ai * bi;
    a[2 * o + 1] = ar * bi + ai * br;
}}
"""

_CHIRP_OUT = """
__kernel void {name}(__global {b}* out, __global const {at}* cz, __global const {at}* w,
                     const long rows, const long n, const long m, const {at} scale)
{{
    const long o = get_global_id(0);
    if (o >= rows * n) return;
    const long r = o / n, k = o % n, i = r * m + k;
    const {at} cr = cz[2 * i], ci = cz[2 * i + 1], c = w[2 * k], s = w[2 * k + 1];
    const {at} re = cr * c - ci * s, im = cr * s + ci * c;
    {store}
}}
"""


def bluestein_sources(dt: DType, acc: str) -> list:
    """[(name, source)] of the chirp-in, pointwise product and chirp-out kernels."""
    xr, xi, st = _LAYOUT[_layout(dt)]
    out = []
    for stem, body, kw in (
            ("fft_chirp_in", _CHIRP_IN, dict(xr=xr.format(j="j"), xi=xi.format(j="j"))),
            ("fft_pointwise", _POINTWISE, {}),
            ("fft_chirp_out", _CHIRP_OUT, dict(store=st.format(
                k="k", t=_BUF[dt], re="re * scale", im="im * scale")))):
        text = body.format(name="{name}", b=_BUF[dt], at=acc, **kw)
        name = named(stem, text)
        out.append((name, text.replace("{name}", name)))
    return out
