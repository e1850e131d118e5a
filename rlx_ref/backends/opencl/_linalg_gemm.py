"""OpenCL C sources of the matrix-product kernels: the CPU register-tiled kernel, the GPU
local-memory kernel, the direct kernel for small products and the skinny one for a few
rows (packing: ``_linalg_pack``).

Packing writes an operand as panels ``[matrix][panel][Kp][W]`` of the compute type: W
consecutive rows (lhs) or columns (rhs) per step of k, zero-filled past the matrix edge,
so the product kernels read both operands sequentially and never bounds-check. On a CPU
W is the register tile (MR rows of lhs, NR columns of rhs) and Kp = K; on a GPU W is the
whole padded extent (one panel) and Kp is K rounded up to the k-tile: the lhs becomes
``Aᵀ`` padded, the rhs ``B`` padded. Where an element comes from is the packer's ``body``:
an offset table (MatMul, DotGeneral, conv weights) or an unfold of the conv input.

The CPU kernel is GotoBLAS's loop nest in one work-item: a macro tile of MCP × NCP
register tiles, k in blocks of KC so a KC × NR rhs panel stays in L1 while the lhs block
streams from L2, each MR × NR tile held in MR·NV float vectors (measured at 2048³ on PoCL
over 2 Zen cores: the kernel alone 166 GFLOP/s when the machine was quiet, numpy's sgemm
160-185; without k blocking 55-80). The output is the accumulator between k blocks, so
16-bit outputs take one block (KC = K).
"""
from __future__ import annotations

from ...ir.dtype import DType
from ._linalg_cl import BUFFER, COMPUTE, load, mac, named, store, vload

MR = 6                       # CPU register tile rows
NV = 2                       # CPU register tile: vectors per row
GPU_TK = 16                  # GPU k-tile
GPU_RT = 4                   # GPU: each work-item computes RT × RT outputs


def vec_width(ct: str) -> int:
    """Lanes of one 32-byte vector of ``ct`` (AVX2's width: 8 floats, 4 doubles)."""
    return 8 if ct in ("float", "uint") else 4


def accumulates_in_place(out_dt: DType) -> bool:
    """Whether the output buffer can hold partial sums between k blocks."""
    return out_dt in (DType.F32, DType.F64, DType.I32, DType.I64)


# ── CPU: register-tiled, cache-blocked ────────────────────────────────────

_CPU = """
__kernel void {name}(__global {cb}* C, const long c_off, __global const {ct}* S,
                     const long a_off, const long b_off, __global const long* ia,
                     __global const long* ib, const int M, const int N, const int K,
                     const int KC, const int MCP, const int NCP)
{{
    const int mp = (M + {mr} - 1) / {mr}, np_ = (N + {nr} - 1) / {nr};
    const int jt = get_global_id(0), it = get_global_id(1);
    const long bt = get_global_id(2);
    __global const {ct}* A = S + a_off + ia[bt] * ((long)mp * K * {mr});
    __global const {ct}* B = S + b_off + ib[bt] * ((long)np_ * K * {nr});
    __global {cb}* Cb = C + c_off + bt * ((long)M * N);
    const int j1 = min((jt + 1) * NCP, np_), i1 = min((it + 1) * MCP, mp);
    {ct} t[{mr} * {nr}];
    for (int k0 = 0; k0 < K; k0 += KC) {{
        const int kc = min(KC, K - k0);
        for (int jp = jt * NCP; jp < j1; jp++) {{
            for (int ip = it * MCP; ip < i1; ip++) {{
                const int m0 = ip * {mr}, n0 = jp * {nr};
                const int full = m0 + {mr} <= M && n0 + {nr} <= N;
                __global const {ct}* ap = A + ((long)ip * K + k0) * {mr};
                __global const {ct}* bp = B + ((long)jp * K + k0) * {nr};
                __global {cb}* cp = Cb + (long)m0 * N + n0;
{decl}
{load_c}
                for (int k = 0; k < kc; k++) {{
{step}
                    ap += {mr};
                    bp += {nr};
                }}
{store_c}
            }}
        }}
    }}
}}
"""


def cpu_source(out_dt: DType) -> tuple[str, str]:
    """(name, source) of the CPU product kernel writing ``out_dt``."""
    ct = COMPUTE[out_dt]
    vw = vec_width(ct)
    nr, vt = vw * NV, f"{ct}{vw}"
    accum = accumulates_in_place(out_dt)
    pad = " " * 16
    cells = [(r, v) for r in range(MR) for v in range(NV)]
    decl = pad + f"{vt} " + ", ".join(f"c{r}{v} = ({vt})0" for r, v in cells) + ";"
    step = [pad + "    " + " ".join(f"{vt} b{v} = vload{vw}({v}, bp);" for v in range(NV))]
    for r in range(MR):
        ups = " ".join(f"c{r}{v} = {mac('a', f'b{v}', f'c{r}{v}', ct)};" for v in range(NV))
        step.append(pad + f"    {{ {vt} a = ({vt})(ap[{r}]); {ups} }}")
    guard = f"m0 + q / {nr} < M && n0 + q % {nr} < N"
    at = f"(q / {nr}) * N + q % {nr}"
    from_t = " ".join(f"c{r}{v} = vload{vw}(0, t + {r * nr + v * vw});" for r, v in cells)
    to_t = " ".join(f"vstore{vw}(c{r}{v}, 0, t + {r * nr + v * vw});" for r, v in cells)
    loop = f"for (int q = 0; q < {MR * nr}; q++)"
    if accum:
        full_ld = " ".join(f"c{r}{v} = vload{vw}(0, cp + {r} * N + {v * vw});" for r, v in cells)
        full_st = " ".join(f"vstore{vw}(c{r}{v}, 0, cp + {r} * N + {v * vw});" for r, v in cells)
        load_c = (f"{pad}if (k0 > 0 && full) {{ {full_ld} }}\n"
                  f"{pad}else if (k0 > 0) {{\n{pad}    {loop} t[q] = ({guard}) ? cp[{at}] "
                  f": ({ct})0;\n{pad}    {from_t}\n{pad}}}")
        store_c = (f"{pad}if (full) {{ {full_st} }}\n{pad}else {{\n{pad}    {to_t}\n"
                   f"{pad}    {loop} if ({guard}) cp[{at}] = t[q];\n{pad}}}")
    else:
        load_c = ""
        store_c = (f"{pad}{to_t}\n{pad}{loop} if ({guard}) "
                   f"{{ {store('cp', at, 't[q]', out_dt)} }}")
    text = _CPU.format(name="{name}", cb=ct if accum else BUFFER[out_dt], ct=ct, mr=MR, nr=nr,
                       decl=decl, load_c=load_c, step="\n".join(step), store_c=store_c)
    name = named("mm_cpu", text)
    return name, text.replace("{name}", name)


# ── GPU: local-memory tiles ───────────────────────────────────────────────

_GPU = """
__kernel __attribute__((reqd_work_group_size({L}, {L}, 1)))
void {name}(__global {cb}* C, const long c_off, __global const {ct}* S, const long a_off,
            const long b_off, __global const long* ia, __global const long* ib,
            const int M, const int N, const int Mp, const int Np, const int Kp)
{{
    __local {ct} As[{tk} * {tm}];
    __local {ct} Bs[{tk} * {tm}];
    const int tx = get_local_id(0), ty = get_local_id(1);
    const int n0 = get_group_id(0) * {tm}, m0 = get_group_id(1) * {tm};
    const long bt = get_global_id(2);
    __global const {ct}* A = S + a_off + ia[bt] * ((long)Kp * Mp) + m0;
    __global const {ct}* B = S + b_off + ib[bt] * ((long)Kp * Np) + n0;
{decl}
    for (int k0 = 0; k0 < Kp; k0 += {tk}) {{
        for (int l = ty * {L} + tx; l < {tk} * {tm}; l += {L} * {L}) {{
            const int kk = l / {tm}, mm = l % {tm};
            As[l] = A[(long)(k0 + kk) * Mp + mm];
            Bs[l] = B[(long)(k0 + kk) * Np + mm];
        }}
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < {tk}; kk++) {{
{step}
        }}
        barrier(CLK_LOCAL_MEM_FENCE);
    }}
{store_c}
}}
"""


def gpu_source(out_dt: DType, L: int) -> tuple[str, str]:
    """(name, source) of the GPU product kernel for ``L`` × ``L`` work-groups."""
    ct, rt = COMPUTE[out_dt], GPU_RT
    tm = rt * L
    cells = [(i, j) for i in range(rt) for j in range(rt)]
    decl = f"    {ct} " + ", ".join(f"c{i}{j} = ({ct})0" for i, j in cells) + ";"
    step = ["            " + " ".join(
        f"const {ct} a{i} = As[kk * {tm} + ty + {i * L}];" for i in range(rt)),
        "            " + " ".join(
        f"const {ct} b{j} = Bs[kk * {tm} + tx + {j * L}];" for j in range(rt))]
    step += ["            " + " ".join(f"c{i}{j} = {mac(f'a{i}', f'b{j}', f'c{i}{j}', ct)};"
                                       for j in range(rt)) for i in range(rt)]
    st = []
    for i, j in cells:
        m, n = f"(m0 + ty + {i * L})", f"(n0 + tx + {j * L})"
        st.append(f"    if ({m} < M && {n} < N) "
                  f"{{ {store('C', f'c_off + (bt * M + {m}) * N + {n}', f'c{i}{j}', out_dt)} }}")
    text = _GPU.format(name="{name}", L=L, cb=BUFFER[out_dt], ct=ct, tk=GPU_TK, tm=tm,
                       decl=decl, step="\n".join(step), store_c="\n".join(st))
    name = named("mm_gpu", text)
    return name, text.replace("{name}", name)


# ── direct: one output per work-item through offset tables ────────────────

_DIRECT = """
__kernel void {name}(__global {cb}* C, __global const {ab}* A, __global const {ab}* B,
                     __global const long* tab, const int nb, const int M, const int N,
                     const int K)
{{
    const int n = get_global_id(0), m = get_global_id(1), b = get_global_id(2);
    if (n >= N || m >= M) return;
    const long ao = tab[b] + tab[nb + m];
    const long bo = tab[nb + M + K + b] + tab[2 * nb + M + 2 * K + n];
    __global const long* ak = tab + nb + M;
    __global const long* bk = tab + 2 * nb + M + K;
    {ct} acc = ({ct})0;
    for (int k = 0; k < K; k++) acc = {step};
    {store}
}}
"""


def direct_source(in_dt: DType, out_dt: DType) -> tuple[str, str]:
    """(name, source) of the small-product kernel; tab = [A batch | A rows | A k | B batch |
    B k | B cols] element offsets."""
    ct = COMPUTE[out_dt]
    step = mac(load("A", "ao + ak[k]", in_dt, ct), load("B", "bo + bk[k]", in_dt, ct), "acc", ct)
    text = _DIRECT.format(name="{name}", cb=BUFFER[out_dt], ab=BUFFER[in_dt], ct=ct, step=step,
                          store=store("C", "((long)b * M + m) * N + n", "acc", out_dt))
    name = named("mm_direct", text)
    return name, text.replace("{name}", name)


# ── skinny: a few lhs rows, operands read in place ────────────────────────

_SKINNY = """
__kernel void {name}(__global {cb}* C, __global const {ab}* A, __global const {ab}* B,
                     __global const long* ia, __global const long* ib, const int N,
                     const int K)
{{
    const int n0 = get_global_id(0) * {nr};
    const long bt = get_global_id(1);
    if (n0 >= N) return;
    __global const {ab}* Ab = A + ia[bt] * ((long){m} * K);
    __global const {ab}* Bb = B + ib[bt] * ((long)K * N) + n0;
    __global {cb}* Cb = C + bt * ((long){m} * N) + n0;
    {ct} t[{m} * {nr}];
    if (n0 + {nr} <= N) {{
{decl}
        for (int k = 0; k < K; k++) {{
{step}
        }}
{spill}
    }} else {{
        for (int q = 0; q < {m} * {nr}; q++) t[q] = ({ct})0;
        for (int k = 0; k < K; k++)
            for (int q = 0; q < {m} * {nr}; q++)
                if (n0 + q % {nr} < N)
                    t[q] = {tail};
    }}
    for (int q = 0; q < {m} * {nr}; q++)
        if (n0 + q % {nr} < N) {{ {store} }}
}}
"""


def skinny_vectors(m: int) -> int:
    """Vectors per rhs row of the skinny kernel: 8 accumulators in all (the rhs is read in
    runs as long as the registers allow: each row starts a new page)."""
    return max(2, 8 // m)


def skinny_source(dt: DType, m: int) -> tuple[str, str]:
    """(name, source) of the product of ``m`` (few) lhs rows: each work-item streams a run
    of rhs columns straight from its row-major source, no packing (a GEMV reads the rhs
    once, as it must)."""
    ct = COMPUTE[dt]
    vw, nv = vec_width(ct), skinny_vectors(m)
    nr, vt = vw * nv, f"{ct}{vw}"
    cells = [(r, v) for r in range(m) for v in range(nv)]
    pad = " " * 8
    decl = pad + f"{vt} " + ", ".join(f"c{r}{v} = ({vt})0" for r, v in cells) + ";"
    step = [pad + "    " + " ".join(
        f"const {vt} b{v} = {vload('Bb', f'(long)k * N + {v * vw}', dt, ct, vw)};"
        for v in range(nv))]
    for r in range(m):
        a = load("Ab", f"(long){r} * K + k", dt, ct)
        ups = " ".join(f"c{r}{v} = {mac('a', f'b{v}', f'c{r}{v}', ct)};" for v in range(nv))
        step.append(pad + f"    {{ const {vt} a = ({vt})({a}); {ups} }}")
    spill = pad + " ".join(f"vstore{vw}(c{r}{v}, 0, t + {r * nr + v * vw});"
                           for r, v in cells)
    tail = mac(load("Ab", f"(long)(q / {nr}) * K + k", dt, ct),
               load("Bb", f"(long)k * N + q % {nr}", dt, ct), "t[q]", ct)
    text = _SKINNY.format(name="{name}", cb=BUFFER[dt], ab=BUFFER[dt], ct=ct, m=m, nr=nr,
                          decl=decl, step="\n".join(step), spill=spill, tail=tail,
                          store=store("Cb", f"(long)(q / {nr}) * N + q % {nr}", "t[q]", dt))
    name = named("mm_skinny", text)
    return name, text.replace("{name}", name)
