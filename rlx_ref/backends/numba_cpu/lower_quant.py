"""Numba lowering of the dequantizing products: DequantMatMul, DequantGroupedMatMul and
DequantMoEWeights, on the fused GGUF kernels of ``_quant_matmul`` / ``_quant_grouped`` and
the 4-operand kernel of ``_quant_linear_src``.

Every GGUF scheme rlx_ref decodes has a numba block decoder (``_quant_decode``): m = 1 runs
the GEMV kernel, m > 1 BLAS over decoded tiles, an expert stack the grouped product (tokens
counting-sorted by expert, one product per expert, unpermuted) or the [E, K, N] decode. The
4-operand Int8Block, Int8BlockAsym, Int4Block, Fp8E4m3, Fp8E5m2 and Nvfp4Block decode
inside the K loop. The MLX schemes, which no numba kernel decodes, run the reference on the
host (the lowering's reason and the step's note say so). No kernel writes W out as f32.
"""
from __future__ import annotations

import numpy as np

from ...ir.dtype import DType
from .. import quant_lowering as Q
from ...ops import _quant_scheme as S
from ...ops.opdef import RefCtx, get
from ...ops.quant_matmul import expert_ids
from ...quant import get_scheme
from ...quant import linear as QL
from ._quant_decode import DECODERS
from ._quant_grouped import _SORT_SRC, dequant_grouped_matmul
from ._quant_linear_src import SCHEMES, linear_source
from ._quant_matmul import dequant_moe_weights, kernel, plan_dequant_matmul
from .kernels import compile_kernel
from .lowering import Step, lowers
from .variant_table import use

F32 = (DType.F32,)
PANEL_COLS = 64             # output columns per task of the 4-operand product

_KERNEL_GGUF = ", ".join(sorted(DECODERS))
HOST_WHY = ("schemes with no numba-cpu decoder (the MLX layouts) run the reference on the "
            "host")
DMM_WHY = (f"fused kernels for GGUF {_KERNEL_GGUF} and the 4-operand {', '.join(SCHEMES)}; "
           f"{HOST_WHY}")
GGUF_WHY = f"fused kernels for GGUF {_KERNEL_GGUF}"


def kernel_decodes(scheme) -> bool:
    """Whether a numba kernel decodes GGUF ``scheme`` (an RLX QuantScheme)."""
    return Q.kernel_decodes(scheme, DECODERS)


def host_gguf() -> list:
    """GGUF names of the schemes rlx_ref decodes and no numba kernel does (none today)."""
    return Q.host_gguf(DECODERS)


def _host(node, why: str) -> Step:
    """The registry reference on the host, written into the planned output."""
    ref, ctx = get(node.kind).reference, RefCtx(node.attrs, node.shape, node=node)

    def run(out, *xs):
        out[...] = np.asarray(ref(ctx, *xs)).reshape(out.shape)
    return Step(run, [], note=f"host: {why}")


@lowers("DequantMatMul", F32, reason=DMM_WHY)
def lower_dequant_matmul(node, ins, ctx) -> Step:
    scheme = node.attrs.scheme
    m, k, n = Q.product_dims(node, ins)
    if S.is_gguf(scheme):
        if not kernel_decodes(scheme):
            return _host(node, f"no numba-cpu decoder for {S.text(scheme)}")
        plan = plan_dequant_matmul(get_scheme(S.name_of(scheme)), m, k, n)
        if plan.path in ("gemv", "tiles"):
            use(f"quant.{plan.path}")
        kern = kernel(plan.scheme, plan.block_size)

        def run(out, x, packed):
            plan.run(x.reshape(m, k), packed.reshape(-1), out.reshape(m, n), kern)
        return Step(run, [kern], note=plan.path)
    if S.name_of(scheme) not in SCHEMES:
        return _host(node, f"no numba-cpu kernel for {S.text(scheme)}")
    return _linear_step(scheme, m, k, n)


def _tables(name: str) -> tuple:
    """(value table of the codes, NVFP4 block-scale table): the record's own arrays."""
    code = QL.LINEAR[name].code
    tab = {"e4m3": QL.E4M3, "e5m2": QL.E5M2, "e2m1": QL.E2M1}.get(code, QL.E2M1)
    return np.ascontiguousarray(tab, np.float32), np.ascontiguousarray(QL.E4M3_SCALE)


def _linear_step(scheme, m: int, k: int, n: int) -> Step:
    use("quant.linear")
    name = S.name_of(scheme)
    kern = compile_kernel("qlin", linear_source(name))
    tab, stab = _tables(name)
    bs = S.scale_block(scheme, k)
    codes = np.int8 if QL.LINEAR[name].code == "i8" else np.uint8

    def run(out, x, w_q, scale, zp):
        if m * n == 0:
            return
        kern.fn(out.reshape(m, n), x.reshape(m, k), w_q.reshape(-1).view(codes),
                scale.reshape(-1), zp.reshape(-1), tab, stab, k, bs, PANEL_COLS)
    return Step(run, [kern], note="linear")


@lowers("DequantGroupedMatMul", F32, reason=GGUF_WHY)
def lower_dequant_grouped(node, ins, ctx) -> Step:
    scheme = node.attrs.scheme
    if not kernel_decodes(scheme):
        return _host(node, f"no numba-cpu decoder for {S.text(scheme)}")
    use("quant.grouped")
    sd = get_scheme(S.name_of(scheme))
    n = node.shape.dims[1]
    kern = kernel(sd.name, sd.block_size)

    def run(out, x, packed, idx):
        raw = packed.reshape(-1)
        slab = n * (x.shape[1] // sd.block_size) * sd.block_bytes      # > 0: checked (C3)
        # the oracle's check and wording first: no kernel reads an expert that is not there
        ids = expert_ids(idx, raw.size // slab, "DequantGroupedMatMul")
        dequant_grouped_matmul(x, raw, ids, n, raw.size // slab, sd, out=out)
    return Step(run, [kern, compile_kernel("moe_sort", _SORT_SRC)], note="grouped")


@lowers("DequantMoEWeights", F32, reason=GGUF_WHY)
def lower_dequant_moe_weights(node, ins, ctx) -> Step:
    scheme = node.attrs.scheme
    if not kernel_decodes(scheme):
        return _host(node, f"no numba-cpu decoder for {S.text(scheme)}")
    use("quant.moe_weights")
    sd = get_scheme(S.name_of(scheme))
    e, k, n = node.shape.dims
    kern = kernel(sd.name, sd.block_size)

    def run(out, packed):
        dequant_moe_weights(packed.reshape(-1), sd, e, k, n, out=out)
    return Step(run, [kern], note="moe weights")
