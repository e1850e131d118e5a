"""OpenCL C sources of SelectiveScan, Mamba2 and GatedDeltaNet: one lane per work-item.

A lane (batch × channel; batch × head × head-dim for Mamba2; batch × head × column for
GatedDeltaNet) walks every time step in one launch, its state in the accumulation type
(double where the device has fp64): an N-wide vector (GatedDeltaNet: one column of S),
kept in a private array when N is small and in global scratch otherwise. Each output is
rounded once, when stored.
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

# a work-item owns column j of one (batch, head)'s S: every update of the delta rule reads
# and writes only S[:, j] (k, q, v, g and beta are shared reads), so the column stays in
# private memory across the whole sequence
_GDN = """
__kernel void {name}(__global {t}* out, __global const {t}* q, __global const {t}* k,
                     __global const {t}* v, __global const {t}* g, __global const {t}* beta,
                     __global const {t}* state, __global {at}* scratch, const long bt,
                     const long sq, const long hd, const int carry, const int gw,
                     const {at} scale)
{{
    const long lane = get_global_id(0);
    if (lane >= bt * hd * {n}) return;
    const int j = lane % {n};
    const long bh0 = lane / {n}, bi = bh0 / hd, hh = bh0 % hd;
    {decl}
    for (int i = 0; i < {n}; i++) H(i) = carry ? ({at})state[(bh0 * {n} + i) * {n} + j] : 0;
    for (long t = 0; t < sq; t++) {{
        const long bh = (bi * sq + t) * hd + hh, row = bh * {n};
        const {at} e0 = exp(({at})g[bh * gw]);
        for (int i = 0; i < {n}; i++) H(i) *= gw > 1 ? exp(({at})g[bh * gw + i]) : e0;
        {at} acc = 0;
        for (int i = 0; i < {n}; i++) acc += H(i) * ({at})k[row + i];
        const {at} d = (({at})v[row + j] - acc) * ({at})beta[bh];
        for (int i = 0; i < {n}; i++) H(i) += ({at})k[row + i] * d;
        acc = 0;
        for (int i = 0; i < {n}; i++) acc += H(i) * ({at})q[row + i];
        out[row + j] = ({t})(acc * scale);
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
    """(name, source) of GatedDeltaNet over ``dt`` with state width ``n`` (a column of S
    per work-item)."""
    return _finish("gated_delta_net", _GDN, dt, acc, n)
