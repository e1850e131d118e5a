"""16-lane vector steps for the block decoders, written as LLVM vectors (Numba intrinsics).

Numba runs LLVM's loop vectorizer but not its SLP vectorizer, and a block's inner loops
(16 or 32 values) are unrolled before the loop vectorizer sees them: written as plain loops,
the decoders run one value at a time (~1.3 cycles a value measured here, against ~0.2
needed to decode at DRAM speed). These intrinsics state the 16 lanes as one LLVM vector
operation instead, which every LLVM target lowers to its SIMD registers.

Every step comes in two forms: ``lanes16*(out, o, ...)`` stores its 16 values at
``out[o:o + 16]`` (decoding), ``lanes16*_dot(acc, x, o, ...)`` returns ``acc + values *
x[o:o + 16]`` (one fused multiply-add a lane) with ``acc`` an ``F32x16`` held in a register
across a row (the GEMV, with no decoded row written anywhere). Each step is exact IEEE f32
arithmetic in the order its docstring states, so decoders built from them stay bit-exact.
``claim`` (an atomic task counter) is here too: the kernels' other LLVM-level helper.

The generated kernels name ``SIMD_VERSION`` (a hash of this file) so that an edit here
changes their source hash and retires their cached machine code (Numba's cache tracks only
the kernel's own file).
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from llvmlite import ir
from numba import types
from numba.extending import intrinsic, models, register_model

SIMD_VERSION = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]

_I8, _I16, _I32, _F32 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.FloatType()
_V = 16


def _vec(t):
    return ir.VectorType(t, _V)


def _splat(builder, value, vty):
    """``value`` in every lane of a vector of type ``vty``."""
    undef = ir.Constant(vty, ir.Undefined)
    one = builder.insert_element(undef, value, ir.Constant(_I32, 0))
    return builder.shuffle_vector(one, undef, ir.Constant(_vec(_I32), [0] * _V))


def _data(context, builder, aty, val):
    """The data pointer of array value ``val`` as a byte pointer."""
    ptr = context.make_array(aty)(context, builder, val).data
    return builder.bitcast(ptr, _I8.as_pointer())


def _at(context, builder, base, off, offty, scale=1):
    """``base + off * scale`` bytes (``off`` an integer of Numba type ``offty``)."""
    idx = context.cast(builder, off, offty, types.intp)
    if scale != 1:
        idx = builder.mul(idx, ir.Constant(idx.type, scale))
    return builder.gep(base, [idx])


def _load_bytes(builder, ptr):
    vp = builder.bitcast(ptr, _vec(_I8).as_pointer())
    return builder.load(vp, align=1)


def _i32(context, builder, val, ty):
    return context.cast(builder, val, ty, types.int32)


def _f32(context, builder, val, ty):
    return context.cast(builder, val, ty, types.float32)


@intrinsic
def f16_at(typingctx, buf, off):
    """The little-endian IEEE half at ``buf[off:off + 2]`` as f32 (``fpext``: exact, but a
    signalling NaN comes back quiet; ``_quant_decode._f16`` keeps numpy's bits)."""
    def codegen(context, builder, sig, args):
        base = _data(context, builder, sig.args[0], args[0])
        ptr = builder.bitcast(_at(context, builder, base, args[1], sig.args[1]),
                              _I16.as_pointer())
        half = builder.bitcast(builder.load(ptr, align=1), ir.HalfType())
        return builder.fpext(half, _F32)
    return types.float32(buf, off), codegen


class F32x16(types.Type):
    """Sixteen f32 lanes in one LLVM vector: a GEMV row's accumulator."""

    def __init__(self):
        super().__init__(name="F32x16")


f32x16 = F32x16()


@register_model(F32x16)
class _F32x16Model(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, _vec(_F32))


def _fields(context, builder, ty, args, base, i):
    """q = ((buf[p1+l] >> s1) & m1) | (((buf[p2+l] >> s2) & m2) << s3), args[i:i + 7]."""
    vi = _vec(_I32)

    def field(p, s, m):
        raw = _load_bytes(builder, _at(context, builder, base, args[p], ty[p]))
        v = builder.lshr(builder.zext(raw, vi),
                         _splat(builder, _i32(context, builder, args[s], ty[s]), vi))
        return builder.and_(v, _splat(builder, _i32(context, builder, args[m], ty[m]), vi))
    hi = builder.shl(field(i + 3, i + 4, i + 5),
                     _splat(builder, _i32(context, builder, args[i + 6], ty[i + 6]), vi))
    return builder.or_(field(i, i + 1, i + 2), hi), i + 7


def _bits(context, builder, ty, args, base, i):
    """q = ((buf[p1+l] >> s1) & m1) | (((word >> (first + l)) & 1) << s3), args[i:i + 6]."""
    vi = _vec(_I32)
    raw = _load_bytes(builder, _at(context, builder, base, args[i], ty[i]))
    q = builder.lshr(builder.zext(raw, vi),
                     _splat(builder, _i32(context, builder, args[i + 1], ty[i + 1]), vi))
    q = builder.and_(q, _splat(builder, _i32(context, builder, args[i + 2], ty[i + 2]), vi))
    lane = builder.add(ir.Constant(vi, list(range(_V))),
                       _splat(builder, _i32(context, builder, args[i + 4], ty[i + 4]), vi))
    bits = builder.lshr(_splat(builder, _i32(context, builder, args[i + 3], ty[i + 3]), vi),
                        lane)
    bits = builder.and_(bits, ir.Constant(vi, [1] * _V))
    shift = _splat(builder, _i32(context, builder, args[i + 5], ty[i + 5]), vi)
    return builder.or_(q, builder.shl(bits, shift)), i + 6


def _affine(context, builder, ty, args, q, i):
    """``a * (f32(q) + c) + b`` with c, a, b = args[i:i + 3]."""
    vf = _vec(_F32)
    c, a, b = (_splat(builder, _f32(context, builder, args[j], ty[j]), vf)
               for j in (i, i + 1, i + 2))
    return builder.fadd(builder.fmul(a, builder.fadd(builder.sitofp(q, vf), c)), b)


def _lanes_i8(context, builder, ty, args, base, i):
    """``f32(int8 buf[p+l]) * a`` with p, a = args[i:i + 2]."""
    raw = _load_bytes(builder, _at(context, builder, base, args[i], ty[i]))
    vf = _vec(_F32)
    val = builder.sitofp(builder.sext(raw, _vec(_I32)), vf)
    return builder.fmul(val, _splat(builder, _f32(context, builder, args[i + 1], ty[i + 1]),
                                    vf))


def _vptr(context, builder, aty, arr, off, offty):
    """A <16 x float> pointer to ``arr[off]``."""
    base = _data(context, builder, aty, arr)
    return builder.bitcast(_at(context, builder, base, off, offty, 4), _vec(_F32).as_pointer())


def _store(values, argtys):
    """Typing + codegen of a store step: ``argtys`` = (out, o, buf, ...)."""
    def codegen(context, builder, sig, args):
        ty = sig.args
        vals = values(context, builder, ty, args, _data(context, builder, ty[2], args[2]), 3)
        builder.store(vals, _vptr(context, builder, ty[0], args[0], args[1], ty[1]), align=4)
        return context.get_dummy_value()
    return types.void(*argtys), codegen


def _fma(module):
    """``llvm.fma.v16f32`` declared in ``module`` (llvmlite names no vector intrinsics)."""
    vf = _vec(_F32)
    name = "llvm.fma.v16f32"
    fn = module.globals.get(name)
    return fn or ir.Function(module, ir.FunctionType(vf, [vf, vf, vf]), name=name)


def _dot(values, argtys):
    """Typing + codegen of a dot step: ``argtys`` = (acc, x, o, buf, ...)."""
    def codegen(context, builder, sig, args):
        ty = sig.args
        vals = values(context, builder, ty, args, _data(context, builder, ty[3], args[3]), 4)
        xv = builder.load(_vptr(context, builder, ty[1], args[1], args[2], ty[2]), align=4)
        return builder.call(_fma(builder.module), [vals, xv, args[0]])
    return f32x16(*argtys), codegen


def _v_fields(context, builder, ty, args, base, i):
    q, i = _fields(context, builder, ty, args, base, i)
    return _affine(context, builder, ty, args, q, i)


def _v_bits(context, builder, ty, args, base, i):
    q, i = _bits(context, builder, ty, args, base, i)
    return _affine(context, builder, ty, args, q, i)


@intrinsic
def lanes16(typingctx, out, o, buf, p1, s1, m1, p2, s2, m2, s3, c, a, b):
    """out[o:o+16] = a * (f32(q) + c) + b, q from two byte fields (``_fields``)."""
    return _store(_v_fields, (out, o, buf, p1, s1, m1, p2, s2, m2, s3, c, a, b))


@intrinsic
def lanes16_dot(typingctx, acc, x, o, buf, p1, s1, m1, p2, s2, m2, s3, c, a, b):
    """acc + (lanes16's values) * x[o:o+16]."""
    return _dot(_v_fields, (acc, x, o, buf, p1, s1, m1, p2, s2, m2, s3, c, a, b))


@intrinsic
def lanes16_bits(typingctx, out, o, buf, p1, s1, m1, word, first, s3, c, a, b):
    """out[o:o+16] = a * (f32(q) + c) + b, q's high bit from a 32-bit word (``_bits``)."""
    return _store(_v_bits, (out, o, buf, p1, s1, m1, word, first, s3, c, a, b))


@intrinsic
def lanes16_bits_dot(typingctx, acc, x, o, buf, p1, s1, m1, word, first, s3, c, a, b):
    """acc + (lanes16_bits's values) * x[o:o+16]."""
    return _dot(_v_bits, (acc, x, o, buf, p1, s1, m1, word, first, s3, c, a, b))


@intrinsic
def lanes16_i8(typingctx, out, o, buf, p, a):
    """out[o:o+16] = f32(int8 buf[p:p+16]) * a."""
    return _store(_lanes_i8, (out, o, buf, p, a))


@intrinsic
def lanes16_i8_dot(typingctx, acc, x, o, buf, p, a):
    """acc + (lanes16_i8's values) * x[o:o+16]."""
    return _dot(_lanes_i8, (acc, x, o, buf, p, a))


@intrinsic
def vzero16(typingctx):
    """An F32x16 of zeros."""
    def codegen(context, builder, sig, args):
        return ir.Constant(_vec(_F32), [0.0] * _V)
    return f32x16(), codegen


@intrinsic
def vadd16(typingctx, a, b):
    """Lane-wise a + b of two F32x16."""
    def codegen(context, builder, sig, args):
        return builder.fadd(args[0], args[1])
    return f32x16(a, b), codegen


@intrinsic
def vsum16(typingctx, acc):
    """The sum of the 16 lanes (a pairwise tree)."""
    def codegen(context, builder, sig, args):
        v = args[0]
        width = _V
        while width > 1:
            width //= 2
            upper = builder.shuffle_vector(v, v, ir.Constant(
                _vec(_I32), list(range(width, 2 * width)) + [0] * (_V - width)))
            v = builder.fadd(v, upper)
        return builder.extract_element(v, ir.Constant(_I32, 0))
    return types.float32(acc), codegen


@intrinsic
def claim(typingctx, counter):
    """Atomically ``counter[0] += 1``, returning the value before: the next task number.

    Threads that claim tasks this way share the work dynamically, so one thread that the
    OS deschedules on a busy machine delays the kernel by one task, not by its whole share.
    """
    def codegen(context, builder, sig, args):
        ptr = context.make_array(sig.args[0])(context, builder, args[0]).data
        return builder.atomic_rmw("add", ptr, ir.Constant(ir.IntType(64), 1), "monotonic")
    return types.int64(counter), codegen


@intrinsic
def prefetch(typingctx, buf, off):
    """Ask the cache for the line holding ``buf[off]`` (no fault, whatever ``off`` is)."""
    def codegen(context, builder, sig, args):
        ptr = _at(context, builder, _data(context, builder, sig.args[0], args[0]), args[1],
                  sig.args[1])
        fn = builder.module.globals.get("llvm.prefetch.p0")
        if fn is None:
            fn = ir.Function(builder.module, ir.FunctionType(
                ir.VoidType(), [_I8.as_pointer(), _I32, _I32, _I32]), name="llvm.prefetch.p0")
        builder.call(fn, [ptr, ir.Constant(_I32, 0), ir.Constant(_I32, 3), ir.Constant(_I32, 1)])
        return context.get_dummy_value()
    return types.void(buf, off), codegen
