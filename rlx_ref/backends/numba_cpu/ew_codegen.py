"""Renders one elementwise kernel (a standalone op or a fused region) as Numba source.

A chain is a list of steps ``(kind, attrs, operands)`` with operands ``("Input", i)`` or
``("Step", j)``, evaluated per output element. Float steps compute in f64 and round to
their dtype once (f32 steps store through ``np.float32``), so a fused chain rounds
exactly where the unfused ops do. Each input is read one of four ways, chosen on the
host: ``full`` (same element count: flat index), ``scalar`` (element 0), ``mod``
(suffix broadcast: index % m) or ``strided`` (general broadcast: per-axis strides).
"""
from __future__ import annotations

import hashlib

from ...ir.dtype import DType, int_range
from ...ops.elementwise import clamp_int_bounds
from ..codegen.literal import py_literal
from ..codegen.scalar import ACTIVATION, ACTIVATION_INT, BINARY, BINARY_INT, COMPARE
from .prelude import PRELUDE


NP_TYPE = {DType.F32: "np.float32", DType.F64: "np.float64", DType.I8: "np.int8",
           DType.I16: "np.int16", DType.I32: "np.int32", DType.I64: "np.int64",
           DType.U8: "np.uint8", DType.U32: "np.uint32", DType.BOOL: "np.bool_"}


class Unsupported(Exception):
    """The chain needs something this renderer cannot express (e.g. f16 steps)."""


def _store(expr: str, dt: DType) -> str:
    """Round/wrap a computed value into dtype ``dt`` (floats computed in f64)."""
    if dt is DType.BOOL:
        return f"({expr}) != 0"
    if dt is DType.F16:
        return f"_rnd_f16(np.float64({expr}))"     # f16/bf16 values live in f64 variables
    if dt is DType.BF16:
        return f"_rnd_bf16(np.float64({expr}))"
    if dt not in NP_TYPE:
        raise Unsupported(f"{dt} values inside a kernel")
    return f"{NP_TYPE[dt]}({expr})"


def _as_compute(name: str, dt: DType) -> str:
    return f"np.float64({name})" if dt.is_float else name


def _cast(x: str, src: DType, to: DType, declared: DType) -> str:
    if declared in (DType.F16, DType.BF16) and src is DType.F64:
        x = f"np.float32({x})"          # RLX narrows f64 to 16 bits through f32 (twice)
    if to is DType.BOOL:
        return f"{x} != 0"
    if to.is_float:
        return _store(f"np.float64({x})", to)
    if src.is_float:
        lo, hi = (py_literal(v, DType.I64) for v in int_range(to))
        return _store(f"_f2i_sat({x}, {lo}, {hi})", to)
    return _store(f"np.int64({x})", to)       # int/bool → int: two's-complement wrap


def step_expr(kind: str, attrs, args: list[str], dts: list[DType], out: DType) -> str:
    """One step's value, already stored in its dtype ``out``."""
    if kind == "Activation":
        if dts[0].is_float:
            return _store(ACTIVATION[attrs.op]["py"].format(x=_as_compute(args[0], dts[0])),
                          out)
        return _store(ACTIVATION_INT[attrs.op]["py"].format(x=f"np.int64({args[0]})"), out)
    if kind == "Binary":
        if dts[0].is_float:
            a, b = (_as_compute(x, d) for x, d in zip(args, dts))
            return _store(BINARY[attrs.op]["py"].format(a=a, b=b), out)
        if dts[0] is DType.BOOL:
            return _store(BINARY_INT[attrs.op]["py"].format(a=args[0], b=args[1],
                                                            bits=8), out)
        bits = dts[0].size_bytes * 8
        a, b = (f"np.int64({x})" for x in args)
        return _store(BINARY_INT[attrs.op]["py"].format(a=a, b=b, bits=bits), out)
    if kind == "Compare":
        return f"{args[0]} {COMPARE[attrs.op]} {args[1]}"
    if kind == "Cast":
        return _cast(args[0], dts[0], out, attrs.to)    # out: attrs.to, or its f64 shadow
    if kind == "Where":
        return f"{args[1]} if {args[0]} != 0 else {args[2]}"
    if kind == "StopGradient":
        return args[0]
    if kind == "Fma":
        if dts[0].is_float:
            a, b, c = (_as_compute(x, d) for x, d in zip(args, dts))
            return _store(f"{a} * {b} + {c}", out)
        return _store(f"np.int64({args[0]}) * np.int64({args[1]}) + np.int64({args[2]})", out)
    if kind == "Clamp":
        if dts[0].is_float:          # bounds in the f64 compute type (they are f32 values)
            x = _as_compute(args[0], dts[0])
            lo, hi = (py_literal(v, DType.F64) for v in (attrs.min, attrs.max))
            return _store(f"_fmin(_fmax({x}, {lo}), {hi})", out)
        lo, hi = (py_literal(v, DType.I64)
                  for v in clamp_int_bounds(attrs.min, attrs.max, dts[0].np))
        return _store(f"min(max(np.int64({args[0]}), {lo}), {hi})", out)
    raise Unsupported(f"{kind} inside an elementwise kernel")


def render(steps, in_dtypes, step_dtypes, modes, row_steps=None) -> tuple[str, str]:
    """(kernel name, source) of a chain; ``modes`` has one read mode per input.

    ``row_steps`` (one entry per input, or None for the flat loop) makes the kernel run
    over rows of the output's last axis (``_ROWS_HEAD``); a strided input's entry is its
    last-axis element stride when that is 0 (read once per row) or 1 (a contiguous row),
    else None (read through its stride array)."""
    params = []
    for i, m in enumerate(modes):
        params.append(f"x{i}")
        if m == "strided":
            params.append(f"st{i}")
    body = []
    for k, (kind, attrs, ops) in enumerate(steps):
        args = [f"v{j}" if src == "Input" else f"s{j}" for src, j in ops]
        dts = [in_dtypes[j] if src == "Input" else step_dtypes[j] for src, j in ops]
        body.append(f"        s{k} = {step_expr(kind, attrs, args, dts, step_dtypes[k])}")
    last = len(steps) - 1
    mods = [f"    m{i} = x{i}.size" for i, m in enumerate(modes) if m == "mod"]
    if row_steps is None:
        reads = []
        for i, m in enumerate(modes):
            idx = {"full": "i", "scalar": "0", "mod": f"i % m{i}", "strided": f"j{i}"}[m]
            if m == "strided":
                reads.append(f"        j{i} = _offset(i, dims, st{i})")
            reads.append(f"        v{i} = x{i}[{idx}]")
        loop = "\n".join(reads + body + [f"        out[i] = s{last}"])
    else:
        loop = _row_loop(modes, row_steps, body + [f"        out[i] = s{last}"])
    key = hashlib.sha256(("|".join(body) + "|".join(modes) + str(in_dtypes) +
                          str(row_steps)).encode())
    name = f"ew_{key.hexdigest()[:12]}"
    sig = ", ".join(["out"] + params + ["dims"])
    src = [PRELUDE, _OFFSET]
    for suffix, rng in (("", "range"), ("_par", "prange")):
        par = ", parallel=True" if suffix else ""
        head = (_ROWS_HEAD.format(rng=rng) if row_steps is not None
                else f"    for i in {rng}(n):\n")
        src.append(f"@njit(cache=True, error_model='numpy', nogil=True{par})\n"
                   f"def {name}{suffix}({sig}):\n"
                   f"    n = out.size\n" + "\n".join(mods) + ("\n" if mods else "") +
                   f"{head}{loop}\n")
    return name, "\n\n".join(src)


# A row kernel runs over rows of the output's last axis: ``_offset``'s per-axis divisions
# (strided reads) and the modulus (suffix reads) are paid once per row, not per element
# (per element they cost ~20x a numpy broadcast on [8, 4, 128, 128] - [8, 4, 128, 1]),
# and a [..., 1] operand is read once per row, so the inner loop vectorizes.
_ROWS_HEAD = """    last = dims.size - 1
    w = dims[last]
    rows = n // w if w else 0
    for r in {rng}(rows):
"""


def _row_loop(modes, row_steps, body: list) -> str:
    """The per-row starts and the inner loop over the last axis of a row kernel. Rows
    are read through slices indexed by ``t`` (a range index: no negative-index wrap, so
    the inner loop vectorizes)."""
    starts, reads = ["        i0 = r * w", "        o = out[i0:i0 + w]"], []
    for i, m in enumerate(modes):
        if m == "strided":
            starts.append(f"        j{i} = _offset(i0, dims, st{i})")
            step = row_steps[i]
            if step == 0:
                starts.append(f"        v{i} = x{i}[j{i}]")
            elif step == 1:
                starts.append(f"        a{i} = x{i}[j{i}:j{i} + w]")
                reads.append(f"            v{i} = a{i}[t]")
            else:
                reads.append(f"            v{i} = x{i}[j{i} + t * st{i}[last]]")
        elif m == "mod":
            starts += [f"        b{i} = i0 % m{i}", f"        a{i} = x{i}[b{i}:b{i} + w]"]
            reads.append(f"            v{i} = a{i}[t]")
        elif m == "scalar":
            starts.append(f"        v{i} = x{i}[0]")
        else:
            starts.append(f"        a{i} = x{i}[i0:i0 + w]")
            reads.append(f"            v{i} = a{i}[t]")
    inner = ["    " + ln.replace("out[i] =", "o[t] =") for ln in body]
    return "\n".join(starts + ["        for t in range(w):"] + reads + inner)


_OFFSET = '''
@njit(inline="always", cache=True)
def _offset(i, dims, strides):
    j = 0
    r = i + 0       # a new variable: inlined into a prange loop, `r = i` aliases the index
    for ax in range(dims.size - 1, -1, -1):
        d = dims[ax]
        j += (r % d) * strides[ax]
        r //= d
    return j
'''
