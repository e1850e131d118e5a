"""DequantMatMul's 4-operand forms and LoraMatMul on the register-tiled GEMM of ``_gemm``.

The 4-operand schemes (Int8Block, Int8BlockAsym, Int4Block, Fp8E4m3/E5m2, Nvfp4Block and
the MLX schemes) decode each weight as the GEMM's B tile loader reads it: ``W[kb, col]``
from its code and its block's scale, with the f32 operations of the scheme's numpy
decoder (``rlx_ref.quant.linear`` / ``ops._quant_linear``) in their order; MLX's affine
``scale·code + bias`` multiplies with ``mul.rn`` so the product is rounded before the add
as numpy rounds it. LoraMatMul is two launches: ``t = scale·(x·A)`` into a scratch, then
one GEMM over the joined operands ``[x | t] · [W; B]``.
"""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType
from ...ops import _quant_scheme as S
from ._gemm import gemm_blocks, render_gemm, tiling
from .device import device_dtype, import_cuda, numel, rows_shape
from .kernels import Launch, array_type, compile_kernel, float_type, int_type
from .lowering import Step, lowers

_IMPORT = ("from rlx_ref.backends.numba_cuda._quant_device_int import _E2M1, _E4M3, _E4M3S, "
           "_E5M2, _bits, _e8m0, _mul_rn\nfrom rlx_ref.backends.numba_cuda._quant_device "
           "import _i8\n")
_NIBBLE = "q = (np.int32(b[e >> 1]) >> (4 * (e & 1))) & 15"


def _load_b(scheme, k: int) -> str:
    """Statements assigning ``v``, the f32 weight W[kb, col] (W is [K, N])."""
    name = S.name_of(scheme)
    if name.startswith("Mlx"):
        return _load_mlx(scheme)
    bs = S.scale_block(scheme, k)
    g = f"g = (kb // {bs}) * n + col\n"
    e = "e = kb * n + col\n"
    if name == "Int8Block":
        return g + "v = np.float32(_i8(b[kb * n + col])) * sc[g]"
    if name == "Int8BlockAsym":
        return g + "v = (np.float32(_i8(b[kb * n + col])) - zq[g]) * sc[g]"
    if name == "Int4Block":
        return (g + e + _NIBBLE + "\nif q > 7:\n    q -= 16\nv = np.float32(q) * sc[g]")
    if name in ("Fp8E4m3", "Fp8E5m2"):
        table = "_E4M3" if name == "Fp8E4m3" else "_E5M2"
        return f"v = {table}[b[kb * n + col]] * sc[col]"
    if name == "Nvfp4Block":
        return g + e + _NIBBLE + "\nv = (_E2M1[q] * _E4M3S[sc[g]]) * zq[0]"
    raise ValueError(f"no CUDA decoder for DequantMatMul with {S.text(scheme)}")


def _load_mlx(scheme) -> str:
    """MLX keeps W as [N, K] rows of codes with [N, K/group_size] group scales."""
    name, gs = S.name_of(scheme), S.field(scheme, "group_size")
    head = f"f = col * k_len + kb\ng = col * (k_len // {gs}) + kb // {gs}\n"
    if name == "MlxAffine":
        bits = S.field(scheme, "bits")
        return head + f"v = _mul_rn(sc[g], np.float32(_bits(b, f, {bits}))) + zq[g]"
    scale = "_E4M3[sc[g]]" if gs == 16 else "_e8m0(np.int32(sc[g]))"
    if name == "MlxMxfp4":
        return head + f"v = _E2M1[(np.int32(b[f >> 1]) >> (4 * (f & 1))) & 15] * {scale}"
    return head + f"v = _E4M3[b[f]] * {scale}"


def dense_dequant_step(node, ins) -> Step:
    """A 4-operand DequantMatMul: x [.., M, K] times the decoded [K, N] weight."""
    scheme = node.attrs.scheme
    k, n = int(ins[0].dims[-1]), int(node.shape.dims[-1])
    m = numel(ins[0].dims[:-1])
    tl = tiling("np.float32", m, n)
    name, source = render_gemm(
        "qdense", "np.float32", tl, load_a="v = a[row * k_len + ka]",
        load_b=_load_b(scheme, k), store="out[row * n + col] = value", extra=("sc", "zq"))
    arrays = tuple(array_type(device_dtype(s.dtype)) for s in ins[1:])
    f32, i64 = array_type(np.float32), int_type()
    launch = Launch(compile_kernel(name, _IMPORT + source),
                    (f32, f32, arrays[0], i64, i64, i64, i64, arrays[1], arrays[2]))
    blocks = gemm_blocks(tl, m, n, 1)

    def run(out, x, wq, sc, zq):
        if out.size:
            grid, threads = rows_shape(blocks, tl.threads)
            launch(grid, threads, out, x, wq, m, n, k, 1, sc, zq)
    return Step(run, [launch])


@lowers("LoraMatMul", (DType.F32,), reason="two f32 register-tiled GEMMs: t = scale·(x·A), "
                                          "then [x | t]·[W; B] in one accumulation")
def lower_lora(node, ins, ctx) -> Step:
    k, n = (int(d) for d in ins[1].dims)
    r = int(ins[2].dims[1])
    m = numel(ins[0].dims[:-1])
    f32, i64 = array_type(np.float32), int_type()
    tl_t = tiling("np.float32", m, r)
    name_t, src_t = render_gemm(
        "lora_t", "np.float32", tl_t, load_a="v = a[row * k_len + ka]",
        load_b="v = b[kb * n + col]", store="out[row * n + col] = value * scale",
        extra=("scale",))
    first = Launch(compile_kernel(name_t, src_t), (f32,) * 3 + (i64,) * 4 + (float_type(),))
    tl = tiling("np.float32", m, n)
    name, src = render_gemm(
        "lora", "np.float32", tl,
        load_a="if ka < kx:\n    v = a[row * kx + ka]\nelse:\n    v = tm[row * rr + ka - kx]",
        load_b="if kb < kx:\n    v = b[kb * n + col]\nelse:\n    v = bm[(kb - kx) * n + col]",
        store="out[row * n + col] = value", extra=("tm", "bm", "kx", "rr"))
    second = Launch(compile_kernel(name, src), (f32,) * 3 + (i64,) * 4 + (f32, f32, i64, i64))
    scale = float(np.float32(node.attrs.scale))

    def run(out, x, w, la, lb):
        if not out.size:
            return
        t = import_cuda().device_array(max(m * r, 1), np.float32)
        if m * r:
            grid, threads = rows_shape(gemm_blocks(tl_t, m, r, 1), tl_t.threads)
            first(grid, threads, t, x, la, m, r, k, 1, scale)
        grid, threads = rows_shape(gemm_blocks(tl, m, n, 1), tl.threads)
        second(grid, threads, out, x, w, m, n, k + r, 1, t, lb, k, r)
    return Step(run, [first, second])
