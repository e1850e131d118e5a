"""OpenCL C sources of the direct conv-family kernels: Pool and Im2Col (one work-item per
output element; window geometry comes in a small int buffer so one kernel serves every
geometry of a dtype)."""
from __future__ import annotations

from ...ir.dtype import DType
from ._linalg_cl import BUFFER, load, named, store

# geo = D, H, W, D_out, H_out, W_out, kd, kh, kw, sd, sh, sw, pd, ph, pw (2-D: D = kd = 1)
_POOL = """
__kernel void {name}(__global {ob}* out, __global const {ib}* x, __global const int* geo,
                     const long total)
{{
    const long o = get_global_id(0);
    if (o >= total) return;
    const int D = geo[0], H = geo[1], W = geo[2], Do = geo[3], Ho = geo[4], Wo = geo[5];
    long r = o;
    const int ox = r % Wo; r /= Wo;
    const int oy = r % Ho; r /= Ho;
    const int oz = r % Do; r /= Do;
    const long base = r * D * H * W;
    {ct} acc = {init};
    for (int a = 0; a < geo[6]; a++) {{
        const int iz = oz * geo[9] - geo[12] + a;
        if (iz < 0 || iz >= D) continue;
        for (int i = 0; i < geo[7]; i++) {{
            const int iy = oy * geo[10] - geo[13] + i;
            if (iy < 0 || iy >= H) continue;
            for (int j = 0; j < geo[8]; j++) {{
                const int ix = ox * geo[11] - geo[14] + j;
                if (ix < 0 || ix >= W) continue;
                const {ct} v = {load};
                {combine}
            }}
        }}
    }}
    {finish}
    {store}
}}
"""

# padding is skipped by every kind; Mean divides by the full window (count_include_pad);
# Max/Min keep the first NaN they meet (v > NaN is false, so a NaN accumulator stays)
POOL_OPS = {
    "Max": ("-INFINITY", "acc = (v > acc || isnan(v)) ? v : acc;", ""),
    "Min": ("INFINITY", "acc = (v < acc || isnan(v)) ? v : acc;", ""),
    "Sum": ("0", "acc += v;", ""),
    "Mean": ("0", "acc += v;", "acc = acc / ({ct})(geo[6] * geo[7] * geo[8]);"),
    "Prod": ("1", "acc *= v;", ""),
}


def pool_source(dt: DType, kind: str) -> tuple[str, str]:
    """(name, source) of the ``kind`` pool over ``dt`` (16-bit floats reduce in float)."""
    ct = "double" if dt is DType.F64 else "float"
    init, combine, finish = POOL_OPS[kind]
    idx = "base + ((long)iz * H + iy) * W + ix"
    text = _POOL.format(name="{name}", ob=BUFFER[dt], ib=BUFFER[dt], ct=ct,
                        init=f"({ct}){init}", load=load("x", idx, dt, ct), combine=combine,
                        finish=finish.format(ct=ct), store=store("out", "o", "acc", dt))
    name = named("pool", text)
    return name, text.replace("{name}", name)


# geo = C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, H_out, W_out
_IM2COL = """
__kernel void {name}(__global {t}* out, __global const {t}* x, __global const int* geo,
                     const long total)
{{
    const long o = get_global_id(0);
    if (o >= total) return;
    const int C = geo[0], H = geo[1], W = geo[2], kh = geo[3], kw = geo[4];
    const long cols = (long)C * kh * kw;
    const long row = o / cols;
    const int col = (int)(o % cols);
    const int j = col % kw, i = (col / kw) % kh, c = col / (kw * kh);
    const int wo = (int)(row % geo[12]);
    const long t = row / geo[12];
    const int ho = (int)(t % geo[11]);
    const long n = t / geo[11];
    const int iy = ho * geo[5] - geo[7] + i * geo[9], ix = wo * geo[6] - geo[8] + j * geo[10];
    {t} v = 0;
    if (iy >= 0 && iy < H && ix >= 0 && ix < W) v = x[((n * C + c) * H + iy) * W + ix];
    out[o] = v;
}}
"""

_BITS = {2: "ushort", 4: "uint", 8: "ulong"}


def im2col_source(dt: DType) -> tuple[str, str]:
    """(name, source) of Im2Col for ``dt``: values move as raw bits (exact for every dtype)."""
    text = _IM2COL.format(name="{name}", t=_BITS[dt.size_bytes])
    name = named("im2col", text)
    return name, text.replace("{name}", name)
