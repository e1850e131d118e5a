"""Lowering of the elementwise kinds and ElementwiseRegion: one generated loop per node.

Standalone ops are one-step chains; a region is its chain. 16-bit floats are read and
written through f32/f64 shadows on the host (Numba has no f16/bf16 arithmetic); a
region whose intermediate steps are 16-bit is rejected at compile time.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.dtype import DType
from ...ops.region import walk_chain
from ..codegen.chain import chain_steps, read_mode
from .ew_codegen import render
from .variant_table import th, use, use_par
from .kernels import compile_kernel
from .lowering import KERNEL_DTYPES, JitCall, Step, lowers

SIXTEEN = (DType.F16, DType.BF16)
EW_DTYPES = KERNEL_DTYPES + SIXTEEN
SHADOW_NOTE = "f16/bf16 run through f32 shadows converted on the host"


def _shadow(dt: DType) -> DType:
    return DType.F32 if dt in SIXTEEN else dt


def lower_chain(node, ins, ctx) -> Step:
    steps = chain_steps(node)
    region = node.attrs if node.kind == "ElementwiseRegion" else None
    in_dts = [s.dtype for s in ins]
    step_dts = walk_chain([s for s in node.attrs.chain], in_dts) if region else \
        [node.shape.dtype]
    k_in = [_shadow(d) for d in in_dts]
    out_dt = node.shape.dtype
    k_out = DType.F64 if out_dt in SIXTEEN else out_dt
    k_steps = list(step_dts[:-1]) + [k_out]
    out_dims = tuple(node.shape.dims)
    prologue = region is not None and region.prologue == "ResizeNearest2x"
    modes, strides = [], []
    for i, s in enumerate(ins):
        if prologue and i == region.prologue_input:
            m, st = "full", None
            use("ew.read.up2")
        else:
            m, st = read_mode(tuple(s.dims), out_dims, region, i)
            use(f"ew.read.{m}")
        modes.append(m)
        strides.append(st)
    name, source = render(steps, k_in, k_steps, modes,
                          _row_steps(modes, strides, [s.numel for s in ins], out_dims))
    kernel = compile_kernel(name, source)
    par = use_par("ew", math.prod(out_dims) >= th("par_elements"))
    fn = kernel.get(name + "_par") if par else kernel.fn
    dims = np.array(out_dims or (1,), np.int64)
    convert_in = [d in SIXTEEN for d in in_dts]
    convert_out = out_dt in SIXTEEN
    fix_fma = node.kind == "Fma" and node.shape.dtype is DType.F64
    jit = None
    if not (prologue or fix_fma or convert_out or any(convert_in)):
        # the kernel's arguments: out, then each operand flat and its strides if strided,
        # then the output dims
        args, consts = ["{out}.reshape(-1)"], []
        for i, st in enumerate(strides):
            args.append(f"{{{i}}}.reshape(-1)")
            if modes[i] == "strided":
                args.append(f"{{c{len(consts)}}}")
                consts.append(st)
        args.append(f"{{c{len(consts)}}}")
        jit = JitCall(fn, tuple(args), (*consts, dims), tail=False)
        if "strided" not in modes:
            return Step(_plain_run(fn, dims, len(ins)), [kernel], jit=jit)
    # per input: (index, repeat for the prologue, convert to f32, element strides or None)
    plan = [(i, prologue and i == region.prologue_input, convert_in[i],
             strides[i] if modes[i] == "strided" else None) for i in range(len(ins))]

    def run(out, *xs):
        args = []
        for i, rep, conv, st in plan:
            x = xs[i]
            if rep:
                x = _upsample2x(x)
            if conv:
                x = x.astype(np.float32)
            args.append(x.reshape(-1))
            if st is not None:
                args.append(st)                    # element strides (0 = broadcast)
        if convert_out:
            tmp = np.empty(out.shape, np.float64)
            fn(tmp.reshape(-1), *args, dims)
            with np.errstate(over="ignore"):            # overflow to ±inf is the rounding
                out[...] = tmp.astype(out.dtype)
        else:
            fn(out.reshape(-1), *args, dims)
        if fix_fma:
            _exact_fma_fixup(out, xs)
    return Step(run, [kernel], jit=jit)


ROW_MIN = 8     # a suffix (mod) read goes by rows from this last-axis length on


def _row_steps(modes, strides, sizes, out_dims):
    """``render``'s ``row_steps``: by rows when an operand is read through strides, or
    read modulo a size that is whole rows of a long enough last axis; else None."""
    w = out_dims[-1] if out_dims else 0
    mods = [n for m, n in zip(modes, sizes) if m == "mod"]
    if not w or not ("strided" in modes or (mods and w >= ROW_MIN and
                                            all(n % w == 0 for n in mods))):
        return None
    return tuple(int(st[-1]) if m == "strided" and st[-1] in (0, 1) else None
                 for m, st in zip(modes, strides))


def _upsample2x(x: np.ndarray) -> np.ndarray:
    """The ResizeNearest2x prologue on the host: out[n, c, y, x] = in[n, c, y // 2, x // 2]."""
    return x.repeat(2, axis=2).repeat(2, axis=3)


def _plain_run(fn, dims, arity: int):
    """The step of a kernel that reads its inputs flat and as they are (no conversion,
    strides or prologue): one reshape per operand, specialized for the common arities."""
    if arity == 1:
        def run(out, a):
            fn(out.reshape(-1), a.reshape(-1), dims)
    elif arity == 2:
        def run(out, a, b):
            fn(out.reshape(-1), a.reshape(-1), b.reshape(-1), dims)
    else:
        def run(out, *xs):
            fn(out.reshape(-1), *[x.reshape(-1) for x in xs], dims)
    return run


def _exact_fma_fixup(out, xs) -> None:
    """f64 Fma: where a·b overflows (or the result is not finite) the kernel's a·b + c is
    wrong; recompute those few elements exactly on the host, as the oracle does."""
    from ...ops._elementwise_binary import _fma_exact

    a, b, c = np.broadcast_arrays(*xs)
    with np.errstate(all="ignore"):
        bad = ~np.isfinite(out) | (np.abs(a) * np.abs(b) > 1e300)
    if bad.any():
        out[bad] = _fma_exact(a[bad], b[bad], c[bad], np.float64)


for _kind in ("Activation", "Binary", "Compare", "Cast", "StopGradient", "Where", "Fma",
              "Clamp", "ElementwiseRegion"):
    lowers(_kind, EW_DTYPES, reason=SHADOW_NOTE)(lower_chain)
