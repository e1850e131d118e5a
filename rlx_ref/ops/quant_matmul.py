"""Quant family, matmuls: DequantMatMul, DequantGroupedMatMul, DequantMoEWeights,
GroupedMatMul, LoraMatMul.

GGUF weights arrive as one packed u8 blob in GGML order: W is ``[N, K]`` (one row per output
feature), each row ``K / block_size`` blocks of ``block_bytes`` bytes, so ``y = x · Wᵀ``
(RLX ``rlx-cpu/src/gguf_matmul.rs``: "C[m,n] = A[m,k] @ B^T where B is [n,k] row-major in
packed GGUF layout"). Decoding goes through ``rlx_ref.quant.dequant``, whose block size comes
from the scheme's record: the decoded weights are exact f32 and only the products round.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..conformance.accuracy import exact, reduction
from ..ir.dtype import DType
from ..ir.shape import Dyn, Shape
from . import _quant_linear as L
from . import _quant_scheme as S
from .codec import F32, attr
from .opdef import Caps, OpDef, OpError, register, want

BLAS = Caps.BLAS | Caps.FUSION_BOUNDARY
_F32, _U8 = DType.F32, DType.U8
_WHY_ALL = ("the weights live in packed bytes, so the terms' norm cannot be bound: the "
            "budget scales with the largest output")


def _lazy_samples(name: str):
    def samples(rng):
        from . import _quant_mm_samples

        return getattr(_quant_mm_samples, name)(rng)
    return samples


@dataclass(frozen=True)
class SchemeAttrs(S.SchemeAttrsMixin):
    scheme: object = attr(S.QUANT_SCHEME, doc="RLX's QuantScheme: the weight's encoding")


def _static(*dims) -> bool:
    return not any(isinstance(d, Dyn) for d in dims)


def _count(shape: Shape):
    return shape.numel if shape.is_static else None


def _gguf_bytes(scheme, k: int, n: int, cid: str):
    """(SchemeDef, bytes of an [n, k] weight); OpError when K is not whole blocks."""
    sd = S.gguf_def(scheme, "C1")
    want(k % sd.block_size == 0,
         f"({cid}) {S.name_of(scheme)} stores whole {sd.block_size}-element blocks along K: "
         f"K = {k} is not a multiple of {sd.block_size}")
    return sd, n * (k // sd.block_size) * sd.block_bytes


def _check_packed(shape: Shape, need: int, what: str, cid: str):
    want(shape.dtype == _U8, f"({cid}) {what} must be u8 bytes, got {shape.dtype}")
    have = _count(shape)
    want(have is None or have == need,
         f"({cid}) {what} holds {have} bytes, expected {need}")


# ── DequantMatMul ───────────────────────────────────────────────────────────

def _check_x_out(x: Shape, out: Shape, kind: str, cid: str):
    want(x.dtype == _F32 and out.dtype == _F32,
         f"({cid}) {kind} takes f32 activations and gives f32, got x {x.dtype}, output "
         f"{out.dtype}")
    want(x.rank >= 2 and out.rank == x.rank and tuple(out.dims[:-1]) == tuple(x.dims[:-1]),
         f"({cid}) {kind} maps x [..., M, K] to [..., M, N]: x is {x}, the declared output "
         f"is {out}")


def _check_dequant_matmul(shapes, a, out):
    gguf = S.is_gguf(a.scheme)
    if gguf:
        S.gguf_def(a.scheme, "C1")
    operands = "(x, packed_w)" if gguf else "(x, w_q, scale, zp)"
    want(len(shapes) == (2 if gguf else 4),
         f"(C2) DequantMatMul with {S.text(a.scheme)} takes {operands}, got {len(shapes)} "
         f"operands")
    x = shapes[0]
    _check_x_out(x, out, "DequantMatMul", "C3")
    k, n = x.dims[-1], out.dims[-1]
    if not _static(k, n):
        return
    if gguf:
        _check_packed(shapes[1], _gguf_bytes(a.scheme, k, n, "C4")[1], "packed_w", "C4")
        return
    lay = L.layout(a.scheme, k, n, "C1")
    for i, name, count, dtypes in ((1, "w_q", lay.codes, lay.code_dtypes),
                                   (2, "scale", lay.scale, (lay.scale_dtype,)),
                                   (3, "zp", lay.zp, (_F32,))):
        s = shapes[i]
        want(s.dtype in dtypes, f"(C5) {S.text(a.scheme)} {name} must be "
                                f"{'/'.join(map(str, dtypes))}, got {s.dtype} ({lay.what})")
        want(count is None or _count(s) in (None, count),
             f"(C5) {S.text(a.scheme)} {name} holds {_count(s)} elements, expected {count} "
             f"for K={k}, N={n} ({lay.what})")


def dense_weight(scheme, operands, k: int, n: int) -> np.ndarray:
    """The f32 ``[K, N]`` weight a DequantMatMul node multiplies by."""
    if S.is_gguf(scheme):
        from ..quant import dequant

        sd, need = _gguf_bytes(scheme, k, n, "C4")
        packed = np.asarray(operands[0]).reshape(-1)
        want(packed.size == need, f"(C4) packed_w holds {packed.size} bytes, expected {need}")
        return dequant(packed, sd.name, num_elements=n * k).reshape(n, k).T
    L.layout(scheme, k, n, "C1")
    return L.weight(scheme, *operands, k, n)


def _ref_dequant_matmul(ctx, x, *rest):
    k, n = x.shape[-1], ctx.out_dims[-1]
    w = dense_weight(ctx.attrs.scheme, rest, k, n)
    wide = ctx.out_np
    with np.errstate(all="ignore"):
        y = np.matmul(x.reshape(-1, k).astype(wide), w.astype(wide))
    return y.reshape(ctx.out_dims).astype(wide)


register(OpDef(
    kind="DequantMatMul", family="quant", attrs=SchemeAttrs, payload="struct", arity=None,
    min_arity=2, caps=BLAS, input_names=("x", "w_q", "scale", "zp"),
    check=_check_dequant_matmul, reference=_ref_dequant_matmul,
    doc="Matmul against a quantized weight W [K, N] decoded inside the product: `y[..., m, "
        "n] = Σ_k x[..., m, k]·W[k, n]`, x f32 `[..., M, K]`, y f32 `[..., M, N]` with N from "
        "the declared output. GGUF schemes take `(x, packed_w)`: the u8 blob holds the GGML "
        "matrix `[N, K]` row-major, blocks along K, so `y = x·dequant(packed)ᵀ`. The other "
        "schemes take `(x, w_q, scale, zp)`: Int8Block `W = q·s`, Int8BlockAsym `(q - zp)·s` "
        "(q, scale and zp laid out `[K, N]`, `[⌈K/block⌉, N]`), Int4Block `q·s` with signed "
        "4-bit codes (low nibble first, zp unused), Fp8E4m3/Fp8E5m2 `fp8(q)·scale[n]` (zp "
        "unused), Nvfp4Block `(e2m1(q)·e4m3(scale))·zp[0]` (16-element groups along K, zp "
        "the global scale), as the scheme records in `rlx_ref.quant.linear` define them; "
        "MlxAffine `scale·code + bias` and MlxMxfp4/MlxMxfp8 `code·scale` "
        "(E8M0, or E4M3 when group_size is 16) store W as `[N, K]` rows of packed codes with "
        "`[N, K/group_size]` scales. Each weight is rounded to f32 as RLX forms it.",
    constraints=("C1: the scheme is one rlx_ref decodes: a GGUF scheme with a quant-scheme "
                 "record, or a 4-operand scheme other than MxFp4x2Block (no RLX kernel).",
                 "C2: GGUF schemes take 2 operands, the others 4.",
                 "C3: x is f32 [..., M, K] (rank >= 2); the declared output is f32 "
                 "[..., M, N] with x's leading dims.",
                 "C4: GGUF: K is a multiple of the scheme's block size and packed_w is u8 "
                 "with exactly N·(K/block_size)·block_bytes bytes.",
                 "C5: 4-operand schemes: w_q, scale and zp have the dtypes and element "
                 "counts of the scheme's layout (doc above) for K and N."),
    samples=_lazy_samples("dequant_matmul_samples"), dtypes=(_F32,),
    accuracy=reduction(2, lambda a, s: s[0].dims[-1], "all", reason=_WHY_ALL),
    notes="RLX derives M = numel(out)/N and K = numel(x)/M and never checks the operands; "
          "rlx_ref checks C2-C5 (RLX's debug build asserts K·N whole blocks, not K). The "
          "packed weight is an array of its real bytes, so RLX's logical rank-2 `[N, K]` u8 "
          "declaration of a packed weight has no counterpart here. RLX's CPU decodes Fp8E4m3 "
          "with exponent 15 as inf/NaN; rlx_ref reads OCP E4M3 (RLX's ScaledFormat), which "
          "differs only for |w| >= 256; RLX's CPU reads Int4Block nibbles unsigned (0..15) where "
          "its WGPU kernel and rlx_ref's record read them signed (see the scheme's doc).",
))


# ── Grouped (MoE) matmuls ───────────────────────────────────────────────────

def expert_ids(idx, num_experts: int, kind: str) -> np.ndarray:
    """f32-encoded expert ids as ints (truncated as RLX's ``as usize``); OpError if invalid."""
    v = np.asarray(idx, np.float64).reshape(-1)
    e = np.trunc(np.where(np.isfinite(v), v, 0.0))
    for i in range(v.size):
        if not np.isfinite(v[i]):
            raise OpError(f"{kind}: expert_idx[{i}] = {v[i]} is not an integer expert id")
        if not 0 <= e[i] < num_experts:
            raise OpError(f"{kind}: expert_idx[{i}] = {v[i]:g} is out of range for "
                          f"{num_experts} experts (expected 0..{num_experts - 1})")
    return e.astype(np.int64)


def _grouped(x, w_ekn, ids, wide) -> np.ndarray:
    """out[i] = x[i] · W[ids[i]], one matmul per expert that has tokens (as RLX groups them)."""
    out = np.zeros((x.shape[0], w_ekn.shape[2]), wide)
    with np.errstate(all="ignore"):
        for e in np.unique(ids):
            rows = ids == e
            out[rows] = x[rows].astype(wide) @ w_ekn[e].astype(wide)
    return out


def _check_tokens(x: Shape, idx: Shape, kind: str, cid: str):
    want(x.rank == 2, f"({cid}) {kind} takes x [M, K], got {x}")
    want(idx.rank == 1 and idx.dtype == _F32 and (not _static(x.dims[0], idx.dims[0])
                                                  or idx.dims[0] == x.dims[0]),
         f"({cid}) {kind} expert_idx must be f32 [M] (M = {x.dims[0]}, one id per token), "
         f"got {idx}")


def _infer_grouped(shapes, a):
    x, w, idx = shapes
    _check_tokens(x, idx, "GroupedMatMul", "C1")
    want(w.rank == 3, f"(C2) GroupedMatMul expert bank must be [E, K, N], got {w}")
    want(x.dtype == _F32 and w.dtype == _F32, f"(C3) GroupedMatMul x and weight must be f32, "
                                              f"got {x.dtype} and {w.dtype}")
    want(not _static(x.dims[1], w.dims[1]) or x.dims[1] == w.dims[1],
         f"(C2) GroupedMatMul K mismatch: x {x.dims_text()} has K={x.dims[1]} but the bank "
         f"{w.dims_text()} has K={w.dims[1]}; the bank is [E, K, N] (transpose an [E, N, K] "
         f"checkpoint tensor)")
    return Shape((x.dims[0], w.dims[2]), _F32)


def _ref_grouped(ctx, x, w, idx):
    ids = expert_ids(idx, w.shape[0], "GroupedMatMul")
    return _grouped(x, w, ids, ctx.out_np)


_IDS = ("expert_idx holds one f32-encoded expert id per token; ids are truncated toward "
        "zero (RLX's `as usize`), and a NaN, negative or >= E id is a run-time error (RLX "
        "would read another expert or out of bounds).")

register(OpDef(
    kind="GroupedMatMul", family="quant", arity=3, caps=BLAS,
    input_names=("input", "weight", "expert_idx"), infer=_infer_grouped,
    check=lambda s, a, o: _infer_grouped(s, a), reference=_ref_grouped,
    doc="The MoE GEMM: `out[i] = input[i] · weight[expert_idx[i]]` with input [M, K], an "
        "expert bank weight [E, K, N] and out [M, N]. RLX sorts tokens by expert, runs one "
        "GEMM per expert and unpermutes; the result is the per-token product. " + _IDS,
    constraints=("C1: input is [M, K]; expert_idx is f32 [M].",
                 "C2: weight is [E, K, N] with input's K.",
                 "C3: input and weight are f32; the output is f32 [M, N]."),
    samples=_lazy_samples("grouped_samples"), dtypes=(_F32,),
    accuracy=reduction(2, lambda a, s: s[0].dims[-1], "rss", operands=(0, 1)),
    notes="RLX accepts input [.., M, K] and reads only its last two dims; rlx_ref requires "
          "rank 2.",
))


def _check_slabs(shapes, scheme, k, n, kind):
    """(SchemeDef, slab bytes) of a GGUF expert stack [E][N][K]; OpError naming the misfit."""
    want(S.is_gguf(scheme), f"(C1) {kind} takes a GGUF scheme (scales inside the packed "
                            f"bytes), got {S.text(scheme)}")
    sd, slab = _gguf_bytes(scheme, k, n, "C3")
    want(slab > 0, f"(C3) {kind} needs K, N >= 1 (an expert slab of 0 bytes), got K={k}, "
                   f"N={n}")
    return sd, slab


def _check_dequant_grouped(shapes, a, out):
    x, packed, idx = shapes
    _check_tokens(x, idx, "DequantGroupedMatMul", "C2")
    _check_x_out(x, out, "DequantGroupedMatMul", "C2")
    k, n = x.dims[1], out.dims[1]
    if _static(k, n):
        _, slab = _check_slabs(shapes, a.scheme, k, n, "DequantGroupedMatMul")
        have = _count(packed)
        want(packed.dtype == _U8 and (have is None or (have % slab == 0 and have > 0)),
             f"(C3) DequantGroupedMatMul packed weight must be u8 holding E >= 1 slabs of "
             f"{slab} bytes (N·(K/block)·block_bytes), got {packed}")
    else:
        S.gguf_def(a.scheme, "C1")


def _expert_stack(scheme, packed, k: int, n: int) -> np.ndarray:
    """The GGUF expert stack as f32 [E, K, N] (each slab decoded as [N, K], transposed)."""
    from ..quant import dequant

    sd, slab = _gguf_bytes(scheme, k, n, "C3")
    raw = np.asarray(packed).reshape(-1)
    want(slab > 0 and raw.size % slab == 0 and raw.size > 0,
         f"(C3) the packed weight holds {raw.size} bytes, not a whole number of "
         f"{slab}-byte expert slabs")
    e = raw.size // slab
    return dequant(raw, sd.name, num_elements=e * n * k).reshape(e, n, k).transpose(0, 2, 1)


def _ref_dequant_grouped(ctx, x, packed, idx):
    w = _expert_stack(ctx.attrs.scheme, packed, x.shape[1], ctx.out_dims[1])
    ids = expert_ids(idx, w.shape[0], "DequantGroupedMatMul")
    return _grouped(x, w, ids, ctx.out_np)


register(OpDef(
    kind="DequantGroupedMatMul", family="quant", attrs=SchemeAttrs, payload="struct", arity=3,
    caps=BLAS, input_names=("input", "packed_w", "expert_idx"),
    check=_check_dequant_grouped, reference=_ref_dequant_grouped,
    doc="GroupedMatMul against a GGUF expert stack: packed_w holds E contiguous slabs, "
        "expert e a GGML `[N, K]` matrix (blocks along K) of `N·(K/block)·block_bytes` "
        "bytes, so `out[i] = input[i] · dequant(slab[expert_idx[i]])ᵀ`, N from the declared "
        "output [M, N] and E = bytes / slab. " + _IDS,
    constraints=("C1: the scheme is a GGUF scheme rlx_ref decodes.",
                 "C2: input is f32 [M, K], expert_idx f32 [M], the declared output f32 "
                 "[M, N].",
                 "C3: K is a multiple of the block size and packed_w is u8 holding a whole, "
                 "non-zero number of slabs."),
    samples=_lazy_samples("dequant_grouped_samples"), dtypes=(_F32,),
    accuracy=reduction(2, lambda a, s: s[0].dims[-1], "all", reason=_WHY_ALL),
))


def _check_moe_weights(shapes, a, out):
    packed, = shapes
    want(out.rank == 3 and out.dtype == _F32,
         f"(C2) DequantMoEWeights declares f32 [E, K, N], got {out}")
    if _static(*out.dims):
        e, k, n = out.dims
        _, slab = _check_slabs(shapes, a.scheme, k, n, "DequantMoEWeights")
        _check_packed(packed, e * slab, "packed_w", "C3")
    else:
        S.gguf_def(a.scheme, "C1")


def _ref_moe_weights(ctx, packed):
    e, k, n = ctx.out_dims
    w = _expert_stack(ctx.attrs.scheme, packed, k, n)
    want(w.shape[0] == e, f"(C3) packed_w holds {w.shape[0]} experts, declared {e}")
    return w.astype(ctx.out_np)


register(OpDef(
    kind="DequantMoEWeights", family="quant", attrs=SchemeAttrs, payload="struct", arity=1,
    caps=BLAS, input_names=("packed_w",), check=_check_moe_weights,
    reference=_ref_moe_weights,
    doc="Decodes a GGUF expert stack into GroupedMatMul's layout: the declared output "
        "[E, K, N] f32 holds `out[e, k, n] = W_e[n, k]`, where slab e of packed_w is the "
        "GGML `[N, K]` matrix of expert e. Values are the scheme's exact f32 decodes.",
    constraints=("C1: the scheme is a GGUF scheme rlx_ref decodes.",
                 "C2: the declared output is f32 [E, K, N].",
                 "C3: K is a multiple of the block size and packed_w is u8 with exactly "
                 "E·N·(K/block)·block_bytes bytes."),
    samples=_lazy_samples("moe_weights_samples"), dtypes=(_F32,), accuracy=exact(),
))


# ── LoraMatMul ──────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class LoraAttrs:
    scale: float = attr(F32, doc="the adapter's alpha / rank")


def _infer_lora(shapes, a):
    x, w, la, lb = shapes
    want(all(s.dtype == _F32 for s in shapes),
         f"(C1) LoraMatMul operands must be f32, got {', '.join(str(s.dtype) for s in shapes)}")
    want(x.rank >= 2 and w.rank == 2 and la.rank == 2 and lb.rank == 2,
         f"(C2) LoraMatMul takes x [..., M, K], w [K, N], a [K, R], b [R, N], got {x}, {w}, "
         f"{la}, {lb}")
    k, n, r = w.dims[0], w.dims[1], la.dims[1]
    pairs = (("x's K", x.dims[-1], "w's K", k), ("a's K", la.dims[0], "w's K", k),
             ("b's R", lb.dims[0], "a's R", r), ("b's N", lb.dims[1], "w's N", n))
    for n1, d1, n2, d2 in pairs:
        want(not _static(d1, d2) or d1 == d2, f"(C2) LoraMatMul {n1} ({d1}) != {n2} ({d2})")
    want(math.isfinite(a.scale), f"(C3) LoraMatMul scale must be finite, got {a.scale}")
    return Shape(tuple(x.dims[:-1]) + (n,), _F32)


def _ref_lora(ctx, x, w, la, lb):
    wide = ctx.out_np
    x2 = x.reshape(-1, x.shape[-1]).astype(wide)
    with np.errstate(all="ignore"):
        y = x2 @ w.astype(wide)
        t = x2 @ la.astype(wide)           # the rank-R intermediate, scaled before B as RLX
        if ctx.attrs.scale != 1.0:
            t = t * wide.type(ctx.attrs.scale)
        y = y + t @ lb.astype(wide)
    return y.reshape(ctx.out_dims).astype(wide)


register(OpDef(
    kind="LoraMatMul", family="quant", attrs=LoraAttrs, payload="struct", arity=4,
    caps=BLAS | Caps.FUSED, input_names=("x", "w", "a", "b"), infer=_infer_lora,
    check=lambda s, a, o: _infer_lora(s, a), reference=_ref_lora,
    doc="Fused LoRA: `out = x·W + (scale·(x·A))·B` with x [..., M, K], W [K, N], A [K, R], "
        "B [R, N] (R the adapter rank); the rank-R product is scaled before it meets B, as "
        "RLX's CPU does.",
    constraints=("C1: all four operands are f32; the output is f32.",
                 "C2: x [..., M, K], w [K, N], a [K, R] and b [R, N] agree on K, N and R.",
                 "C3: scale is finite."),
    samples=_lazy_samples("lora_samples"), dtypes=(_F32,),
    accuracy=reduction(3, lambda a, s: s[0].dims[-1] + s[2].dims[-1], "all",
                       reason="two chained products; a negative scale defeats the rss bound"),
))
