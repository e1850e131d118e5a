"""Renders one elementwise chain (a standalone op or a fused region) as a CUDA kernel.

The per-step formulas are the Numba CPU renderer's (``numba_cpu.ew_codegen.step_expr``,
the shared "py" dialect); this renderer adds what a GPU kernel needs around them: a
grid-stride loop over the flat output, 16-bit floats read and written as bits, checks
that flag integer division by zero in the plan's error word instead of faulting, and the
numpy calls Numba's CUDA target cannot type swapped for prelude helpers.

Each input is read one of five ways, chosen on the host: ``full`` (flat index),
``scalar`` (element 0), ``mod`` (suffix broadcast: i % m), ``strided`` (general broadcast:
per-axis strides) or ``near2x`` (a region's ResizeNearest2x prologue).
"""
from __future__ import annotations

import hashlib

from ...ir.dtype import DType
from ..numba_cpu.ew_codegen import Unsupported, step_expr
from .prelude import NUMPY_SUBSTITUTES, PRELUDE

# error codes a kernel writes (with its node id) into the plan's error word
ERR_DIV0, ERR_MOD0, ERR_NEG_POW, ERR_INDEX, ERR_NOT_INT = 1, 2, 3, 4, 5
ERROR_TEXT = {ERR_DIV0: "integer division by zero", ERR_MOD0: "integer modulo by zero",
              ERR_NEG_POW: "integer Pow with a negative exponent",
              ERR_INDEX: "index out of range", ERR_NOT_INT: "index is not an integer"}
_WIDEN = {DType.F16: "_h2f", DType.BF16: "_bf2f"}
_NARROW = {DType.F16: "_f2h", DType.BF16: "_f2bf"}

__all__ = ["ERROR_TEXT", "Unsupported", "render"]


def _cuda_expr(expr: str) -> str:
    for numpy_call, helper in NUMPY_SUBSTITUTES.items():
        expr = expr.replace(numpy_call, helper)
    return expr


def _int_checks(kind: str, attrs, args: list, dts: list) -> list[str]:
    """Statements flagging integer Div/Mod by zero and negative integer Pow."""
    if kind != "Binary" or dts[0].is_float:
        return []
    b = args[1]
    test = {"Div": (f"{b} == 0", ERR_DIV0), "Mod": (f"{b} == 0", ERR_MOD0),
            "Pow": (f"{b} < 0", ERR_NEG_POW)}.get(attrs.op)
    if test is None:
        return []
    return [f"if {test[0]}:", f"    _fail(err, tag, {test[1]})"]


def _read(i: int, mode: str, dt: DType) -> list[str]:
    idx = {"full": "i", "scalar": "0", "mod": f"i % m{i}", "strided": f"_offset(i, dims, st{i})",
           "near2x": "_near2x(i, dims)"}[mode]
    value = f"x{i}[{idx}]"
    return [f"v{i} = {_WIDEN[dt]}({value})" if dt in _WIDEN else f"v{i} = {value}"]


def render(steps, in_dtypes, step_dtypes, modes) -> tuple[str, str]:
    """(kernel name, source) of a chain; ``modes`` has one read mode per input.

    ``step_dtypes[-1]`` is the node's output dtype; a 16-bit output is computed in f64
    and rounded once when stored.
    """
    params = []
    for i, m in enumerate(modes):
        params.append(f"x{i}")
        if m == "strided":
            params.append(f"st{i}")
    body = []
    for i, (m, dt) in enumerate(zip(modes, in_dtypes)):
        body += _read(i, m, dt)
    out_dt = step_dtypes[-1]
    last = len(steps) - 1
    for k, (kind, attrs, ops) in enumerate(steps):
        args = [f"v{j}" if src == "Input" else f"s{j}" for src, j in ops]
        dts = [in_dtypes[j] if src == "Input" else step_dtypes[j] for src, j in ops]
        value_dt = DType.F64 if k == last and out_dt in _NARROW else step_dtypes[k]
        body += _int_checks(kind, attrs, args, dts)
        if kind == "Fma" and dts[0] is DType.F64:      # one rounding, as the oracle
            expr = f"_fma64({args[0]}, {args[1]}, {args[2]})"
        else:
            expr = _cuda_expr(step_expr(kind, attrs, args, dts, value_dt))
        body.append(f"s{k} = {expr}")
    store = f"{_NARROW[out_dt]}(s{last})" if out_dt in _NARROW else f"s{last}"
    body.append(f"out[i] = {store}")
    key = hashlib.sha256(("|".join(body) + "|".join(modes)).encode()).hexdigest()[:12]
    name = f"ew_{key}"
    mods = [f"    m{i} = x{i}.size" for i, m in enumerate(modes) if m == "mod"]
    loop = "\n".join("        " + line for line in body)
    src = (f"def {name}({', '.join(['out'] + params + ['dims', 'err', 'tag'])}):\n"
           f"    n = out.size\n" + "".join(m + "\n" for m in mods) +
           "    i = cuda.grid(1)\n    stride = cuda.gridsize(1)\n"
           f"    while i < n:\n{loop}\n        i += stride\n")
    return name, PRELUDE + "\n\n" + src

