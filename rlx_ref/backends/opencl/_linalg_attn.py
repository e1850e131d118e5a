"""OpenCL C source of the Attention kernel: one work-item per (batch, head, R query rows),
an online (running-max) softmax over blocks of KB keys, so no score matrix is stored.

Per block the R rows share one read of its K and V rows, each row scores the block into
one vector and exponentiates it with one vector exp (the scalar exp per score cost a
third of the time). The semantics are the reference's, step by step: scores are scaled,
the Bias added, the softcap applied, then hidden keys are SET to the -1e9 fill (so a row
that sees no key averages V) and the softmax weights V. The running form keeps IEEE's
answers: a key's weight is ``exp(s - m)`` against the running max m (0 while m is -inf:
every score so far is -inf), the accumulators rescale by ``exp(m_old - m_new)`` only when
m changes, and a NaN or +inf score poisons its row as the reference's ``exp(s - max)``
does; a row whose every score is -inf is NaN, as there. Lanes past the last key score
-inf and carry zero V rows, so they add exactly nothing.
"""
from __future__ import annotations

from ...ir.dtype import DType
from ..codegen.literal import c_literal
from ._linalg_cl import BUFFER, load, named, store, vload

MASK_CODES = {"None": 0, "Causal": 1, "SlidingWindow": 2, "Custom": 3, "Bias": 4}
FILL = -1e9

# One block of keys: kjs[e] is the key of lane e (-1 past the end); kb/vb its K/V rows.
_BLOCK = """
        for (int e = 0; e < {KB}; e++) {{
            const long kj = kjs[e] < 0 ? 0 : kjs[e];
            const long ko = b * geo[9] + hk * geo[10] + kj * geo[11];
            const long vo = b * geo[12] + hk * geo[13] + kj * geo[14];
            for (int d = 0; d < {DN}; d++) kb[e][d] = {load_k};
            for (int c = 0; c < {DVN}; c++) vb[e][c] = kjs[e] < 0 ? ({vt})0 : {load_v};
        }}
        for (int r = 0; r < {R}; r++) {{
            const long qi = q0 + r < Sq ? q0 + r : Sq - 1;
            const long apos = shift + qi;
            {ct} sc[{KB}];
            for (int e = 0; e < {KB}; e++) {{
                const long kj = kjs[e];
                {ct} s = -INFINITY;
                {hide}if (kj >= 0) {{
                    {vt} acc = ({vt})0;
                    for (int d = 0; d < {DN}; d++) acc = fma(q[r][d], kb[e][d], acc);
{dot}
                    s = dotv * scale;
{adjust}
                }}
                sc[e] = s;
            }}
            {ct} mb = sc[0];
            for (int e = 1; e < {KB}; e++) mb = (sc[e] > mb || isnan(sc[e])) ? sc[e] : mb;
            const {ct} mo = m[r];
            const {ct} mn = (mb > mo || isnan(mb)) ? mb : mo;
            if (mn != mo) {{
                const {ct} corr = exp(mo - mn);
                l[r] *= corr;
                for (int c = 0; c < {DVN}; c++) o[r][c] *= corr;
                m[r] = mn;
            }}
            const {st} pv = mn == -INFINITY ? ({st})0 : exp({load_sc} - ({st})mn);
{psum}
            l[r] += psum;
            {ct} pw[{KB}];
            {store_pv}
            for (int e = 0; e < {KB}; e++) {{
                const {vt} pe = ({vt})(pw[e]);
                for (int c = 0; c < {DVN}; c++) o[r][c] = fma(pe, vb[e][c], o[r][c]);
            }}
        }}
"""

# geo = B, H, H_kv, S_q, S_k, window, then (batch, head, position) strides of Q, K, V, out;
# head vectors live in private arrays of VT (vectors of VW lanes)
_ATTN = """
__kernel void {name}(__global {ob}* out, __global const {ib}* Q, __global const {ib}* Kx,
                     __global const {ib}* V, __global const {mb}* mask,
                     __global const long* geo, const {ct} scale, const {ct} cap)
{{
    const long Hn = geo[1], Hkv = geo[2], Sq = geo[3], Sk = geo[4], win = geo[5];
    const long tiles = (Sq + {R} - 1) / {R};
    const long gid = get_global_id(0);
    if (gid >= geo[0] * Hn * tiles) return;
    const long t = gid % tiles, h = (gid / tiles) % Hn, b = gid / (tiles * Hn);
    const long hk = h / (Hn / Hkv), q0 = t * {R};
    const long shift = Sk > Sq ? Sk - Sq : 0;
    {vt} q[{R}][{DN}], o[{R}][{DVN}], kb[{KB}][{DN}], vb[{KB}][{DVN}];
    {ct} m[{R}], l[{R}];
    for (int r = 0; r < {R}; r++) {{
        const long qi = q0 + r < Sq ? q0 + r : Sq - 1;
        const long qo = b * geo[6] + h * geo[7] + qi * geo[8];
        for (int d = 0; d < {DN}; d++) q[r][d] = {load_q};
        for (int c = 0; c < {DVN}; c++) o[r][c] = ({vt})0;
        m[r] = -INFINITY;
        l[r] = ({ct})0;
    }}
    long klo = 0, khi = Sk;             /* keys some row of the tile may see */
{window}
    /* Those come first; the others are hidden from every row: weight exp(-1e9 - m) is
       exactly 0 once each row's max is far above the fill, and then they only add 0·v,
       which matters when v is not finite (NaN, as the reference's 0·inf): sum those
       alone. */
    const long nvis = khi - klo;
    int far = 0, checked = 0;
    {vt} zero_v[{DVN}];
    for (int c = 0; c < {DVN}; c++) zero_v[c] = ({vt})0;
    for (long it0 = 0; it0 < Sk; it0 += {KB}) {{
        long kjs[{KB}];
        for (int e = 0; e < {KB}; e++) {{
            const long it = it0 + e;
            kjs[e] = it >= Sk ? -1 : (it < nvis ? klo + it : (it - nvis < klo ? it - nvis : it));
        }}
        if (it0 >= nvis && !checked) {{
            checked = far = 1;
            for (int r = 0; r < {R}; r++) far = far && m[r] - {fill} > ({ct})800;
        }}
        if (far) {{
            for (int e = 0; e < {KB} && kjs[e] >= 0; e++) {{
                const long vo = b * geo[12] + hk * geo[13] + kjs[e] * geo[14];
                for (int c = 0; c < {DVN}; c++) zero_v[c] = fma(({vt})0, {load_v}, zero_v[c]);
            }}
            continue;
        }}
{block}
    }}
    for (int r = 0; r < {R}; r++)
        for (int c = 0; c < {DVN}; c++) o[r][c] += zero_v[c];
    {ct} lanes[{VW}];
    for (int r = 0; r < {R} && q0 + r < Sq; r++) {{
        const long oo = b * geo[15] + h * geo[16] + (q0 + r) * geo[17];
        const {ct} inv = m[r] == -INFINITY ? ({ct})NAN : ({ct})1 / l[r];
        for (int c = 0; c < {DVN}; c++) {{
            {spill}
            for (int e = 0; e < {VW}; e++) {{ {store_o} }}
        }}
    }}
}}
"""


def _hsum(ct: str, vw: int, x: str, out: str, pad: str) -> str:
    """C statements: ``out``, the sum of the lanes of vector ``x`` (pairwise)."""
    lines, src = [], x
    while vw > 2:
        vw //= 2
        lines.append(f"{pad}const {ct}{vw} {out}{vw} = {src}.lo + {src}.hi;")
        src = f"{out}{vw}"
    total = f"{src}.x + {src}.y" if vw == 2 else src
    return "\n".join(lines + [f"{pad}const {ct} {out} = {total};"])


def _width(ct: str, d: int, dv: int) -> int:
    """The widest vector (at most 32 bytes) whose lane count divides both head widths."""
    for vw in ((8, 4, 2) if ct == "float" else (4, 2)):
        if d % vw == 0 and dv % vw == 0:
            return vw
    return 1


def _window(mask_code: int, rows: int) -> str:
    """C statements narrowing [klo, khi) to the keys a causal or sliding window shows."""
    if mask_code not in (1, 2):
        return ""
    text = (f"    const long last = q0 + {rows - 1} < Sq ? q0 + {rows - 1} : Sq - 1;\n"
            "    khi = shift + last + 1 < Sk ? shift + last + 1 : Sk;")
    if mask_code == 2:
        text += ("\n    klo = shift + q0 - win > 0 ? shift + q0 - win : 0;\n"
                 "    if (klo > khi) klo = khi;")
    return text


def _fill(ct: str) -> str:
    """The score a hidden key gets, as a literal of the compute type ``ct``."""
    return c_literal(FILL, DType.F64 if ct == "double" else DType.F32)


def _hide(mask_code: int, mask_dt, ct: str) -> str:
    """C: the start of an if-chain setting hidden keys' scores to the fill (qi's absolute
    position is apos), or nothing when no key is hidden."""
    if mask_code == 1:
        cond = "kj > apos"
    elif mask_code == 2:
        cond = "kj > apos || kj < apos - win"
    elif mask_code == 3:    # NaN < 0.5 is false: a NaN mask value keeps its key
        cond = load("mask", "b * Sk + kj", mask_dt, ct) + f" < ({ct})0.5"
    else:
        return ""
    return f"if (kj >= 0 && ({cond})) s = {_fill(ct)};\n                else "


def attention_source(dt: DType, mask_code: int, mask_dt, softcap: bool, d: int, dv: int,
                     rows: int, keys: int) -> tuple[str, str]:
    """(name, source) of Attention for Q/K/V of ``dt`` (the output's dtype), ``rows`` query
    rows per work-item and blocks of ``keys`` keys (1, or the vector exp's lanes)."""
    ct = "double" if dt is DType.F64 else "float"
    adjust = []
    pad = " " * 20
    if mask_code == 4:      # the bias is rounded to the working dtype, then added
        adjust.append(pad + "s += " + load("mask", "((b * Hn + h) * Sq + qi) * Sk + kj",
                                           mask_dt, ct) + ";")
    if softcap:
        sfx = "d" if ct == "double" else "f"
        adjust.append(pad + f"s = cap * rlx_tanh_{sfx}(s / cap);")
    vw = _width(ct, d, dv)
    vt = ct if vw == 1 else f"{ct}{vw}"
    st = ct if keys == 1 else f"{ct}{keys}"
    fields = {
        "ob": BUFFER[dt], "ib": BUFFER[dt], "ct": ct, "vt": vt, "st": st, "VW": vw,
        "KB": keys, "R": rows, "DN": d // vw, "DVN": dv // vw, "fill": _fill(ct),
        "mb": BUFFER[mask_dt] if mask_dt is not None else "int",
        "window": _window(mask_code, rows),
        "load_q": vload("Q", f"qo + d * {vw}", dt, ct, vw),
        "load_k": vload("Kx", f"ko + d * {vw}", dt, ct, vw),
        "load_v": vload("V", f"vo + c * {vw}", dt, ct, vw),
        "hide": _hide(mask_code, mask_dt, ct), "adjust": "\n".join(adjust),
        "dot": _hsum(ct, vw, "acc", "dotv", pad),
        "load_sc": "sc[0]" if keys == 1 else f"vload{keys}(0, sc)",
        "psum": _hsum(ct, keys, "pv", "psum", " " * 12),
        "store_pv": "pw[0] = pv;" if keys == 1 else f"vstore{keys}(pv, 0, pw);",
        "spill": ("lanes[0] = o[r][c] * inv;" if vw == 1 else
                  f"vstore{vw}(o[r][c] * inv, 0, lanes);"),
        "store_o": store("out", f"oo + c * {vw} + e", "lanes[e]", dt)}
    text = _ATTN.format(name="{name}", block=_BLOCK.format(**fields), **fields)
    name = named("attn", text)
    return name, text.replace("{name}", name)
