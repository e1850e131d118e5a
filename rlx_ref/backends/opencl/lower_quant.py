"""OpenCL lowering of the dequantizing products: DequantMatMul, DequantGroupedMatMul and
DequantMoEWeights, on the fused kernels of ``_quant_matmul`` / ``_quant_grouped`` (GGUF)
and ``_quant_linear_src`` (the 4-operand schemes).

A GGUF scheme runs natively when an OpenCL decoder is written for it (``DECODERS``, its
geometry checked against the scheme record); the 4-operand Int8Block, Int8BlockAsym,
Int4Block, Fp8E4m3, Fp8E5m2 and Nvfp4Block decode inside the product loop. The schemes
rlx_ref decodes but no kernel does (the codebook IQ1/IQ2/IQ3 families, GGUF NVFP4, the MLX
layouts) run the reference on the host: the path each kind's ``reason`` names, recorded
as the ``host.reference`` variant and in the step's note. No kernel writes W out as
f32.
"""
from __future__ import annotations

from ...ir.dtype import DType
from .. import quant_lowering as Q
from ...ops import _quant_scheme as S
from . import _reduce_c as rc
from ._quant_decode_src import DECODERS
from ._quant_grouped import QuantGroupedMatMul
from ._quant_linear_src import ROWS, SCHEMES, linear_source
from ._quant_matmul import QuantDequant, QuantMatMul, geometry, slab_bytes
from .launch import bind_nd, round_up, scalar
from .lowering import Step, lowers
from .variant_table import use

F32 = (DType.F32,)


_KERNEL_GGUF = ", ".join(sorted(DECODERS))
_HOST_GGUF = ", ".join(Q.host_gguf(DECODERS))
HOST_WHY = (f"GGUF schemes with no OpenCL decoder ({_HOST_GGUF}) run the reference on the "
            "host (variant host.reference)")
DMM_WHY = (f"fused kernels for GGUF {_KERNEL_GGUF} and the 4-operand {', '.join(SCHEMES)}; "
           f"{HOST_WHY}, as do the MLX schemes")


def kernel_decodes(scheme) -> bool:
    """Whether a fused OpenCL kernel decodes GGUF ``scheme`` (an RLX QuantScheme)."""
    return Q.kernel_decodes(scheme, DECODERS)


def _host(node, ins, ctx, why: str) -> Step:
    """The reference on the host (lower_host is imported late: importing it registers the
    host path of every kind still unclaimed, which must wait for the whole table)."""
    from .lower_host import lower_host

    step = lower_host(node, ins, ctx)
    step.note = f"host: {why}"
    return step


def _product_variants(ctx, path: str) -> None:
    """Record the kernels a GGUF product plan runs (``QuantMatMul.path`` or its
    grouped counterpart)."""
    style = "gpu" if rc.gpu_style(ctx.device) else "cpu"
    if path in ("gemv", "tiled"):
        use(f"quant.{path}_{style}")
    elif path == "gemv-groups":
        use("quant.gemv_groups")


@lowers("DequantMatMul", F32, reason=DMM_WHY)
def lower_dequant_matmul(node, ins, ctx) -> Step:
    scheme = node.attrs.scheme
    m, k, n = Q.product_dims(node, ins)
    if S.is_gguf(scheme):
        if not kernel_decodes(scheme):
            return _host(node, ins, ctx, f"no OpenCL decoder for {S.text(scheme)}")
        plan = QuantMatMul(ctx, S.name_of(scheme), m, n, k)
        _product_variants(ctx, plan.path)
        return Step(plan.bind, note=plan.path)
    if S.name_of(scheme) not in SCHEMES:
        return _host(node, ins, ctx, f"no OpenCL kernel for {S.text(scheme)}")
    return _linear_step(node, ctx, scheme, m, k, n)


def _linear_step(node, ctx, scheme, m: int, k: int, n: int) -> Step:
    use("quant.linear")
    name, src = linear_source(S.name_of(scheme))
    ref = ctx.kernel(src, name)
    l0 = rc.item_local(ctx.device, n)
    gsz, lsz = (round_up(n, l0), -(-m // ROWS)), (l0, 1)
    bs = S.scale_block(scheme, k)

    def bind(out, x, w_q, scale, zp):
        args = [out.buf, x.buf, w_q.buf, scale.buf, zp.buf, scalar(m, "int"),
                scalar(n, "int"), scalar(k, "int"), scalar(bs, "int")]
        return bind_nd(ref, ctx.queue, gsz, lsz, args)
    return Step(bind, note="linear")


@lowers("DequantGroupedMatMul", F32, reason=HOST_WHY)
def lower_dequant_grouped(node, ins, ctx) -> Step:
    scheme = node.attrs.scheme
    if not kernel_decodes(scheme):
        return _host(node, ins, ctx, f"no OpenCL decoder for {S.text(scheme)}")
    (m, k), n = tuple(ins[0].dims), node.shape.dims[1]
    dec, geo = geometry(S.name_of(scheme))
    experts = ins[1].numel // slab_bytes(dec.name, geo, n, k)
    plan = QuantGroupedMatMul(ctx, dec.name, m, n, k, experts)
    use("quant.grouped")
    p = plan.product
    if p.gemv:
        _product_variants(ctx, "gemv")
    if p.tiled is not None:
        _product_variants(ctx, "tiled")
    elif m > max(p.gemv, default=0):
        _product_variants(ctx, "gemv-groups")
    return Step(plan.bind, note="grouped")


@lowers("DequantMoEWeights", F32, reason=HOST_WHY)
def lower_dequant_moe_weights(node, ins, ctx) -> Step:
    scheme = node.attrs.scheme
    if not kernel_decodes(scheme):
        return _host(node, ins, ctx, f"no OpenCL decoder for {S.text(scheme)}")
    e, k, n = node.shape.dims
    use("quant.moe_weights")
    plan = QuantDequant(ctx, S.name_of(scheme), 0, moe=(e, k, n))
    return Step(plan.bind, note="moe weights")
