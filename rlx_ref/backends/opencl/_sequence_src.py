"""OpenCL C sources of SelectiveScan, Mamba2 and GatedDeltaNet: one lane per work-item.

A lane (batch × channel; batch × head × head-dim for Mamba2; batch × head for
GatedDeltaNet) walks every time step in one launch, its state in the accumulation type
(double where the device has fp64). SelectiveScan and Mamba2 keep the N-wide state in a
private array when N is small and in global scratch otherwise; GatedDeltaNet's n × n state
is always in global scratch. Each output is rounded once, when stored.
"""
from __future__ import annotations

from ...ir.dtype import DType
from ._linalg_cl import named

PRIVATE_MAX = 64          # widest state kept in a private array

_S6 = """
__kernel void {name}(__global {t}* out, __global const {t}* x, __global const {t}* delta,
                     __global const {t}* a, __global const {t}* b, __global const {t}* c,
                     __global {at}* scratch, const long bt, const long sq, const long hd)
{{
    const long lane = get_global_id(0);
    if (lane >= bt * hd) return;
    const long bi = lane / hd, d = lane % hd;
    {decl}
    for (int k = 0; k < {n}; k++) H(k) = 0;
    for (long t = 0; t < sq; t++) {{
        const long row = (bi * sq + t) * hd + d, bc = (bi * sq + t) * {n};
        const {at} dl = delta[row], xv = x[row];
        {at} acc = 0;
        for (int k = 0; k < {n}; k++) {{
            H(k) = exp(dl * ({at})a[d * {n} + k]) * H(k) + dl * ({at})b[bc + k] * xv;
            acc += ({at})c[bc + k] * H(k);
        }}
        out[row] = ({t})acc;
    }}
}}
"""

_SSD = """
__kernel void {name}(__global {t}* out, __global const {t}* x, __global const {t}* dts,
                     __global const {t}* a, __global const {t}* b, __global const {t}* c,
                     __global {at}* scratch, const long bt, const long sq, const long hd,
                     const long p)
{{
    const long lane = get_global_id(0);
    if (lane >= bt * hd * p) return;
    const long bi = lane / (hd * p), hh = (lane / p) % hd, pp = lane % p;
    {decl}
    for (int k = 0; k < {n}; k++) H(k) = 0;
    for (long t = 0; t < sq; t++) {{
        const long bh = (bi * sq + t) * hd + hh;
        const {at} dv = dts[bh];
        const {at} decay = exp(dv * ({at})a[hh]), u = dv * ({at})x[bh * p + pp];
        {at} acc = 0;
        for (int k = 0; k < {n}; k++) {{
            H(k) = decay * H(k) + u * ({at})b[bh * {n} + k];
            acc += H(k) * ({at})c[bh * {n} + k];
        }}
        out[bh * p + pp] = ({t})acc;
    }}
}}
"""

# S[i, j] at s[i * n + j]; sk (the delta row) after the n * n state
_GDN = """
__kernel void {name}(__global {t}* out, __global const {t}* q, __global const {t}* k,
                     __global const {t}* v, __global const {t}* g, __global const {t}* beta,
                     __global const {t}* state, __global {at}* scratch, const long bt,
                     const long sq, const long hd, const int carry, const int gw,
                     const {at} scale)
{{
    const long lane = get_global_id(0);
    if (lane >= bt * hd) return;
    const int n = {n};
    __global {at}* s = scratch + lane * (n * n + n);
    __global {at}* sk = s + n * n;
    for (int i = 0; i < n * n; i++) s[i] = carry ? ({at})state[lane * n * n + i] : 0;
    for (long t = 0; t < sq; t++) {{
        const long bh = (lane / hd * sq + t) * hd + lane % hd, row = bh * n;
        for (int i = 0; i < n; i++) {{
            const {at} e = exp(({at})g[bh * gw + (gw > 1 ? i : 0)]);
            for (int j = 0; j < n; j++) s[i * n + j] *= e;
        }}
        const {at} bv = beta[bh];
        for (int j = 0; j < n; j++) {{
            {at} acc = 0;
            for (int i = 0; i < n; i++) acc += s[i * n + j] * ({at})k[row + i];
            sk[j] = (({at})v[row + j] - acc) * bv;
        }}
        for (int i = 0; i < n; i++) {{
            const {at} ki = k[row + i];
            for (int j = 0; j < n; j++) s[i * n + j] += ki * sk[j];
        }}
        for (int j = 0; j < n; j++) {{
            {at} acc = 0;
            for (int i = 0; i < n; i++) acc += s[i * n + j] * ({at})q[row + i];
            out[row + j] = ({t})(acc * scale);
        }}
    }}
}}
"""

_TYPE = {DType.F32: "float", DType.F64: "double"}


def private_state(n: int) -> bool:
    """Whether an N-wide state fits a private array (else it lives in scratch)."""
    return n <= PRIVATE_MAX


def _finish(stem: str, body: str, dt: DType, acc: str, n: int) -> tuple[str, str]:
    if private_state(n):
        decl = f"{acc} h[{max(n, 1)}];\n    #define H(k) h[k]"
    else:
        decl = f"__global {acc}* h = scratch + lane * {n};\n    #define H(k) h[k]"
    text = body.format(name="{name}", t=_TYPE[dt], at=acc, n=n, decl=decl) + "#undef H\n"
    name = named(stem, text)
    return name, text.replace("{name}", name)


def selective_scan_source(dt: DType, acc: str, n: int) -> tuple[str, str]:
    """(name, source) of SelectiveScan over ``dt`` with state width ``n``."""
    return _finish("selective_scan", _S6, dt, acc, n)


def mamba2_source(dt: DType, acc: str, n: int) -> tuple[str, str]:
    """(name, source) of Mamba2 over ``dt`` with state width ``n``."""
    return _finish("mamba2", _SSD, dt, acc, n)


def gated_delta_net_source(dt: DType, acc: str, n: int) -> tuple[str, str]:
    """(name, source) of GatedDeltaNet over ``dt`` with state width ``n``."""
    text = _GDN.format(name="{name}", t=_TYPE[dt], at=acc, n=n)
    name = named("gated_delta_net", text)
    return name, text.replace("{name}", name)
