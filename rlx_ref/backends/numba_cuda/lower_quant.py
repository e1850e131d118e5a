"""The dequantizing matmuls as CUDA kernels: DequantMatMul, DequantMoEWeights,
DequantGroupedMatMul and GroupedMatMul.

GGUF weights are never expanded: a single x row runs the GEMV kernel, more rows the
tiled one (``_quant_kernels``), each decoding W block by block inside the product.
DequantMoEWeights is the dequant-only kernel. The grouped (MoE) kinds validate the expert
ids on the host before any launch (a bad id is an error naming the token, as the
oracle's), sort the tokens by expert (a stable sort: tokens keep their order within an
expert), then launch one product per expert that has tokens: its rows are read through
the sorted token table and written back to their own output rows (the unpermute).
DequantMatMul's 4-operand forms are lowered in ``lower_quant_dense``. The GGUF schemes
without a CUDA decoder (the IQ2/IQ3/IQ1 codebook formats) run the host reference, as the
kinds' declared reason says and the step's note names.
"""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType
from ...ops import _quant_scheme as S
from ...ops.quant_matmul import expert_ids
from ._gemm import gemm_blocks, render_gemm, tiling
from ._quant_kernels import DECODERS, block_of, dequant_launch, gemv_launch, tiled_launch
from ._quant_kernels import tiled_tiling
from .device import DeviceConst, block_threads, import_cuda, launch_shape, numel, rows_shape
from .kernels import Launch, array_type, compile_kernel, int_type
from .lowering import Step, lowers

F32 = (DType.F32,)
_DECODED = ", ".join(DECODERS)
GGUF_WHY = (f"GGUF {_DECODED} decode block by block inside the kernels; the IQ2/IQ3/IQ1 "
            "codebook schemes have no CUDA decoder and run the host reference")


class GgufProduct:
    """``out[rows] = x[rows] · W^T`` for a GGUF weight, GEMV or tiled by the row count."""

    def __init__(self, blk, m_hint: int, n: int, k: int, grouped: bool = False):
        self.blk, self.n, self.k = blk, n, k
        self.nblk = k // blk.qk
        self.threads = block_threads()
        self.gemv = gemv_launch(blk, self.threads, grouped)
        self.tl = tiled_tiling(m_hint, n)
        self.tiled = tiled_launch(blk, self.tl, grouped)
        self.no_perm = DeviceConst(np.zeros(1, np.int64))

    def launches(self) -> list:
        return [self.gemv, self.tiled]

    def __call__(self, out, x, w, m: int, wbase: int = 0, perm=None, poff: int = 0):
        perm = self.no_perm.get() if perm is None else perm
        args = (out, x, w, m, self.n, self.k, self.nblk, wbase, perm, poff)
        if m == 1:
            warps = self.threads // 32
            grid, threads = rows_shape(-(-self.n // warps), self.threads)
            self.gemv(grid, threads, *args)
        else:
            tiles = gemm_blocks(self.tl, m, self.n, 1)
            grid, threads = rows_shape(tiles, self.tl.threads)
            self.tiled(grid, threads, *args)


def _has_decoder(scheme) -> bool:
    return S.gguf_def(scheme, "C1").name in DECODERS


def _host(node, ins) -> Step:
    """The host reference for a GGUF scheme without a CUDA decoder (named in the note)."""
    from .lower_host import host_step       # imported late: it claims what is left

    name = S.gguf_def(node.attrs.scheme, "C1").name
    return host_step(node, ins, note=f"host reference: no CUDA decoder for {name}")


@lowers("DequantMatMul", F32, reason="GEMV for one x row, tiled otherwise: " + GGUF_WHY
        + "; the 4-operand schemes decode each weight in a tiled GEMM's loader")
def lower_dequant_matmul(node, ins, ctx) -> Step:
    scheme = node.attrs.scheme
    if not S.is_gguf(scheme):
        from .lower_quant_dense import dense_dequant_step

        return dense_dequant_step(node, ins)
    if not _has_decoder(scheme):
        return _host(node, ins)
    k, n = int(ins[0].dims[-1]), int(node.shape.dims[-1])
    m = numel(ins[0].dims[:-1])
    prod = GgufProduct(block_of(S.gguf_def(scheme, "C1").name), m, n, k)

    def run(out, x, w):
        if out.size:                # K = 0 runs too: the kernels store zeros
            prod(out, x, w, m)
    return Step(run, prod.launches())


@lowers("DequantMoEWeights", F32, reason="dequant-only kernel: " + GGUF_WHY)
def lower_dequant_moe_weights(node, ins, ctx) -> Step:
    scheme = node.attrs.scheme
    if not _has_decoder(scheme):
        return _host(node, ins)
    e, k, n = (int(d) for d in node.shape.dims)
    blk = block_of(S.gguf_def(scheme, "C1").name)
    launch = dequant_launch(blk)
    nblk = k // blk.qk
    total = e * n * nblk * blk.nsub

    def run(out, w):
        if total:
            grid, threads = launch_shape(total)
            launch(grid, threads, out.reshape(e * k, n), w, total, n, nblk, k)
    return Step(run, [launch])


def _by_expert(idx, experts: int, kind: str):
    """(token order sorted by expert, tokens per expert) after validating every id."""
    ids = expert_ids(idx.copy_to_host(), experts, kind)      # raises before any launch
    return np.argsort(ids, kind="stable").astype(np.int64), np.bincount(ids,
                                                                        minlength=experts)


def _per_expert(out, x, idx, experts: int, kind: str, launch_one) -> None:
    """Validate, sort, then ``launch_one(expert, count, perm, offset)`` per used expert."""
    order, counts = _by_expert(idx, experts, kind)
    if not order.size:
        return
    perm = import_cuda().to_device(order)
    off = 0
    for ex in range(experts):
        c = int(counts[ex])
        if c:
            launch_one(ex, c, perm, off)
        off += c


@lowers("DequantGroupedMatMul", F32, reason="ids checked and tokens sorted by expert on the "
        "host, then one fused product per expert: " + GGUF_WHY)
def lower_dequant_grouped(node, ins, ctx) -> Step:
    scheme = node.attrs.scheme
    if not _has_decoder(scheme):
        return _host(node, ins)
    m, k = (int(d) for d in ins[0].dims)
    n = int(node.shape.dims[1])
    blk = block_of(S.gguf_def(scheme, "C1").name)
    slab = n * (k // blk.qk) * blk.bb
    experts = numel(ins[1].dims) // slab
    # the average expert's token count picks the tile shape
    prod = GgufProduct(blk, max(1, m // max(experts, 1)), n, k, grouped=True)

    def run(out, x, w, idx):
        def one(ex, count, perm, off):
            prod(out, x, w, count, ex * slab, perm, off)
        _per_expert(out, x, idx, experts, "DequantGroupedMatMul", one)
    return Step(run, prod.launches())


@lowers("GroupedMatMul", F32, reason="f32 register-tiled GEMM per expert over the tokens "
                                     "sorted by expert, written back to their rows")
def lower_grouped(node, ins, ctx) -> Step:
    m, k = (int(d) for d in ins[0].dims)
    experts, _, n = (int(d) for d in ins[1].dims)
    tl = tiling("np.float32", max(1, m // max(experts, 1)), n)
    name, source = render_gemm(
        "qgroup", "np.float32", tl, load_a="v = a[perm[poff + row] * k_len + ka]",
        load_b="v = b[wbase + kb * n + col]", store="out[perm[poff + row] * n + col] = value",
        extra=("perm", "poff", "wbase"))
    f32, i64 = array_type(np.float32), int_type()
    launch = Launch(compile_kernel(name, source),
                    (f32, f32, f32, i64, i64, i64, i64, array_type(np.int64), i64, i64))

    def run(out, x, w, idx):
        def one(ex, count, perm, off):
            grid, threads = rows_shape(gemm_blocks(tl, count, n, 1), tl.threads)
            launch(grid, threads, out, x, w, count, n, k, 1, perm, off, ex * k * n)
        _per_expert(out, x, idx, experts, "GroupedMatMul", one)
    return Step(run, [launch])
