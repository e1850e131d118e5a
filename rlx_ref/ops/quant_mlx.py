"""Quant family, MLX layout: DequantGroupedMatMulMlx (mlx-community MoE experts).

Each expert is an MLX quantized matrix ``[N, K]`` (one packed row per output feature) with
SEPARATE per-group scales and biases ``[E, N, K/group_size]``, as RLX's CPU
(``exec_dequant_grouped_mat_mul_mlx_inner``) reads them: MlxAffine decodes
``scale·code + bias``; MlxMxfp4 decodes ``e2m1(code)·scale`` with the scales already f32
(RLX's loader decodes the E8M0 bytes and zeroes the biases, which the kernel never reads).
"""
from __future__ import annotations

import numpy as np

from ..conformance.accuracy import reduction
from ..ir.dtype import DType
from ..ir.shape import Dyn
from . import _quant_linear as L
from . import _quant_scheme as S
from .opdef import OpDef, OpError, register, want
from .quant_matmul import BLAS, SchemeAttrs, _check_tokens, _check_x_out, _grouped

_F32, _U8 = DType.F32, DType.U8
SCHEMES = ("MlxAffine", "MlxMxfp4")


def _geometry(scheme, k: int, n: int):
    """(code bytes, groups) of one expert's [N, K] matrix; OpError when undefined."""
    name = S.name_of(scheme)
    want(name in SCHEMES, f"(C1) DequantGroupedMatMulMlx takes MlxAffine or MlxMxfp4 (RLX's "
                          f"CPU panics on anything else), got {S.text(scheme)}")
    lay = L.layout(scheme, k, n, "C1")
    return lay.codes, lay.scale


def _check(shapes, a, out):
    want(len(shapes) == 5, f"(C2) DequantGroupedMatMulMlx takes (input, w_q, scales, biases, "
                           f"expert_idx), got {len(shapes)} operands")
    x, wq, sc, bi, idx = shapes
    want(S.name_of(a.scheme) in SCHEMES,
         f"(C1) DequantGroupedMatMulMlx takes MlxAffine or MlxMxfp4 (RLX's CPU panics on "
         f"anything else), got {S.text(a.scheme)}")
    _check_tokens(x, idx, "DequantGroupedMatMulMlx", "C2")
    _check_x_out(x, out, "DequantGroupedMatMulMlx", "C2")
    want(sc.dtype in (_F32, DType.BF16) and bi.dtype == sc.dtype,
         f"(C3) scales and biases must share one dtype, f32 or bf16, got {sc.dtype} and "
         f"{bi.dtype}")
    want(sc.rank == 3 and bi.rank == 3, f"(C3) scales and biases are [E, N, K/group_size], "
                                        f"got {sc} and {bi}")
    want(wq.dtype == _U8, f"(C4) w_q must be u8 packed codes, got {wq.dtype}")
    k, n = x.dims[1], out.dims[1]
    if any(isinstance(d, Dyn) for d in (k, n)):
        return
    code_bytes, groups = _geometry(a.scheme, k, n)
    if not sc.is_static or not bi.is_static:
        return
    e = sc.dims[0]
    want(e >= 1 and tuple(sc.dims[1:]) == (n, groups // max(n, 1)) and bi.dims == sc.dims,
         f"(C3) scales and biases must be [E, {n}, {groups // max(n, 1)}] (E >= 1) for "
         f"N={n}, K={k}, got {sc} and {bi}")
    if wq.is_static:
        want(wq.numel == e * code_bytes,
             f"(C4) w_q holds {wq.numel} bytes, expected E·{code_bytes} = {e * code_bytes} "
             f"({e} experts of [N={n}, K={k}] {S.text(a.scheme)} codes)")


def expert_rows(idx, num_experts: int) -> np.ndarray:
    """RLX's ``(id as usize).min(E − 1)``: truncation, NaN and negatives saturate to 0."""
    v = np.asarray(idx, np.float64).reshape(-1)
    e = np.trunc(np.where(np.isnan(v), 0.0, v))
    return np.clip(e, 0, num_experts - 1).astype(np.int64)


def expert_weights(scheme, w_q, scales, biases, k: int, n: int) -> np.ndarray:
    """Every expert's weight as f32 ``[E, K, N]`` (each decoded as [N, K], transposed)."""
    e = scales.shape[0]
    code_bytes, groups = _geometry(scheme, k, n)
    raw = np.asarray(w_q, np.uint8).reshape(e, code_bytes)
    s = np.asarray(scales).astype(np.float32).reshape(e, -1)
    b = np.asarray(biases).astype(np.float32).reshape(e, -1)
    gs = S.field(scheme, "group_size")
    per_group = np.repeat(np.arange(groups).reshape(n, -1), gs, axis=1)   # [N, K] -> group
    out = np.empty((e, k, n), np.float32)
    for i in range(e):
        if S.name_of(scheme) == "MlxAffine":
            codes = L.unpack_codes(raw[i], S.field(scheme, "bits"), n * k).reshape(n, k)
            wt = s[i][per_group] * codes.astype(np.float32) + b[i][per_group]
        else:
            wt = L.FP4_E2M1[L.unpack_codes(raw[i], 4, n * k)].reshape(n, k) * s[i][per_group]
        out[i] = wt.T
    return out


def _ref(ctx, x, w_q, scales, biases, idx):
    k, n = x.shape[1], ctx.out_dims[1]
    if scales.shape[0] < 1:
        raise OpError("DequantGroupedMatMulMlx: scales hold no expert")
    w = expert_weights(ctx.attrs.scheme, w_q, scales, biases, k, n)
    return _grouped(x, w, expert_rows(idx, w.shape[0]), ctx.out_np)


def _lazy_samples(rng):
    from . import _quant_mlx_samples

    return _quant_mlx_samples.samples(rng)


register(OpDef(
    kind="DequantGroupedMatMulMlx", family="quant", attrs=SchemeAttrs, payload="struct",
    arity=5, caps=BLAS, input_names=("input", "w_q", "scales", "biases", "expert_idx"),
    check=_check, reference=_ref,
    doc="GroupedMatMul against a stack of E MLX-quantized experts: `out[i] = input[i] · "
        "W_e` with `e = expert_idx[i]`, input f32 [M, K], out f32 [M, N] (N from the "
        "declared output). w_q holds E contiguous slabs of packed codes, expert e the MLX "
        "matrix `[N, K]` (rows of K codes packed LSB first, as MLX packs them); scales and "
        "biases are `[E, N, K/group_size]`, f32 or bf16. MlxAffine{bits, group_size}: "
        "`W_e[k, n] = scale[e, n, g]·code + bias[e, n, g]` with `g = k // group_size`. "
        "MlxMxfp4{group_size}: `W_e[k, n] = e2m1(code)·scale[e, n, g]`, scales already "
        "decoded to floats and biases unread. Expert ids are f32, truncated toward zero and "
        "clamped to `[0, E − 1]` (NaN and negatives give 0), as RLX's CPU reads them.",
    constraints=(
        "C1: the scheme is MlxAffine (bits 2, 3, 4, 5, 6 or 8; group_size dividing K and a "
        "multiple of the codes one pack holds) or MlxMxfp4 (even group_size dividing K).",
        "C2: five operands; input is f32 [M, K], expert_idx f32 [M], the declared output "
        "f32 [M, N].",
        "C3: scales and biases share one dtype (f32 or bf16) and the shape "
        "[E, N, K/group_size] with E >= 1.",
        "C4: w_q is u8 holding exactly E·N·K·bits/8 bytes (bits 4 for MlxMxfp4).",
    ),
    samples=_lazy_samples, dtypes=(_F32,),
    accuracy=reduction(2, lambda a, s: s[0].dims[-1], "all",
                       reason="the weights live in packed codes, so the terms' norm cannot "
                              "be bound: the budget scales with the largest output"),
    notes="RLX's op doc gives w_q as `E·out·(K·bits/32)` u8, which counts u32 words; its CPU "
          "divides the byte count by E and decodes `N·K·bits/8` bytes per expert, which "
          "rlx_ref requires (C4). RLX clamps out-of-range expert ids instead of failing "
          "(DequantGroupedMatMul rejects them); rlx_ref follows the CPU. RLX's CPU fills a "
          "row with zeros when its decoder reports a size error; C1-C4 rule those out. "
          "RLX accepts input [.., M, K]; rlx_ref requires rank 2.",
))
