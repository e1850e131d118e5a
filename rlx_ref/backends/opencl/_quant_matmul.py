"""Fused dequant products on an OpenCL device: DequantMatMul (GGUF form) and the dequant
of packed weights, planned like the other linalg steps (``_linalg_plan``).

``QuantMatMul(ctx, scheme, m, n, k).bind(out, x, packed)`` returns the launcher of
``out[m, n] = x[m, k] · Wᵀ`` with W ``[n, k]`` stored as GGUF blocks of ``scheme`` over
the flat index (RLX's ``gguf_matmul_bt``); ``QuantDequant`` decodes packed bytes to f32.
``ctx`` is a lowering's ``LowerCtx`` (device, program, queue); ``standalone_ctx`` makes
one for a device, which the host functions in ``quant_ops`` use. The block geometry comes
from the scheme record (``rlx_ref.quant.get_scheme``) and must match the decoder's; byte
and element counts are checked on the host before anything is enqueued, so no kernel
reads outside a buffer. Paths (``_quant_kernels_src``): GEMV for at most GEMV_ROWS x rows,
tiled for more, the scalar kernel when k is not a multiple of 32; GPU-style or CPU-style
kernels as ``gpu_style`` says. No f32 copy of W is made: the CPU tiled path's only scratch
is its k-major x panels, packed a chunk at a time within a twelfth of the operands.
"""
from __future__ import annotations

import math

from ...quant import QuantError, get_scheme
from . import _quant_kernels_src as src
from . import _reduce_c as rc
from ._linalg_cl import scratch
from ._linalg_plan import gpu_local
from ._quant_decode_src import DECODERS
from .launch import bind_nd, round_up, scalar

GEMV_ROWS = 4                # at most this many x rows: the GEMV kernels
GPU_REG = 4                  # GPU tiled kernel: QR × QR outputs per work-item
SCRATCH_SHARE = 12           # CPU tiled: x panels within 1/12 of the operands' bytes
SCRATCH_FLOOR = 0            # CPU tiled: scratch allowed whatever the operands (tests)
MAX_PANELS = 8               # CPU tiled: x panels one work-item multiplies per decode


def geometry(scheme):
    """(Decoder, (block_size, block_bytes)) of ``scheme`` (name, RLX name or record)."""
    name = getattr(scheme, "name", scheme)
    try:
        sd = get_scheme(scheme)
    except QuantError:
        if name not in DECODERS:
            raise
        sd = None           # a format the registry does not hold yet: the decoder's own
    if sd is not None:
        if sd.kind != "gguf":
            raise QuantError(f"{sd.name} is not a GGUF block scheme: it has no fused "
                             "OpenCL dequant kernel")
        name = sd.name
    dec = DECODERS.get(name)
    if dec is None:
        raise QuantError(f"no OpenCL decoder for quant scheme {name}; decoders exist for "
                         f"{', '.join(DECODERS)}")
    geo = (dec.block_size, dec.block_bytes) if sd is None else (sd.block_size,
                                                                 sd.block_bytes)
    if geo != (dec.block_size, dec.block_bytes):
        raise QuantError(f"{name}: the scheme record says {geo[0]}-element blocks of "
                         f"{geo[1]} bytes but the OpenCL decoder is written for "
                         f"{dec.block_size} elements in {dec.block_bytes} bytes")
    return dec, geo


def slab_bytes(name: str, geo: tuple, n: int, k: int) -> int:
    """Bytes of one packed [n, k] weight; n·k must be a whole number of blocks."""
    bs, bb = geo
    if n < 0 or k < 0:
        raise QuantError(f"{name}: bad weight shape [{n}, {k}]")
    if (n * k) % bs:
        raise QuantError(f"{name}: a [{n}, {k}] weight holds {n * k} elements, not a "
                         f"multiple of the {bs}-element block")
    return n * k // bs * bb


def check_array(what: str, arr, size: int, dtype: str) -> None:
    """``arr`` (DevArray) holds exactly ``size`` elements of ``dtype``."""
    if str(arr.dtype) != dtype:
        raise QuantError(f"{what} must be {dtype}, got {arr.dtype}")
    if arr.size != size:
        raise QuantError(f"{what} holds {arr.size} elements ({arr.size * arr.dtype.itemsize}"
                         f" bytes) but the op needs {size}")


def cpu_lanes(device) -> int:
    """Vector lanes (x rows per panel) of the CPU tiled kernel: one native float vector."""
    return max(4, min(16, device.vector_bytes // 4))


class Product:
    """The kernels of one dequant product shape, launched over a range of x rows.

    ``specs(...)`` lists (kernel, global, local, args) for rows ``r0 .. r0+count`` (through
    the ``rows`` table when ``indirect``) and the weight at byte ``w_off``: the plain
    product binds them once, the grouped one per expert and run."""

    def __init__(self, ctx, scheme, max_rows: int, n: int, k: int, indirect: bool = False,
                 counts=None, packed_bytes: int | None = None):
        self.ctx, self.n, self.k, self.max_rows = ctx, n, k, max_rows
        self.dec, self.geo = geometry(scheme)
        self.name = self.dec.name
        self.slab = slab_bytes(self.name, self.geo, n, k)
        self.packed_bytes = self.slab if packed_bytes is None else packed_bytes
        self.gpu = rc.gpu_style(ctx.device)
        dev, dec, geo = ctx.device, self.dec, self.geo
        counts = sorted(set(counts if counts is not None else [max_rows]))
        self.gemv, self.tiled, self.pack, self.any = {}, None, None, None
        if max_rows * n == 0:
            return
        if k % 32:
            self.any = self._ref(src.straddle(dec, geo, indirect, not self.gpu))
            return
        gemv = {c for c in counts if 0 < c <= GEMV_ROWS}
        if any(c > GEMV_ROWS for c in counts):
            if self.gpu:
                self.L = gpu_local(dev)
                self.tiled = self._ref(src.tiled_gpu(dec, geo, self.L, GPU_REG, indirect))
            else:
                self.lanes = cpu_lanes(dev)
                self.tn = 16 if self.lanes >= 16 else 8
                self._plan_panels()
                if self.chunk:
                    self.pack = self._ref(src.pack_cpu(dec, geo, self.lanes, indirect))
                    self.tiled = self._ref(src.tiled_cpu(dec, geo, self.lanes, self.tn,
                                                         self.chunk, indirect))
            if self.tiled is None:      # GEMV over groups of rows (see _plan_panels)
                gemv |= {GEMV_ROWS} | {c % GEMV_ROWS for c in counts if c % GEMV_ROWS}
        for c in sorted(gemv):
            self.gemv[c] = self._ref(
                src.gemv_gpu(dec, geo, c, indirect, self._gemv_local()) if self.gpu
                else src.gemv_cpu(dec, geo, c, indirect))

    def _ref(self, named: tuple):
        name, source = named
        return self.ctx.kernel(source, name)

    def _gemv_local(self) -> int:
        return rc.wg_size(self.ctx.device, 128)

    def _plan_panels(self) -> None:
        """Panels per chunk of the CPU tiled path and the scratch they take: within the
        share of the operands' bytes. Where not even one panel fits (a small weight beside
        many rows), chunk is 0 and the GEMV kernels run over groups of rows instead."""
        self.panel_bytes = self.lanes * self.k * 4
        operands = (self.max_rows * (self.k + self.n)) * 4 + self.packed_bytes
        budget = max(operands // SCRATCH_SHARE, SCRATCH_FLOOR)
        cap = budget // max(self.panel_bytes, 1)
        self.chunk = min(cap, MAX_PANELS, -(-self.max_rows // self.lanes))
        if self.chunk:
            self.scratch = scratch(self.ctx)
            self.scratch.need(self.chunk * self.panel_bytes)

    def specs(self, out, x, packed, rows, r0: int, count: int, w_off: int) -> list:
        """(kernel ref, global size, local size, args) of rows r0 .. r0+count."""
        if count == 0 or self.n == 0:
            return []
        n, k, dev = self.n, self.k, self.ctx.device
        head = [out.buf, x.buf, packed.buf, scalar(w_off), (rows or x).buf, scalar(r0, "int")]
        dims = [scalar(count, "int"), scalar(n, "int"), scalar(k, "int")]
        if self.any is not None:
            l0 = rc.wg_size(dev, 64) if self.gpu else rc.cpu_local(dev, n)
            return [(self.any, (round_up(n, l0), -(-count // 4)), (l0, 1), head + dims)]
        if count in self.gemv:
            if self.gpu:
                ql = self._gemv_local()
                return [(self.gemv[count], (n * ql,), (ql,), head + dims[1:])]
            lsz = rc.cpu_local(dev, n)
            return [(self.gemv[count], (round_up(n, lsz),), (lsz,), head + dims[1:])]
        if self.tiled is None:
            if GEMV_ROWS not in self.gemv:
                raise QuantError(f"{self.name}: no kernel was planned for {count} rows")
            return [spec for g0 in range(0, count, GEMV_ROWS)
                    for spec in self.specs(out, x, packed, rows, r0 + g0,
                                           min(GEMV_ROWS, count - g0), w_off)]
        if self.gpu:
            L, qt = self.L, self.L * GPU_REG
            gsz = (-(-n // qt) * L, -(-count // qt) * L)
            return [(self.tiled, gsz, (L, L), head + dims)]
        buf = self.scratch.buffer(self.chunk * self.panel_bytes)
        panels, out_specs = -(-count // self.lanes), []
        lp = rc.cpu_local(dev, k)
        for p0 in range(0, panels, self.chunk):
            np_ = min(self.chunk, panels - p0)
            pack_args = [buf, x.buf, (rows or x).buf, scalar(r0, "int"),
                         scalar(count, "int"), scalar(k, "int"), scalar(p0, "int")]
            out_specs.append((self.pack, (round_up(k, lp), np_), (lp, 1), pack_args))
            mm_args = [out.buf, buf, packed.buf, scalar(w_off), (rows or x).buf,
                       scalar(r0, "int")] + dims + [scalar(p0, "int"), scalar(np_, "int")]
            out_specs.append((self.tiled, (-(-n // self.tn),), (1,), mm_args))
        return out_specs


class QuantMatMul:
    """DequantMatMul ``out[m, n] = x[m, k] · Wᵀ`` over packed GGUF blocks (one step)."""

    def __init__(self, ctx, scheme, m: int, n: int, k: int):
        self.m, self.n, self.k = m, n, k
        self.product = Product(ctx, scheme, m, n, k)
        self.queue = ctx.queue

    @property
    def path(self) -> str:
        """Which kernels run: ``gemv``, ``tiled``, ``straddle`` or ``empty``."""
        p = self.product
        if self.m * self.n == 0:
            return "empty"
        if p.any:
            return "straddle"
        return "gemv" if self.m in p.gemv else ("tiled" if p.tiled else "gemv-groups")

    def bind(self, out, x, packed):
        """The launcher; sizes are checked here, before anything is enqueued."""
        p = self.product
        check_array(f"{p.name} DequantMatMul x", x, self.m * self.k, "float32")
        check_array(f"{p.name} DequantMatMul packed weight", packed, p.slab, "uint8")
        check_array(f"{p.name} DequantMatMul output", out, self.m * self.n, "float32")
        launches = [bind_nd(ref, self.queue, g, l, a)
                    for ref, g, l, a in p.specs(out, x, packed, None, 0, self.m, 0)]
        held = (self, out, x, packed)   # kernel arguments do not keep buffers alive

        def launch():
            for go in launches:
                go()
        launch.held = held
        return launch


class QuantDequant:
    """Packed GGUF blocks -> f32: flat ``[num_elements]``, or per expert ``[E, k, n]`` from
    ``E`` slabs of ``[n, k]`` (DequantMoEWeights: each slab transposed)."""

    def __init__(self, ctx, scheme, num_elements: int, moe: tuple | None = None):
        self.ctx = ctx
        self.dec, self.geo = geometry(scheme)
        bs, bb = self.geo
        name = self.dec.name
        if moe is not None:
            e, k, n = moe
            if e < 0:
                raise QuantError(f"{name}: bad expert count {e}")
            self.slab_elems = n * k
            self.nbytes = e * slab_bytes(name, self.geo, n, k)
            num_elements = e * n * k
        else:
            if num_elements < 0 or num_elements % bs:
                raise QuantError(f"{name}: {num_elements} elements is not a whole number "
                                 f"of {bs}-element blocks")
            self.slab_elems = max(num_elements, 1)
            self.nbytes = num_elements // bs * bb
        self.moe, self.num_elements = moe, num_elements
        name_src = src.dequant(self.dec, self.geo, moe is not None,
                               not rc.gpu_style(ctx.device))
        self.ref = ctx.kernel(name_src[1], name_src[0])

    def bind(self, out, packed):
        check_array(f"{self.dec.name} packed weight", packed, self.nbytes, "uint8")
        check_array(f"{self.dec.name} dequantized output", out, self.num_elements, "float32")
        nsub = self.num_elements // 32
        k, n = (self.moe[1], self.moe[2]) if self.moe else (1, 1)
        lsz = rc.wg_size(self.ctx.device, 64)
        args = [out.buf, packed.buf, scalar(0), scalar(nsub), scalar(self.slab_elems),
                scalar(k, "int"), scalar(n, "int")]
        go = bind_nd(self.ref, self.ctx.queue, (round_up(nsub, lsz),), (lsz,), args)

        def launch():
            go()
        launch.held = (self, out, packed)   # kernel arguments keep no buffer alive
        return launch


def expected_bytes(scheme, shape: tuple) -> int:
    """Bytes of packed blocks holding math.prod(shape) elements of ``scheme``."""
    dec, geo = geometry(scheme)
    total = math.prod(shape)
    if total % geo[0]:
        raise QuantError(f"{dec.name}: {total} elements is not a whole number of "
                         f"{geo[0]}-element blocks")
    return total // geo[0] * geo[1]
