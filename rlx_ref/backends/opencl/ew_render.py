"""Renders one elementwise kernel (a standalone op or a fused region) as OpenCL C.

The C renderer is the Numba one's twin made of data: the per-op formulas are the ``c``
entries of ``codegen/scalar.py``; what differs is the type map, literal syntax, helper
suffixes and the index expressions. f32 steps compute in float and f64 steps in double
(OpenCL's builtins are within the ops' ULP contracts); integers compute in long and wrap
when stored. One work-item per output element; inputs are read ``full``, ``scalar``,
``mod``, ``strided`` (per-axis strides in a buffer) or ``up2`` (a nearest 2x upsample
prologue of an NCHW input).
"""
from __future__ import annotations

import hashlib
import re

from ...ir.dtype import DType, int_range
from ...ops.elementwise import clamp_int_bounds
from ..codegen.literal import c_literal
from ..codegen.scalar import ACTIVATION, ACTIVATION_INT, BINARY, BINARY_INT, COMPARE
from .lowering import C_TYPE

_LITERAL = re.compile(r"(?<![\w.])(\d+\.\d*(?:[eE][-+]?\d+)?)(?![\w.])")
_FLOAT_HELPER = re.compile(r"\brlx_(sigmoid|tanh|relu|sign|softplus|fmax|fmin|f2l)\(")
SIXTEEN = (DType.F16, DType.BF16)
# what a value of each dtype is held in inside a kernel (16-bit floats: float shadows)
VALUE_TYPE = {**C_TYPE, DType.F16: "float", DType.BF16: "float"}
# how each dtype's buffer is declared
BUFFER_TYPE = {**C_TYPE, DType.F16: "half", DType.BF16: "ushort"}
_INT_HELPER = re.compile(r"\brlx_(idiv|imod|ipow)\(")


class Unsupported(Exception):
    """The chain needs something this renderer cannot express."""


def _compute(dt: DType) -> str:
    if dt is DType.F64:
        return "double"
    if dt in (DType.F32,) + SIXTEEN:
        return "float"
    raise Unsupported(f"{dt} arithmetic in an OpenCL kernel")


def _float_expr(template: str, ctype: str, **ops) -> str:
    expr = template.format(**ops)
    sfx = "f" if ctype == "float" else "d"
    expr = _FLOAT_HELPER.sub(lambda m: f"rlx_{m.group(1)}_{sfx}(", expr)
    expr = expr.replace("(double)", f"({ctype})")
    if ctype == "float":
        expr = _LITERAL.sub(lambda m: m.group(1) + "f", expr)
    return expr


def _int_expr(template: str, **ops) -> str:
    expr = template.format(**ops)
    return _INT_HELPER.sub(lambda m: f"rlx_{m.group(1)}_l(rlx_err, err_code, ", expr)


def _store(expr: str, dt: DType) -> str:
    if dt is DType.F16:
        return f"rlx_rnd_f16((float)({expr}))"
    if dt is DType.BF16:
        return f"rlx_rnd_bf16((float)({expr}))"
    if dt is DType.BOOL:
        return f"(uchar)(({expr}) != 0)"
    return f"({C_TYPE[dt]})({expr})"


def _as(x: str, dt: DType) -> str:
    return f"(({_compute(dt)}){x})" if dt.is_float else f"((long){x})"


def _cast(x: str, src: DType, to: DType) -> str:
    if to is DType.BOOL:
        return f"(uchar)({x} != 0)"
    if to.is_float:
        return _store(x, to)
    if src.is_float:
        lo, hi = (c_literal(v, DType.I64) for v in int_range(to))
        sfx = "d" if src is DType.F64 else "f"
        return f"({C_TYPE[to]})clamp(rlx_f2l_{sfx}({x}), {lo}, {hi})"
    return f"({C_TYPE[to]})({x})"          # int/bool → int: two's-complement wrap


def step_expr(kind: str, attrs, args: list[str], dts: list[DType], out: DType) -> str:
    """One step's C value, already stored in (cast to) its dtype ``out``."""
    if kind == "Activation":
        if dts[0].is_float:
            ct = _compute(dts[0])
            return _store(_float_expr(ACTIVATION[attrs.op]["c"], ct, x=_as(args[0], dts[0])),
                          out)
        tpl = ACTIVATION_INT[attrs.op]["c"]
        x = f"((long){args[0]})"
        if attrs.op == "Relu":
            tpl = "({x} > 0L ? {x} : 0L)"
        return _store(tpl.format(x=x), out)
    if kind == "Binary":
        if dts[0].is_float:
            ct = _compute(dts[0])
            a, b = (_as(x, d) for x, d in zip(args, dts))
            return _store(_float_expr(BINARY[attrs.op]["c"], ct, a=a, b=b), out)
        bits = 8 if dts[0] is DType.BOOL else dts[0].size_bytes * 8
        a, b = (f"((long){x})" for x in args)
        return _store(_int_expr(BINARY_INT[attrs.op]["c"], a=a, b=b, bits=bits), out)
    if kind == "Compare":
        return f"(uchar)({args[0]} {COMPARE[attrs.op]} {args[1]})"
    if kind == "Cast":
        return _cast(args[0], dts[0], out)
    if kind == "Where":
        return f"({args[0]} != 0 ? {args[1]} : {args[2]})"
    if kind == "StopGradient":
        return args[0]
    if kind == "Fma":
        if dts[0].is_float:
            a, b, c = (_as(x, d) for x, d in zip(args, dts))
            return _store(f"fma({a}, {b}, {c})", out)
        a, b, c = (f"((long){x})" for x in args)
        return _store(f"{a} * {b} + {c}", out)
    if kind == "Clamp":
        if dts[0].is_float:
            ct = _compute(dts[0])
            sfx = "f" if ct == "float" else "d"
            bound_dt = DType.F64 if ct == "double" else DType.F32     # the bounds are f32s
            lo, hi = (c_literal(v, bound_dt) for v in (attrs.min, attrs.max))
            return _store(f"rlx_fmin_{sfx}(rlx_fmax_{sfx}({_as(args[0], dts[0])}, {lo}), {hi})",
                          out)
        lo, hi = (c_literal(v, DType.I64)
                  for v in clamp_int_bounds(attrs.min, attrs.max, dts[0].np))
        return _store(f"clamp((long){args[0]}, {lo}, {hi})", out)
    raise Unsupported(f"{kind} inside an elementwise kernel")


def _load(ptr: str, idx: str, dt: DType) -> str:
    if dt is DType.F16:
        return f"vload_half({idx}, {ptr})"
    if dt is DType.BF16:
        return f"rlx_bf16_load({ptr}[{idx}])"
    return f"{ptr}[{idx}]"


def _write(value: str, dt: DType) -> str:
    if dt is DType.F16:
        return f"vstore_half_rte({value}, i, out);"
    if dt is DType.BF16:
        return f"out[i] = rlx_bf16_bits({value});"
    return f"out[i] = {value};"


def render(steps, in_dtypes, step_dtypes, modes) -> tuple[str, str]:
    """(kernel name, source) of a chain; ``modes`` has one read mode per input."""
    params = ["__global " + BUFFER_TYPE[step_dtypes[-1]] + "* out"]
    reads = []
    for i, (m, dt) in enumerate(zip(modes, in_dtypes)):
        params.append(f"__global const {BUFFER_TYPE[dt]}* x{i}")
        if m == "strided":
            params.append(f"__global const long* st{i}")
            reads.append(f"    long j{i} = 0, r{i} = i;\n"
                         f"    for (int ax = ndim - 1; ax >= 0; ax--) {{\n"
                         f"        j{i} += (r{i} % dims[ax]) * st{i}[ax]; r{i} /= dims[ax];\n"
                         f"    }}")
            idx = f"j{i}"
        elif m == "up2":          # out [N, C, 2H, 2W] reads x [N, C, H, W] at (y/2, x/2)
            reads.append(f"    long w2_{i} = dims[ndim - 1], h2_{i} = dims[ndim - 2];\n"
                         f"    long ox{i} = i % w2_{i}, oy{i} = (i / w2_{i}) % h2_{i};\n"
                         f"    long nc{i} = i / (w2_{i} * h2_{i});")
            idx = f"(nc{i} * (h2_{i} / 2) + oy{i} / 2) * (w2_{i} / 2) + ox{i} / 2"
        else:
            idx = {"full": "i", "scalar": "0", "mod": f"i % m{i}"}[m]
            if m == "mod":
                params.append(f"const long m{i}")
        reads.append(f"    {VALUE_TYPE[dt]} v{i} = {_load(f'x{i}', idx, dt)};")
    body = []
    for k, (kind, attrs, ops) in enumerate(steps):
        args = [f"v{j}" if src == "Input" else f"s{j}" for src, j in ops]
        dts = [in_dtypes[j] if src == "Input" else step_dtypes[j] for src, j in ops]
        expr = step_expr(kind, attrs, args, dts, step_dtypes[k])
        body.append(f"    {VALUE_TYPE[step_dtypes[k]]} s{k} = {expr};")
    params += ["const long n", "__global const long* dims", "const int ndim",
               "__global int* rlx_err", "const int err_code"]
    text = "\n".join(reads + body + ["    " + _write(f"s{len(steps) - 1}", step_dtypes[-1])])
    key = hashlib.sha256((text + "|".join(params)).encode()).hexdigest()[:12]
    name = f"ew_{key}"
    src = (f"__kernel void {name}({', '.join(params)}) {{\n"
           f"    long i = get_global_id(0);\n    if (i >= n) return;\n{text}\n}}\n")
    return name, src
