"""The catalogue of planted faults (``faults.py``): one per bug class real kernels have.

Each entry mutates the real numba-cpu or OpenCL kernel in one place and names the
conformance selection (``ops``/``dtypes``/``tags``) that must catch it, and the kernel
variant it sits in. A fault with a ``gap`` is one the current accuracy contracts cannot
catch (the reason says why); it is reported, counted in the share, and expected missed. ``rlx-ref conformance --power`` runs every entry; ``tests/test_power.py``
asserts each is caught and that the unfaulted backends pass the same selections.
"""
from __future__ import annotations

from .faults import Fault, FaultError

NB, CL = "numba-cpu", "opencl"


def _identity_zero_for_max(original):
    """Reduce Max starts its accumulator at 0 instead of -inf."""
    def identity(op, dt):
        v = original(op, dt)
        return type(v)(0) if op == "Max" and dt.is_float else v
    return identity


def _mod_for_middle_ones(original):
    """The read-mode choice takes a suffix-modulus read whenever the last axes agree, also
    when a size-1 axis sits in the middle ([3,1,4] → [3,2,4]), where it is wrong."""
    import math

    def read_mode(shape, out, region_attrs=None, i=0):
        mode = original(shape, out, region_attrs, i)
        if (mode[0] == "strided" and shape and len(shape) == len(out)
                and shape[0] != 1 and shape[-1] == out[-1]
                and math.prod(out) % max(math.prod(shape), 1) == 0):
            return "mod", None
        return mode
    return read_mode


def _swapped_inner_strides(original):
    """Movement lowerings read the input with its two innermost strides swapped (the
    axis order of a permutation applied the wrong way round)."""
    def in_strides(ins):
        st = list(original(ins))
        if len(st) >= 2:
            st[-1], st[-2] = st[-2], st[-1]
        return st
    return in_strides


_MOVE = "rlx_ref.backends.numba_cpu._index_map:_KERNEL"

FAULTS = (
    # ── elementwise loops (numba-cpu) ──────────────────────────────────────
    Fault("ew-tail-serial", NB, "tail off-by-one", "numba-cpu:ew.serial",
          "the serial elementwise loop stops one element short",
          attr_op="Sigmoid", ops="Activation", dtypes="f32", kernel="ew_",
          edits=(("    for i in range(n):\n", "    for i in range(n - 1):\n"),)),
    Fault("ew-tail-par", NB, "tail off-by-one", "numba-cpu:ew.par",
          "the parallel (prange) elementwise loop stops one element short",
          ops="Activation", dtypes="f32", tags=("power",), kernel="ew_",
          edits=(("    for i in prange(n):\n", "    for i in prange(n - 1):\n"),)),
    Fault("ew-chain-step", NB, "chain step reads the wrong earlier step",
          "numba-cpu:ew.read.full",
          "step 2 of a fused chain reads step 0 where it should read step 1",
          ops="ElementwiseRegion", tags=("power",), kernel="ew_",
          edits=(("re:(\n        s2 = [^\n]*?)\\bs1\\b", "\\1s0"),)),
    Fault("ew-middle-broadcast", NB, "suffix-modulus read for a middle size-1 axis",
          "numba-cpu:ew.read.strided",
          "a broadcast with a size-1 middle axis is read as a suffix modulus",
          ops="Binary", dtypes="f32", tags=("middle-size-1",),
          patches=(("rlx_ref.backends.numba_cpu.lower_elementwise:read_mode",
                    _mod_for_middle_ones),)),
    Fault("ew-stride-order", NB, "stride error", "numba-cpu:ew.read.strided",
          "the strided broadcast read applies the axis strides in reverse order",
          ops="Binary", dtypes="f32", kernel="ew_",
          edits=(("j += (r % d) * strides[ax]", "j += (r % d) * strides[dims.size - 1 - ax]"),)),
    Fault("softplus-nan", NB, "dropped NaN propagation", "numba-cpu:ew.serial",
          "Softplus returns 0 for NaN instead of NaN",
          attr_op="Softplus", ops="Activation", dtypes="f32", kernel="ew_",
          edits=(("_vexp(-abs(x))) if x == x else x", "_vexp(-abs(x))) if x == x else 0.0"),)),
    Fault("round-half-up", NB, "rounding mode", "numba-cpu:ew.serial",
          "Round rounds halves up instead of to even",
          attr_op="Round", ops="Activation", dtypes="f32", kernel="ew_",
          edits=(("np.rint(", "np.floor(0.5 + "),)),
    Fault("cast-no-saturation", NB, "saturation", "numba-cpu:ew.serial",
          "float → int casts stop saturating at the top of the range (they wrap)",
          ops="Cast", kernel="ew_",
          edits=(("    if t >= hi:\n        return hi\n", ""),)),
    Fault("exp-coefficient", NB, "polynomial-coefficient drift", "numba-cpu:ew.serial",
          "the cubic coefficient of the vectorized exp drifts by 1e-4 relative",
          attr_op="Exp", ops="Activation", dtypes="f64", kernel="ew_",
          edits=(("r2 * (0.5 + r * 0.16666666666666666)",
                  "r2 * (0.5 + r * 0.16668333333333333)"),)),
    Fault("expf-coefficient", NB, "polynomial-coefficient drift", "numba-cpu:softmax.rows.serial",
          "the cubic coefficient of the f32 vectorized exp (softmax, f32 attention) drifts "
          "by 1e-4 relative",
          ops="Softmax", dtypes="f32",
          edits=(("_VF_C1 = np.float32(0.1666652113199234)",
                  "_VF_C1 = np.float32(0.1666818778410554)"),),
          gap="a few f32 ulps of exp error, partly normalized away, stay inside Softmax's "
              "c·eps·K contract; catching it needs the tighter contract the backend can "
              "declare for its working precision"),
    # ── reductions, norms, selection (numba-cpu) ───────────────────────────
    Fault("reduce-max-identity", NB, "wrong reduction identity", "numba-cpu:reduce.rows.serial",
          "Reduce Max starts from 0 instead of -inf",
          attr_op="Max", ops="Reduce", dtypes="f32",
          patches=(("rlx_ref.backends.numba_cpu.lower_reduce:_identity",
                    _identity_zero_for_max),)),
    Fault("layernorm-f32-mean", NB, "f32 mean with a large offset", "numba-cpu:norm.blocks.serial",
          "the normalization mean is accumulated in f32",
          ops="LayerNorm", dtypes="f32", tags=("power",), kernel="norm",
          edits=(("        s += np.float64(xr[i])\n",
                  "        s = np.float32(s + np.float32(xr[i]))\n"),)),
    Fault("layernorm-eps-outside", NB, "eps placement", "numba-cpu:norm.blocks.serial",
          "eps is added after the square root: 1/(sqrt(var) + eps)",
          ops="LayerNorm", dtypes="f32", kernel="norm",
          edits=(("rstd = 1.0 / np.sqrt(var + eps)", "rstd = 1.0 / (np.sqrt(var) + eps)"),)),
    Fault("argmax-last-tie", NB, "tie order", "numba-cpu:arg.rows.serial",
          "ArgMax/ArgMin return the last of equal values instead of the first",
          ops="ArgMax", kernel="select",
          edits=(("        return v > best\n", "        return v >= best\n"),)),
    Fault("attention-causal-mask", NB, "mask off-by-one", "numba-cpu:attention.serial",
          "a causal query also sees the key just after its own position",
          ops="Attention", dtypes="f32", kernel="attention",
          edits=(("hi = min(apos + 1, sk)", "hi = min(apos + 2, sk)"),)),
    Fault("reduce-cols-short", NB, "tail off-by-one", "numba-cpu:reduce.cols.serial",
          "the column reduction (reduced axis not innermost) skips the last k",
          ops="Reduce", dtypes="f32", kernel="reduce_",
          edits=(("        for k in range(K):\n            base = (o * K + k) * inner",
                  "        for k in range(K - 1):\n            base = (o * K + k) * inner"),)),
    Fault("reduce-rows-par-task", NB, "tail off-by-one", "numba-cpu:reduce.rows.par",
          "the parallel row reduction skips its last task's rows",
          ops="Reduce", tags=("power",), kernel="reduce_",
          edits=(("    for t in prange(ntask):\n        lanes = np.full",
                  "    for t in prange(ntask - 1):\n        lanes = np.full"),)),
    Fault("reduce-chunk-tail", NB, "dropped last partial in the segmented reduce",
          "numba-cpu:reduce.chunks_par",
          "the chunked parallel reduction of a few long rows drops each row's last partial",
          ops="Reduce", tags=("power",), kernel="reduce_",
          edits=(("a = _fold(part, o * nch, o * nch + nch, init, lanes)",
                  "a = _fold(part, o * nch, o * nch + nch - 1, init, lanes)"),)),
    # ── movement (numba-cpu) ───────────────────────────────────────────────
    Fault("transpose-tiled-stride", NB, "tiled-transpose stride", "numba-cpu:transpose.tiled",
          "the tiled transpose steps through input rows with the inner stride",
          ops="Transpose", tags=("power",), kernel="move", resets=((_MOVE, None),),
          edits=(("s = np.uint64(b + p * sp)", "s = np.uint64(b + p * sl)"),)),
    Fault("move-par-chunk", NB, "tail off-by-one", "numba-cpu:move.par",
          "the parallel copy of a large movement leaves each row's last element",
          ops="Transpose", tags=("power",), kernel="move", resets=((_MOVE, None),),
          edits=(("j0,\n                  min(j0 + chunk, n))",
                  "j0,\n                  min(j0 + chunk, n - 1))"),)),
    Fault("transpose-perm-order", NB, "permutation error", "numba-cpu:move.serial",
          "movement lowerings read the input with its two innermost strides swapped",
          ops="Transpose",
          patches=(("rlx_ref.backends.numba_cpu.lower_movement:_in_strides",
                    _swapped_inner_strides),)),
    # ── OpenCL ─────────────────────────────────────────────────────────────
    Fault("cl-ew-tail", CL, "tail off-by-one", "opencl:ew.read.full",
          "the elementwise kernel's bound check drops the last element",
          attr_op="Sigmoid", ops="Activation", dtypes="f32", kernel="ew_",
          edits=(("    if (i >= n) return;\n", "    if (i >= n - 1) return;\n"),)),
    Fault("cl-chain-step", CL, "chain step reads the wrong earlier step",
          "opencl:ew.read.full",
          "step 2 of a fused chain reads step 0 where it should read step 1",
          ops="ElementwiseRegion", dtypes="f32", tags=("power",), kernel="ew_",
          edits=(("re:(\n    \\w+ s2 = [^\n]*?)\\bs1\\b", "\\1s0"),)),
    Fault("cl-middle-broadcast", CL, "suffix-modulus read for a middle size-1 axis",
          "opencl:ew.read.strided",
          "a broadcast with a size-1 middle axis is read as a suffix modulus",
          ops="Binary", dtypes="f32", tags=("middle-size-1",),
          patches=(("rlx_ref.backends.opencl.lower_elementwise:read_mode",
                    _mod_for_middle_ones),)),
    Fault("cl-tile-stride", CL, "tiled-transpose stride", "opencl:move.tiled_cpu",
          "the tiled transpose (CPU kernel) steps through input columns with the output's "
          "row length",
          ops="Transpose", kernel="rlx_movet",
          edits=(("d[r * C + c] = x[src + r + c * sc];", "d[r * C + c] = x[src + r + c * C];"),)),
    Fault("cl-segmented-last-partial", CL, "dropped last partial in the segmented reduce",
          "opencl:reduce.rows.segmented",
          "the combine kernel of a segmented row reduction skips the last segment",
          ops="Reduce", tags=("power",), kernel="reduce_",
          edits=(("for (long c = 0; c < nchunk; c++) { ACC v = part",
                  "for (long c = 0; c < nchunk - 1; c++) { ACC v = part"),)),
    Fault("cl-scan-carry", CL, "dropped last partial in the segmented reduce",
          "opencl:scan.segmented",
          "the carry into each segment of a long scan row is the previous segment's total "
          "alone, not the running total",
          ops="Cumsum", tags=("power",),
          edits=(("        part[r * nchunk + c] = a;\n", "        part[r * nchunk + c] = v;\n"),)),
    Fault("cl-norm-unshifted", CL, "f32 mean with a large offset", "opencl:norm.rows_cpu",
          "the normalization mean is summed over raw x in float (no shift by the block's "
          "first element, and float statistics as devices without fp64 compute them), so a "
          "large common offset loses its digits",
          ops="LayerNorm", dtypes="f32", tags=("power",),
          patches=(("rlx_ref.backends.opencl._reduce_norm:WIDE", lambda wide: "float"),),
          edits=(("    piv = L ? LDX(lo) : 0;\n", "    piv = 0;\n"),
                 ("    piv = C ? LDX(base) : 0;\n", "    piv = 0;\n"),
                 ("re:\n    if \\(C\\) piv\\d+ = LDXV\\(base \\+ \\d+\\);", ""))),
    Fault("cl-argmax-tie", CL, "tie order", "opencl:arg.rows_cpu",
          "ArgMax prefers the later of equal values",
          ops="ArgMax", limit=24,
          edits=(("((v) == best && (j) < idx)", "((v) == best && (j) > idx)"),
                 ("(idx < 0 || BETTER(v, best))) { best = v; idx = k; }",
                  "(idx < 0 || BETTER(v, best) || v == best)) { best = v; idx = k; }"))),
    Fault("cl-norm-eps", CL, "eps placement", "opencl:norm.cols_cpu",
          "eps is added after the square root: 1/(sqrt(var) + eps)",
          ops="LayerNorm", dtypes="f32",
          edits=(("CT rstd = (CT)1 / sqrt(s / (CT)L + eps);",
                  "CT rstd = (CT)1 / (sqrt(s / (CT)L) + eps);"),)),
    Fault("cl-round-half-up", CL, "rounding mode", "opencl:ew.read.full",
          "Round rounds halves up instead of to even",
          attr_op="Round", ops="Activation", dtypes="f32", kernel="ew_",
          edits=(("rint(", "floor(0.5f + "),)),
    Fault("cl-f16-step-rounding", CL, "f16 intermediate rounding skipped",
          "opencl:ew.read.full",
          "f16 steps inside a fused region keep float precision (no rounding to half)",
          ops="ElementwiseRegion", dtypes="f16", tags=("power",), kernel="prelude",
          edits=(("RLX_INLINE float rlx_rnd_f16(float x) {",
                  "RLX_INLINE float rlx_rnd_f16(float x) { return x;"),)),
    Fault("cl-softplus-nan", CL, "dropped NaN propagation", "opencl:ew.read.full",
          "Softplus returns 0 for NaN instead of NaN",
          attr_op="Softplus", ops="Activation", dtypes="f32", kernel="prelude",
          edits=(("log1p(exp(-fabs(x))) : x;", "log1p(exp(-fabs(x))) : 0;"),)),
)


def by_name(name: str) -> Fault:
    """The catalogued fault called ``name``; FaultError lists the known names."""
    for f in FAULTS:
        if f.name == name:
            return f
    raise FaultError(f"unknown fault {name!r}; known: {', '.join(f.name for f in FAULTS)}")


def select_faults(names=None, backends=None) -> list:
    """Catalogued faults by name (a comma list or list) and backend names."""
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    if isinstance(backends, str):
        backends = [b.strip() for b in backends.split(",") if b.strip()]
    out = [by_name(n) for n in names] if names else list(FAULTS)
    return [f for f in out if not backends or f.backend in backends]


# Declared kernel variants no planted fault sits in yet: the catalogue's own gap, reported
# by --power and kept exact by tests/test_power.py (a variant that gains a fault leaves it).
WITHOUT_FAULT = (
    "numba-cpu:arg.cols.par", "numba-cpu:arg.cols.serial", "numba-cpu:arg.rows.par",
    "numba-cpu:attention.f32_products", "numba-cpu:attention.f64_products",
    "numba-cpu:attention.par", "numba-cpu:batchnorm.par", "numba-cpu:batchnorm.serial",
    "numba-cpu:concat.par", "numba-cpu:concat.serial", "numba-cpu:conv.1x1.par",
    "numba-cpu:conv.1x1.serial", "numba-cpu:conv.cols.chunked", "numba-cpu:conv.cols.whole",
    "numba-cpu:conv.gemm.par", "numba-cpu:conv.gemm.serial", "numba-cpu:conv.nhwc.par",
    "numba-cpu:conv.nhwc.serial", "numba-cpu:convt.gemm.par", "numba-cpu:convt.gemm.serial",
    "numba-cpu:ew.read.mod", "numba-cpu:ew.read.scalar", "numba-cpu:ew.read.up2",
    "numba-cpu:gather.elements.par", "numba-cpu:gather.elements.serial",
    "numba-cpu:gather.nd.par", "numba-cpu:gather.nd.serial", "numba-cpu:gather.pieces",
    "numba-cpu:gather.rows.par", "numba-cpu:gather.rows.serial", "numba-cpu:im2col.par",
    "numba-cpu:im2col.serial", "numba-cpu:loop.compiled", "numba-cpu:loop.host",
    "numba-cpu:matmul.blas", "numba-cpu:matmul.blas.par", "numba-cpu:matmul.loop.par",
    "numba-cpu:matmul.loop.serial", "numba-cpu:norm.blocks.par", "numba-cpu:norm.cols.par",
    "numba-cpu:norm.cols.serial", "numba-cpu:pool.par", "numba-cpu:pool.serial",
    "numba-cpu:reduce.cols.par", "numba-cpu:rope.par", "numba-cpu:rope.serial",
    "numba-cpu:scan.cols.par", "numba-cpu:scan.cols.serial", "numba-cpu:scan.rows.par",
    "numba-cpu:scan.rows.serial", "numba-cpu:scatter.par", "numba-cpu:scatter.serial",
    "numba-cpu:softmax.cols.par", "numba-cpu:softmax.cols.serial", "numba-cpu:softmax.rows.par",
    "numba-cpu:topk.buffer", "numba-cpu:topk.par", "numba-cpu:topk.serial",
    "numba-cpu:topk.sort", "numba-cpu:trilu.par", "numba-cpu:trilu.serial", "opencl:arg.lines",
    "opencl:arg.rows_gpu", "opencl:attention.cpu", "opencl:attention.gpu", "opencl:batchnorm",
    "opencl:conv.images.chunked", "opencl:conv.images.whole", "opencl:ew.read.mod",
    "opencl:ew.read.scalar", "opencl:ew.read.up2", "opencl:host.reference", "opencl:loop.host",
    "opencl:matmul.direct", "opencl:matmul.gemm_cpu", "opencl:matmul.gemm_gpu",
    "opencl:matmul.skinny", "opencl:move.map", "opencl:move.tiled_gpu", "opencl:norm.cols_gpu",
    "opencl:norm.rows_gpu", "opencl:reduce.cols_cpu", "opencl:reduce.cols_gpu",
    "opencl:reduce.rows_cpu", "opencl:reduce.rows_gpu", "opencl:reduce.strided",
    "opencl:scan.cols_cpu", "opencl:scan.lines", "opencl:scan.rows_gpu",
    "opencl:softmax.cols_cpu", "opencl:softmax.cols_gpu", "opencl:softmax.rows_cpu",
    "opencl:softmax.rows_gpu", "opencl:topk.private", "opencl:topk.scratch",
)
