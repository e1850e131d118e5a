"""OpenCL C sources of the operand packing kernels (see ``_linalg_gemm`` for the layout).

Two shapes of kernel: on a CPU a work-item writes one W-wide panel row (all W rows of lhs,
or columns of rhs, at one k), so index decoding (integer divisions, ~25 cycles each) is
done once per W elements and the source is read in runs; on a GPU a work-item writes one
element of the single padded panel. Where an element comes from is a ``body``: an offset
table (MatMul, DotGeneral, conv weights) or the unfold of a conv input (``im2col``, and
``convt``, its gather form for transposed convolutions).
"""
from __future__ import annotations

from ...ir.dtype import DType
from ._linalg_cl import BUFFER, load, named

_PARAMS = """__global {ct}* dst, const long dst_off, __global const {st}* src,
        __global const long* tab, __global const int* geo, const int b0, const int nb,
        const int F, const int K, const int W, const int P, const int Kp"""

# CPU: work-item (k, panel, matrix) writes dst[matrix][panel][k][0..W); consecutive
# work-items step along the source's contiguous axis (k, or the panel when the free index
# is the contiguous one), so the source is read in runs
_PANEL = """
__kernel void {name}(""" + _PARAMS + """)
{{
    const int k = get_global_id({kd}), p = get_global_id({pd}), b = get_global_id(2);
    if (k >= Kp || p >= P) return;
    __global {ct}* d = dst + dst_off + (((long)b * P + p) * Kp + k) * {w};
    const int f0 = p * {w};
{pre}
{start}
    for (int r = 0; r < {w}; r++) {{
        {ct} v = ({ct})0;
        if (f0 + r < F) {{
{body}
        }}
        d[r] = v;
{advance}
    }}
}}
"""

# GPU: work-item (f, k, matrix) writes dst[matrix][k][f] of the single padded panel
_FLAT = """
__kernel void {name}(""" + _PARAMS + """)
{{
    const int f = get_global_id(0), k = get_global_id(1), b = get_global_id(2);
    if (f >= W || k >= Kp) return;
    {ct} v = ({ct})0;
    if (f < F && k < K) {{
{pre}
{start}
{body}
    }}
    dst[dst_off + ((long)b * Kp + k) * W + f] = v;
}}
"""

_T = "        "
# element (matrix b, free index f, k) at tab[b] + tab[nb + f] + tab[nb + F + k]
_TABLE = {
    "pre": _T + "const long base = tab[b] + tab[nb + F + k];",
    "panel_start": "", "flat_start": "", "advance": "",
    "body": _T + "    v = {load};",
    "idx": {"panel": "base + tab[nb + f0 + r]", "flat": "base + tab[nb + f]",
            "unit": "base + tab[nb + f0] + r"},
}

# conv input unfold: b0 + b = image·G + group, k = (channel, ky, kx), f = output pixel;
# geo = G, C, H, W, channels per group, kh, kw, sh, sw, ph, pw, dh, dw, W_out
_CONV_PRE = _T + """const int G = geo[0], H = geo[2], Wd = geo[3], kh = geo[5], kw = geo[6];
        const int Wo = geo[13], bb = b0 + b;
        const int j = k % kw, i = (k / kw) % kh, c = k / (kw * kh);
        const long plane = ((long)(bb / G) * geo[1] + (bb % G) * geo[4] + c) * H;"""
_CONV_START = {"panel": _T + "int oy = f0 / Wo, ox = f0 % Wo;",
               "flat": _T + "const int oy = f / Wo, ox = f % Wo;"}
_CONV_ADVANCE = _T + "if (++ox == Wo) { ox = 0; oy++; }"
_IM2COL_BODY = _T + """    const int iy = oy * geo[7] - geo[9] + i * geo[11];
            const int ix = ox * geo[8] - geo[10] + j * geo[12];
            if (iy >= 0 && iy < H && ix >= 0 && ix < Wd) v = {load};"""
# transposed conv: output pixel (oy, ox) takes tap (i, j) of input (iy, ix) when
# iy·sh + i·dh - ph = oy (and likewise x): the gather form of the scatter
_CONVT_BODY = _T + """    const int ty = oy + geo[9] - i * geo[11];
            const int tx = ox + geo[10] - j * geo[12];
            if (ty >= 0 && tx >= 0 && ty % geo[7] == 0 && tx % geo[8] == 0) {{
                const int iy = ty / geo[7], ix = tx / geo[8];
                if (iy < H && ix < Wd) v = {load};
            }}"""
_CONV_IDX = "(plane + iy) * Wd + ix"


def _conv(body: str) -> dict:
    return {"pre": _CONV_PRE, "panel_start": _CONV_START["panel"],
            "flat_start": _CONV_START["flat"], "advance": _CONV_ADVANCE, "body": body,
            "idx": {"panel": _CONV_IDX, "flat": _CONV_IDX}}


BODIES = {"table": _TABLE, "im2col": _conv(_IM2COL_BODY), "convt": _conv(_CONVT_BODY)}


def pack_source(kind: str, src_dt: DType, ct: str, panel: int | None,
                free_fast: bool = False, unit: bool = False) -> tuple[str, str]:
    """(name, source) of the ``kind`` packing kernel: CPU panels ``panel`` wide (work-item
    dim 0 runs over panels when ``free_fast``, else over k; ``unit``: a table whose free
    offsets step by 1, read as runs), or the GPU's single padded panel (``panel`` None)."""
    parts = BODIES[kind]
    mode = "flat" if panel is None else "panel"
    idx = parts["idx"]["unit" if unit and mode == "panel" else mode]
    body = parts["body"].format(load=load("src", idx, src_dt, ct))
    if mode == "flat":   # the body's f is the kernel's; the panel form names it f0 + r
        text = _FLAT.format(name="{name}", ct=ct, st=BUFFER[src_dt], pre=parts["pre"],
                            start=parts["flat_start"], body=body)
    else:
        text = _PANEL.format(name="{name}", ct=ct, st=BUFFER[src_dt], w=panel,
                             kd=int(free_fast), pd=int(not free_fast),
                             pre=parts["pre"], start=parts["panel_start"], body=body,
                             advance=parts["advance"])
    name = named("pack", text)
    return name, text.replace("{name}", name)
