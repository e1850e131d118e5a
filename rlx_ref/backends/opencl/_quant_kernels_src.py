"""OpenCL C sources of the fused dequant kernels: the weight is decoded sub-block by
sub-block (``_quant_decode_src``) inside the product loop, never written out as f32.

The weight W is ``[n, k]`` row-major GGUF blocks over the flat element index; with k a
multiple of 32, output row j of W covers sub-blocks ``j·k/32 .. (j+1)·k/32`` whether or
not k is a multiple of the block size (a 256-element block may straddle two rows: its
sub-blocks do not). So every kernel but the last walks flat sub-block indices g, block
``g >> QNSL`` and sub-block ``g & (QNS - 1)``:

- gemv_cpu: one work-item per W row, QM (≤ 4) x rows, float16 accumulators; rows of
  whole blocks walk block by block with constant sub-block indices, so a block's scales
  are unpacked once;
- gemv_gpu: one work-group per W row, its work-items striding over the row's sub-blocks,
  partial sums reduced in local memory;
- tiled_cpu: a work-item owns QTN W rows and every x panel of a chunk (QV x rows per
  panel, a vector lane per row, written k-major by ``pack_cpu``): each QKC-long piece of
  its W rows is decoded once into private memory, then multiplied with every panel by an
  outer-product step (one x vector load, QTN FMAs with the weight broadcast from memory),
  so a weight block is decoded once per chunk of up to QP·QV x rows;
- tiled_gpu: a QL × QL work-group decodes QT W rows' sub-block into local memory once,
  loads QT x rows beside it, and each work-item keeps a QR × QR register tile;
- straddle: k not a multiple of 32 (sub-blocks straddle rows): scalar, 4 x rows per item;
- dequant: packed -> f32, flat or, per expert slab, transposed to ``[k, n]``.

x rows are read through ``QROW(i)``: ``r0 + i``, or ``rows[r0 + i]`` when QIND is set (the
grouped product's token permutation, so gathering and unpermuting cost no pass).
"""
from __future__ import annotations

import hashlib
from string import Template

from ._quant_decode_src import Decoder, decode_source

QKC = 256                    # CPU tiled: k per decoded chunk (a multiple of every block)

_ROW = """#if QIND
#define QROW(i) ((long)rows[r0 + (i)])
#else
#define QROW(i) ((long)(r0 + (i)))
#endif
#define QNS (1 << QNSL)
#define QSUB(g, w0, w1) QD(wb + ((g) >> QNSL) * QBB, (int)((g) & (QNS - 1)), w0, w1)
"""
_ARGS = ("__global float* out, __global const float* x, __global const uchar* w, "
         "const long w_off, __global const int* rows, const int r0")

_GEMV_CPU = Template("""
__kernel void KNAME($args, const int n, const int k)
{
    const int j = get_global_id(0);
    if (j >= n) return;
    __global const uchar* wb = w + w_off;
$xptrs
$decl
    if (k % QBS == 0) {         /* rows of whole blocks: constant sub-block indices */
        const long kb = k / QBS;
        __global const uchar* wr = wb + (long)j * kb * QBB;
        for (long i = 0; i < kb; i++, wr += QBB) {
            const long xo = i * QBS;
            #pragma unroll
            for (int s = 0; s < QNS; s++) {
                float16 w0, w1;
                QD(wr, s, &w0, &w1);
$bstep
            }
        }
    } else {
        const long ks = k >> 5, g0 = (long)j * ks;
        for (long g = 0; g < ks; g++) {
            float16 w0, w1;
            QSUB(g0 + g, &w0, &w1);
$fstep
        }
    }
$store
}
""")

_GEMV_GPU = Template("""
__kernel __attribute__((reqd_work_group_size(QL, 1, 1)))
void KNAME($args, const int n, const int k)
{
    __local float red[QM * QL];
    const int j = get_group_id(0), t = get_local_id(0);
    const long ks = k >> 5, g0 = (long)j * ks;
    __global const uchar* wb = w + w_off;
$xptrs
$decl
    for (long g = t; g < ks; g += QL) {
        float16 w0, w1;
        QSUB(g0 + g, &w0, &w1);
$step
    }
$spill
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = QL / 2; h > 0; h >>= 1) {
        if (t < h)
            for (int r = 0; r < QM; r++) red[r * QL + t] += red[r * QL + t + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (t == 0) {
$store
    }
}
""")

_PACK_CPU = Template("""
__kernel void KNAME(__global float* xt, __global const float* x, __global const int* rows,
                    const int r0, const int m, const int k, const int p0)
{
    const int kk = get_global_id(0), p = get_global_id(1);
    if (kk >= k) return;
    const int mb = (p0 + p) * QV;
    float lane[QV];
    for (int l = 0; l < QV; l++)
        lane[l] = mb + l < m ? x[QROW(mb + l) * k + kk] : 0.0f;
    vstore$v(vload$v(0, lane), 0, xt + ((long)p * k + kk) * QV);
}
""")

_TILED_CPU = Template("""
__kernel void KNAME(__global float* out, __global const float* xt, __global const uchar* w,
                    const long w_off, __global const int* rows, const int r0, const int m,
                    const int n, const int k, const int p0, const int np)
{
    const int j0 = get_global_id(0) * QTN;
    if (j0 >= n) return;
    __global const uchar* wb = w + w_off;
    const long ks = k >> 5;
    float wt[QTN * QKC];                /* QTN decoded W rows of one k chunk */
    float acc[QP * QTN * QV];           /* the outputs of every panel of the chunk */
    for (int i = 0; i < np * QTN * QV; i++) acc[i] = 0.0f;
    for (int k0 = 0; k0 < k; k0 += QKC) {
        const int kc = min(QKC, k - k0);
        for (int t = 0; t < QTN; t++) {     /* rows past n repeat the last: never stored */
            const long row = min(j0 + t, n - 1);
            float* wr = wt + t * QKC;
            if (k % QBS == 0) {
                __global const uchar* blk = wb + (row * (k / QBS) + k0 / QBS) * QBB;
                for (int i = 0; i < kc; i += QBS, blk += QBB) {
                    #pragma unroll
                    for (int s = 0; s < QNS; s++) {
                        float16 w0, w1;
                        QD(blk, s, &w0, &w1);
                        vstore16(w0, 0, wr + i + 32 * s);
                        vstore16(w1, 0, wr + i + 32 * s + 16);
                    }
                }
            } else {
                for (int i = 0; i < kc; i += 32) {
                    float16 w0, w1;
                    QSUB(row * ks + ((k0 + i) >> 5), &w0, &w1);
                    vstore16(w0, 0, wr + i);
                    vstore16(w1, 0, wr + i + 16);
                }
            }
        }
        for (int p = 0; p < np; p++) {      /* every panel meets the decoded tile */
            float* ap = acc + p * QTN * QV;
$load
            __global const float* xg = xt + ((long)p * k + k0) * QV;
            for (int kk = 0; kk < kc; kk++, xg += QV) {
                const $vt xv = vload$v(0, xg);
$step
            }
$save
        }
    }
    for (int p = 0; p < np; p++) {
        const int mb = (p0 + p) * QV;
        for (int t = 0; t < QTN && j0 + t < n; t++)
            for (int l = 0; l < QV && mb + l < m; l++)
                out[QROW(mb + l) * n + j0 + t] = acc[(p * QTN + t) * QV + l];
    }
}
""")

_TILED_GPU = Template("""
__kernel __attribute__((reqd_work_group_size(QL, QL, 1)))
void KNAME($args, const int m, const int n, const int k)
{
    __local float xs[32 * QT];
    __local float ws[32 * QT];
    const int tx = get_local_id(0), ty = get_local_id(1), f = ty * QL + tx;
    const int n0 = get_group_id(0) * QT, m0 = get_group_id(1) * QT;
    const long ks = k >> 5;
    __global const uchar* wb = w + w_off;
$decl
    for (long g = 0; g < ks; g++) {
        for (int l = f; l < 32 * QT; l += QL * QL) {
            const int mm = l >> 5, kk = l & 31;
            xs[kk * QT + mm] = m0 + mm < m ? x[QROW(m0 + mm) * k + g * 32 + kk] : 0.0f;
        }
        for (int t = f; t < QT; t += QL * QL) {
            float16 w0, w1;
            float tmp[32];
            QSUB((long)min(n0 + t, n - 1) * ks + g, &w0, &w1);
            vstore16(w0, 0, tmp);
            vstore16(w1, 0, tmp + 16);
            for (int kk = 0; kk < 32; kk++) ws[kk * QT + t] = tmp[kk];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < 32; kk++) {
$step
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
$store
}
""")

_STRADDLE = Template("""
__kernel void KNAME($args, const int m, const int n, const int k)
{
    const int j = get_global_id(0), mb = get_global_id(1) * 4;
    if (j >= n || mb >= m) return;
    __global const uchar* wb = w + w_off;
    const long e0 = (long)j * k, e1 = e0 + k;
    __global const float* xr[4];
    for (int r = 0; r < 4; r++) xr[r] = x + QROW(min(mb + r, m - 1)) * k;
    float a[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    float buf[32];
    for (long g = e0 >> 5; g < (e1 + 31) >> 5; g++) {
        float16 w0, w1;
        QSUB(g, &w0, &w1);
        vstore16(w0, 0, buf);
        vstore16(w1, 0, buf + 16);
        const long lo = max(e0, g * 32), hi = min(e1, g * 32 + 32);
        for (long e = lo; e < hi; e++)
            for (int r = 0; r < 4; r++) a[r] = fma(xr[r][e - e0], buf[e - g * 32], a[r]);
    }
    for (int r = 0; r < 4 && mb + r < m; r++) out[QROW(mb + r) * n + j] = a[r];
}
""")

_DEQUANT = Template("""
__kernel void KNAME(__global float* out, __global const uchar* w, const long w_off,
                    const long nsub, const long slab, const int k, const int n)
{
    const long g = get_global_id(0);
    if (g >= nsub) return;
    __global const uchar* wb = w + w_off;
    float16 w0, w1;
    QSUB(g, &w0, &w1);
#if QMOE
    /* expert e's [n, k] slab is written as [k, n]: out[e][col][row] = W_e[row][col] */
    float buf[32];
    vstore16(w0, 0, buf);
    vstore16(w1, 0, buf + 16);
    const long e = (g * 32) / slab, base = g * 32 - e * slab;
    for (int l = 0; l < 32; l++) {
        const long idx = base + l, row = idx / k;
        out[e * slab + (idx - row * k) * n + row] = buf[l];
    }
#else
    vstore16(w0, 0, out + g * 32);
    vstore16(w1, 0, out + g * 32 + 16);
#endif
}
""")


def _finish(prefix: str, dec: Decoder, geometry: tuple, defs: dict, body: str,
            soft: bool):
    """(name, source): the decoder, the kernel's defines, its body, and the undefines
    (``soft``: f16 fields by integer operations, the CPU-style choice)."""
    bs, bb = geometry
    nsl = (bs // 32).bit_length() - 1
    defs = {"QD": dec.fn, "QBS": bs, "QBB": bb, "QNSL": nsl, **defs}
    head = "".join(f"#define {k} {v}\n" for k, v in defs.items()) + _ROW
    tail = "".join(f"#undef {k}\n" for k in list(defs) + ["QROW", "QNS", "QSUB"])
    text = head + body + tail
    full = decode_source(dec.name, soft) + text
    name = f"{prefix}_{dec.name.lower()}_{hashlib.sha256(full.encode()).hexdigest()[:12]}"
    return name, full.replace("KNAME", name)


def _xrows(m: int, pad: str = "    ") -> str:
    return "\n".join(f"{pad}__global const float* x{r} = x + QROW({r}) * k;" for r in range(m))


def gemv_cpu(dec: Decoder, geometry: tuple, m: int, ind: bool):
    """(name, source) of the CPU GEMV of ``m`` x rows (one work-item per W row)."""
    decl = "    float16 " + ", ".join(f"a{r} = 0.0f, b{r} = 0.0f" for r in range(m)) + ";"

    def step(off: str, pad: str) -> str:
        return "\n".join(f"{pad}a{r} = fma(vload16(0, x{r} + {off}), w0, a{r}); "
                         f"b{r} = fma(vload16(1, x{r} + {off}), w1, b{r});" for r in range(m))
    store = "\n".join(f"    out[QROW({r}) * n + j] = rlx_qd_hsum(a{r} + b{r});"
                      for r in range(m))
    body = _GEMV_CPU.substitute(args=_ARGS, xptrs=_xrows(m), decl=decl, store=store,
                                bstep=step("xo + 32 * s", " " * 16),
                                fstep=step("32 * g", " " * 12))
    return _finish("qmv_cpu", dec, geometry, {"QM": m, "QIND": int(ind)}, body, True)


def gemv_gpu(dec: Decoder, geometry: tuple, m: int, ind: bool, local: int):
    """(name, source) of the GPU GEMV: a ``local``-item work-group per W row."""
    p = " " * 8
    decl = "    float " + ", ".join(f"p{r} = 0.0f" for r in range(m)) + ";"
    step = "\n".join(f"{p}p{r} += rlx_qd_hsum(fma(vload16(0, x{r} + 32 * g), w0, "
                     f"vload16(1, x{r} + 32 * g) * w1));" for r in range(m))
    spill = "\n".join(f"    red[{r} * QL + t] = p{r};" for r in range(m))
    store = "\n".join(f"        out[QROW({r}) * n + j] = red[{r} * QL];" for r in range(m))
    body = _GEMV_GPU.substitute(args=_ARGS, xptrs=_xrows(m), decl=decl, step=step,
                                spill=spill, store=store)
    return _finish("qmv_gpu", dec, geometry, {"QM": m, "QL": local, "QIND": int(ind)}, body,
                   False)


def pack_cpu(dec: Decoder, geometry: tuple, lanes: int, ind: bool):
    """(name, source) of the x panel packer of the CPU tiled kernel (k-major, zero-padded)."""
    body = _PACK_CPU.substitute(v=lanes)
    return _finish("qpack_cpu", dec, geometry, {"QV": lanes, "QIND": int(ind)}, body, True)


def tiled_cpu(dec: Decoder, geometry: tuple, lanes: int, tn: int, panels: int, ind: bool):
    """(name, source) of the CPU tiled product: ``tn`` W rows × up to ``panels`` panels of
    ``lanes`` x rows per work-item, k in chunks of QKC (a multiple of every block size)."""
    vt, p = f"float{lanes}", " " * 16
    cells = range(tn)
    load = "\n".join(f"            {vt} c{t} = vload{lanes}({t}, ap);" for t in cells)
    step = "\n".join(f"{p}c{t} = fma(xv, ({vt})wt[{t} * QKC + kk], c{t});" for t in cells)
    save = "\n".join(f"            vstore{lanes}(c{t}, {t}, ap);" for t in cells)
    body = _TILED_CPU.substitute(vt=vt, v=lanes, load=load, step=step, save=save)
    defs = {"QV": lanes, "QTN": tn, "QP": panels, "QKC": QKC, "QIND": int(ind)}
    return _finish("qmm_cpu", dec, geometry, defs, body, True)


def tiled_gpu(dec: Decoder, geometry: tuple, local: int, reg: int, ind: bool):
    """(name, source) of the GPU tiled product: ``local``² items, ``reg``² outputs each."""
    cells = [(i, j) for i in range(reg) for j in range(reg)]
    p = " " * 12
    decl = "    float " + ", ".join(f"c{i}{j} = 0.0f" for i, j in cells) + ";"
    step = [p + " ".join(f"const float a{i} = xs[kk * QT + ty + {i * local}];"
                         for i in range(reg)),
            p + " ".join(f"const float b{j} = ws[kk * QT + tx + {j * local}];"
                         for j in range(reg))]
    step += [p + " ".join(f"c{i}{j} = fma(a{i}, b{j}, c{i}{j});" for j in range(reg))
             for i in range(reg)]
    store = "\n".join(
        f"    if (m0 + ty + {i * local} < m && n0 + tx + {j * local} < n) "
        f"out[QROW(m0 + ty + {i * local}) * n + n0 + tx + {j * local}] = c{i}{j};"
        for i, j in cells)
    body = _TILED_GPU.substitute(args=_ARGS, decl=decl, step="\n".join(step), store=store)
    defs = {"QL": local, "QT": local * reg, "QIND": int(ind)}
    return _finish("qmm_gpu", dec, geometry, defs, body, False)


def straddle(dec: Decoder, geometry: tuple, ind: bool, soft: bool):
    """(name, source) of the product for k not a multiple of 32 (scalar)."""
    return _finish("qmm_any", dec, geometry, {"QIND": int(ind)},
                   _STRADDLE.substitute(args=_ARGS), soft)


def dequant(dec: Decoder, geometry: tuple, moe: bool, soft: bool):
    """(name, source) of packed -> f32 (``moe``: each expert slab transposed to [k, n])."""
    return _finish("qdq", dec, geometry, {"QMOE": int(moe), "QIND": 0},
                   _DEQUANT.substitute(), soft)
