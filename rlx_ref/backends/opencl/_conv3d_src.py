"""OpenCL C sources of Conv3d (direct, one output per work-item) and Interpolate3d.

Conv3d sums taps in the compute type (float for 16-bit floats, rounded once at the store)
with the geometry in a small int buffer, so one kernel serves every shape of a dtype.
Interpolate3d copies raw words, so every dtype runs exactly.
"""
from __future__ import annotations

from ...ir.dtype import DType
from ._kv_src import WORD
from ._linalg_cl import BUFFER, load, mac, named, store

# geo = C_in, D, H, W, C_out, Do, Ho, Wo, kD, kH, kW, sD, sH, sW, pD, pH, pW, dD, dH, dW, groups
_CONV = """
__kernel void {name}(__global {b}* out, __global const {b}* x, __global const {b}* w,
                     __global const int* geo, const long total)
{{
    const long o = get_global_id(0);
    if (o >= total) return;
    const int C = geo[0], D = geo[1], H = geo[2], W = geo[3], Co = geo[4];
    const int Do = geo[5], Ho = geo[6], Wo = geo[7], kD = geo[8], kH = geo[9], kW = geo[10];
    long r = o;
    const int ox = r % Wo; r /= Wo;
    const int oy = r % Ho; r /= Ho;
    const int oz = r % Do; r /= Do;
    const int co = r % Co;
    const long n = r / Co;
    const int cg = C / geo[20], g = co / (Co / geo[20]);
    {ct} acc = 0;
    for (int c = 0; c < cg; c++) {{
        const long xc = (n * C + (long)g * cg + c) * D;
        const long wc = ((long)co * cg + c) * kD;
        for (int a = 0; a < kD; a++) {{
            const int iz = oz * geo[11] - geo[14] + a * geo[17];
            if (iz < 0 || iz >= D) continue;
            for (int i = 0; i < kH; i++) {{
                const int iy = oy * geo[12] - geo[15] + i * geo[18];
                if (iy < 0 || iy >= H) continue;
                for (int j = 0; j < kW; j++) {{
                    const int ix = ox * geo[13] - geo[16] + j * geo[19];
                    if (ix < 0 || ix >= W) continue;
                    const long xi = ((xc + iz) * H + iy) * W + ix;
                    const long wi = ((wc + a) * kH + i) * kW + j;
                    acc = {mac};
                }}
            }}
        }}
    }}
    {store}
}}
"""

_INTERP = """
__kernel void {name}(__global {w}* out, __global const {w}* x, __global const long* geo,
                     const long total)
{{
    const long o = get_global_id(0);
    if (o >= total) return;
    const long D = geo[0], H = geo[1], W = geo[2], Do = geo[3], Ho = geo[4], Wo = geo[5];
    long r = o;
    const long ox = r % Wo; r /= Wo;
    const long oy = r % Ho; r /= Ho;
    const long oz = r % Do; r /= Do;
    /* src(o, L) = min(floor(o * L / L_out), L - 1), exact in integers */
    const long sz = min(oz * D / Do, D - 1), sy = min(oy * H / Ho, H - 1);
    const long sx = min(ox * W / Wo, W - 1);
    out[o] = x[((r * D + sz) * H + sy) * W + sx];
}}
"""


def conv3d_source(dt: DType) -> tuple[str, str]:
    """(name, source) of the direct Conv3d over ``dt``."""
    ct = "double" if dt is DType.F64 else "float"
    text = _CONV.format(name="{name}", b=BUFFER[dt], ct=ct,
                        mac=mac(load("x", "xi", dt, ct), load("w", "wi", dt, ct), "acc", ct),
                        store=store("out", "o", "acc", dt))
    name = named("conv3d", text)
    return name, text.replace("{name}", name)


def interpolate3d_source(size: int) -> tuple[str, str]:
    """(name, source) of the nearest Interpolate3d over elements of ``size`` bytes."""
    text = _INTERP.format(name="{name}", w=WORD[size])
    name = named("interp3d", text)
    return name, text.replace("{name}", name)
