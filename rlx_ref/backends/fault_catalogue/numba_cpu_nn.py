"""Planted faults in numba-cpu's conv-family, linalg and attention kernels: one or more in
each kernel variant those lowerings declare (serial and prange loops, unfold chunking, BLAS
and loop products, f32 and f64 attention products)."""
from __future__ import annotations

from ..faults import Fault

NB = "numba-cpu"
LOW = "lowered-thresholds"
_MM = "rlx_ref.backends.numba_cpu.lower_linalg"


def _unmemoized_matmul(original):
    """The matmul kernel compiled on every lowering, not taken from the module's memo, so a
    faulty source reaches the products (compile_kernel still shares one module per source)."""
    def matmul_kernel():
        from ..numba_cpu import lower_linalg
        from ..numba_cpu.kernels import compile_kernel

        return compile_kernel("mm_blas", lower_linalg._MM_SRC)
    return matmul_kernel


_MM_FRESH = ((f"{_MM}:matmul_kernel", _unmemoized_matmul),)

FAULTS = (
    # ── Conv: 1×1, im2col + GEMM, channels-last blocks, unfold chunks ───────
    Fault("conv-1x1-group-offset", NB, "wrong group offset", "numba-cpu:conv.1x1.serial",
          "the 1×1 conv multiplies every group's weights with the first group's input "
          "channels",
          ops="Conv", tags=("1x1", "groups"), kernel="conv_gemm",
          edits=(("np.dot(w3[g, c0:c1], x4[n, g], o4[n, g, c0:c1])",
                  "np.dot(w3[g, c0:c1], x4[n, 0], o4[n, g, c0:c1])"),)),
    Fault("conv-1x1-par-tail", NB, "tail off-by-one", "numba-cpu:conv.1x1.par",
          "the parallel 1×1 conv stops one (image, group, channel block) short",
          ops="Conv", tags=("variants", LOW), kernel="conv_gemm",
          edits=(("for t in prange(x4.shape[0] * ng * nblk):",
                  "for t in prange(x4.shape[0] * ng * nblk - 1):"),)),
    Fault("conv-gemm-dilation-h", NB, "dilation ignored", "numba-cpu:conv.gemm.serial",
          "the im2col unfold steps kernel rows by 1 instead of the H dilation",
          ops="Conv", dtypes="f32,f64", tags=("dilation", "odd"), kernel="conv_gemm",
          edits=(("iy = oy * sh + i * dh - ph", "iy = oy * sh + i - ph"),)),
    Fault("conv-gemm-par-unfold-tail", NB, "tail off-by-one", "numba-cpu:conv.gemm.par",
          "the parallel unfold leaves the last im2col row of each chunk unwritten",
          ops="Conv", tags=(LOW,), limit=6, kernel="conv_gemm",
          edits=(("for t in prange(m * ng * kg):", "for t in prange(m * ng * kg - 1):"),)),
    Fault("conv-nhwc-pad-axis", NB, "padding of the wrong axis", "numba-cpu:conv.nhwc.serial",
          "the channels-last window copy offsets its columns by the H padding",
          ops="Conv", tags=("nhwc",), kernel="conv_gemm",
          edits=(("x0 = ox0 * sw - pw", "x0 = ox0 * sw - ph"),)),
    Fault("conv-nhwc-par-chunk", NB, "tail off-by-one", "numba-cpu:conv.nhwc.par",
          "the parallel channels-last conv skips its last chunk of blocks",
          ops="Conv", tags=("variants", LOW), kernel="conv_gemm",
          edits=(("for c in prange(chunks):\n        _nhwc_chunk(",
                  "for c in prange(chunks - 1):\n        _nhwc_chunk("),)),
    Fault("conv-depthwise-taps-transposed", NB, "permutation error",
          "numba-cpu:conv.depthwise.serial",
          "the depthwise conv reads its kernel taps with rows and columns swapped",
          ops="Conv", tags=("depthwise",), kernel="conv_gemm",
          edits=(("wv = wk[i, j]", "wv = wk[j, i]"),)),
    Fault("conv-depthwise-par-tail", NB, "tail off-by-one", "numba-cpu:conv.depthwise.par",
          "the parallel depthwise conv leaves the last output plane unwritten",
          ops="Conv", tags=(LOW,), kernel="conv_gemm",
          edits=(("for t in prange(o4.shape[0] * co):",
                  "for t in prange(o4.shape[0] * co - 1):"),)),
    Fault("conv-cols-image-offset", NB, "wrong image offset", "numba-cpu:conv.cols.whole",
          "the one-pass unfold of a batch reads the first image of the pass for every image",
          ops="Conv", dtypes="f32,f64", tags=("prime-length",), kernel="conv_gemm",
          edits=(("_tap_row(x5[n0 + i, g], geo, r, cols[i, g, r])",
                  "_tap_row(x5[n0, g], geo, r, cols[i, g, r])"),)),
    Fault("conv-cols-chunk-offset", NB, "wrong chunk offset", "numba-cpu:conv.cols.chunked",
          "products of a chunk of images are written from the first image, not the chunk's",
          ops="Conv", tags=(LOW,), limit=6, kernel="conv_gemm",
          edits=(("np.dot(w3[g, c0:c1], cols[i, g], o4[n0 + i, g, c0:c1])",
                  "np.dot(w3[g, c0:c1], cols[i, g], o4[i, g, c0:c1])"),)),
    # ── ConvTranspose2d ─────────────────────────────────────────────────────
    Fault("convt-weight-layout", NB, "transposed weight layout", "numba-cpu:convt.gemm.serial",
          "col2im reads the Wᵀ·x row of (o, a, b) as if the rows were ordered [kH, Cout, kW]",
          ops="ConvTranspose2d", dtypes="f32,f64", limit=6, kernel="conv_gemm",
          edits=(("crow = cols[i, g, (o * kh + a) * kw + b]",
                  "crow = cols[i, g, (a * cog + o) * kw + b]"),)),
    Fault("convt-par-plane-tail", NB, "tail off-by-one", "numba-cpu:convt.gemm.par",
          "the parallel col2im leaves the last output-channel plane unwritten",
          ops="ConvTranspose2d", tags=(LOW,), limit=6, kernel="conv_gemm",
          edits=(("for t in prange(m * ng * cog):", "for t in prange(m * ng * cog - 1):"),)),
    # ── Im2Col, Pool ────────────────────────────────────────────────────────
    Fault("im2col-pad-replicate", NB, "padding value", "numba-cpu:im2col.serial",
          "Im2Col fills padding taps with the nearest edge value instead of 0",
          ops="Im2Col", dtypes="f32,f64", tags=("padding",), kernel="im2col",
          edits=(("row[col] = 0\n",
                  "row[col] = x[n, c, min(max(iy, 0), h - 1), min(max(ix, 0), w - 1)]\n"),)),
    Fault("im2col-par-tail", NB, "tail off-by-one", "numba-cpu:im2col.par",
          "the parallel Im2Col skips the last row of output positions",
          ops="Im2Col", tags=(LOW,), limit=6, kernel="im2col",
          edits=(("for t in prange(x.shape[0] * ho):", "for t in prange(x.shape[0] * ho - 1):"),)),
    Fault("pool-window-short", NB, "window off-by-one", "numba-cpu:pool.serial",
          "the pooling window ends one input row early",
          ops="Pool", dtypes="f32", limit=6, kernel="pool",
          edits=(("y1 = min(oy * sh - ph + kh, h_in)", "y1 = min(oy * sh - ph + kh - 1, h_in)"),)),
    Fault("pool-par-tail", NB, "tail off-by-one", "numba-cpu:pool.par",
          "the parallel pool skips the last output row",
          ops="Pool", tags=(LOW,), limit=6, kernel="pool",
          edits=(("for t in prange(out.shape[0] * do_ * ho):",
                  "for t in prange(out.shape[0] * do_ * ho - 1):"),)),
    # ── MatMul: BLAS and loop products ──────────────────────────────────────
    Fault("matmul-blas-rhs-transposed", NB, "wrong BLAS transpose flag", "numba-cpu:matmul.blas",
          "the BLAS product passes the rhs transposed",
          ops="MatMul", tags=("blas",), kernel="mm_blas", patches=_MM_FRESH,
          edits=(("np.dot(a3[ia[i]], b3[ib[i]], o3[i])",
                  "np.dot(a3[ia[i]], b3[ib[i]].T, o3[i])"),)),
    Fault("matmul-blas-par-row-tail", NB, "tail off-by-one", "numba-cpu:matmul.blas.par",
          "the parallel BLAS row blocks stop one row short of each output matrix",
          ops="MatMul", dtypes="f32", tags=(LOW,), limit=6, kernel="mm_blas", patches=_MM_FRESH,
          edits=(("r1 = min(r0 + rows, o3.shape[1])", "r1 = min(r0 + rows, o3.shape[1] - 1)"),)),
    Fault("matmul-loop-f32-products", NB, "wrong product precision",
          "numba-cpu:matmul.loop.serial",
          "the loop product rounds each f64 product to f32 before accumulating",
          ops="MatMul", dtypes="f64", limit=6, kernel="mm_blas", patches=_MM_FRESH,
          edits=(("orow[n] += aik * brow[n]", "orow[n] += np.float32(aik * brow[n])"),)),
    Fault("matmul-loop-par-tail", NB, "tail off-by-one", "numba-cpu:matmul.loop.par",
          "the parallel loop product leaves the last output row unwritten",
          ops="MatMul", dtypes="i32", tags=(LOW,), kernel="mm_blas", patches=_MM_FRESH,
          edits=(("for r in prange(o3.shape[0] * o3.shape[1]):",
                  "for r in prange(o3.shape[0] * o3.shape[1] - 1):"),)),
    # ── Attention: f64 and f32 products, parallel tiles ─────────────────────
    Fault("attention-f64-exp-f32-arg", NB, "wrong product precision",
          "numba-cpu:attention.f64_products",
          "the f64 softmax rounds each exp argument (score - max) to f32",
          ops="Attention", dtypes="f64", limit=6, kernel="attention",
          edits=(("row[j] = _vexp(row[j] - mc)", "row[j] = _vexp(np.float32(row[j] - mc))"),)),
    Fault("attention-f32-exp-ln2-lo", NB, "dropped range-reduction term",
          "numba-cpu:attention.f32_products",
          "the f32 exp of the attention softmax reduces by ln2's high part only",
          ops="Attention", dtypes="f32", tags=(LOW,), limit=6, kernel="attention",
          edits=(("r = (t - k * _VF_LN2_HI) - k * _VF_LN2_LO", "r = t - k * _VF_LN2_HI"),)),
    Fault("attention-par-chunk-floor", NB, "chunk split drops the remainder",
          "numba-cpu:attention.par",
          "parallel chunks take items // chunks tiles each, so the remainder is never run",
          ops="Attention", tags=("many-tiles",), kernel="attention",
          edits=(("range(c * items // chunks, (c + 1) * items // chunks)",
                  "range(c * (items // chunks), (c + 1) * (items // chunks))"),)),
)
