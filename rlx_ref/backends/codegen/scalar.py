"""Scalar formulas of the elementwise ops, once per target dialect.

Every entry is a template over operand names (``{x}``, ``{a}``, ``{b}``, ``{c}``) that
evaluates one element. ``py`` is Numba-compiled Python, ``c`` is OpenCL/CUDA C. Float
formulas run in the kernel's compute type (f64 for f32/f64 tensors: one rounding at the
store); helpers such as ``_fmax`` come from the dialect's prelude (``PRELUDE``); ``_vexp``,
``_vexpm1``, ``_vlog1p``, ``_vtanh``, ``_verf`` and ``_sigmoid`` are branch-free so the Numba loop vectorizes (``_vmath``).
Semantics must equal the registry references in ``rlx_ref/ops/elementwise.py``.
"""
from __future__ import annotations

# ── activations (float compute type) ─────────────────────────────────────
ACTIVATION = {
    "Gelu": {"py": "0.5 * {x} * (1.0 + _verf({x} * 0.7071067811865476))",
             "c": "0.5 * {x} * (1.0 + erf({x} * 0.7071067811865476))"},
    "GeluApprox": {"py": "0.5 * {x} * (1.0 + _vtanh(0.7978845608028654 * ({x} + "
                         "0.044715 * {x} * {x} * {x})))",
                   "c": "0.5 * {x} * (1.0 + rlx_tanh(0.7978845608028654 * ({x} + "
                        "0.044715 * {x} * {x} * {x})))"},
    "Silu": {"py": "{x} * _sigmoid({x})", "c": "{x} * rlx_sigmoid({x})"},
    "Relu": {"py": "_relu({x})", "c": "rlx_relu({x})"},
    "Sigmoid": {"py": "_sigmoid({x})", "c": "rlx_sigmoid({x})"},
    "Tanh": {"py": "_vtanh({x})", "c": "rlx_tanh({x})"},
    "Exp": {"py": "_vexp({x})", "c": "exp({x})"},
    "Log": {"py": "_log({x})", "c": "log({x})"},
    "Sqrt": {"py": "_sqrt({x})", "c": "sqrt({x})"},
    "Rsqrt": {"py": "1.0 / _sqrt({x})", "c": "rsqrt({x})"},
    "Neg": {"py": "-{x}", "c": "-{x}"},
    "Abs": {"py": "abs({x})", "c": "fabs({x})"},
    "Sin": {"py": "math.sin({x})", "c": "sin({x})"},
    "Cos": {"py": "math.cos({x})", "c": "cos({x})"},
    "Tan": {"py": "math.tan({x})", "c": "tan({x})"},
    "Atan": {"py": "math.atan({x})", "c": "atan({x})"},
    "Recip": {"py": "_div(1.0, {x})", "c": "1.0 / {x}"},
    "Round": {"py": "np.rint({x})", "c": "rint({x})"},
    "Floor": {"py": "np.floor({x})", "c": "floor({x})"},
    "Ceil": {"py": "np.ceil({x})", "c": "ceil({x})"},
    "Sign": {"py": "_sign({x})", "c": "rlx_sign({x})"},
    "Softplus": {"py": "_softplus({x})", "c": "rlx_softplus({x})"},
    "Elu": {"py": "{x} if {x} > 0.0 else _vexp({x}) - 1.0",      # RLX: exp(x) - 1, not expm1
            "c": "({x} > 0.0 ? {x} : exp({x}) - 1.0)"},
    "Erf": {"py": "_verf({x})", "c": "erf({x})"},
    "HardSwish": {"py": "{x} * min(max({x} + 3.0, 0.0), 6.0) / 6.0",
                  "c": "{x} * fmin(fmax({x} + 3.0, 0.0), 6.0) / 6.0"},
    "HardSigmoid": {"py": "min(max({x} / 6.0 + 0.5, 0.0), 1.0)",
                    "c": "({x} != {x} ? {x} : fmin(fmax({x} / 6.0 + 0.5, 0.0), 1.0))"},
    "Mish": {"py": "{x} * _vtanh(_softplus({x}))", "c": "{x} * rlx_tanh(rlx_softplus({x}))"},
    "Softsign": {"py": "{x} / (1.0 + abs({x}))", "c": "{x} / (1.0 + fabs({x}))"},
    "LogSigmoid": {"py": "min({x}, 0.0) - _vlog1p(_vexp(-abs({x})))",
                   "c": "fmin({x}, 0.0) - log1p(exp(-fabs({x})))"},
}
# activations that are exact on integers (same formula, integer compute type)
ACTIVATION_INT = {
    "Relu": {"py": "max({x}, 0)", "c": "max({x}, 0)"},
    "Neg": {"py": "-{x}", "c": "-{x}"},
    "Abs": {"py": "abs({x})", "c": "abs({x})"},
    "Sign": {"py": "(1 if {x} > 0 else (-1 if {x} < 0 else 0))",
             "c": "(({x} > 0) - ({x} < 0))"},
}

# ── binary ops ────────────────────────────────────────────────────────────
BINARY = {
    "Add": {"py": "{a} + {b}", "c": "{a} + {b}"},
    "Sub": {"py": "{a} - {b}", "c": "{a} - {b}"},
    "Mul": {"py": "{a} * {b}", "c": "{a} * {b}"},
    "Div": {"py": "_div({a}, {b})", "c": "{a} / {b}"},
    "Max": {"py": "_fmax({a}, {b})", "c": "rlx_fmax({a}, {b})"},
    "Min": {"py": "_fmin({a}, {b})", "c": "rlx_fmin({a}, {b})"},
    "Pow": {"py": "_pow({a}, {b})", "c": "pow({a}, {b})"},
    "Mod": {"py": "_fmod({a}, {b})", "c": "fmod({a}, {b})"},
    "Atan2": {"py": "math.atan2({a}, {b})", "c": "atan2({a}, {b})"},
    "BitAnd": {"py": "_f_from_i(_f2i64({a}) & _f2i64({b}))",
               "c": "(double)(rlx_f2l({a}) & rlx_f2l({b}))"},
    "BitOr": {"py": "_f_from_i(_f2i64({a}) | _f2i64({b}))",
              "c": "(double)(rlx_f2l({a}) | rlx_f2l({b}))"},
    "BitXor": {"py": "_f_from_i(_f2i64({a}) ^ _f2i64({b}))",
               "c": "(double)(rlx_f2l({a}) ^ rlx_f2l({b}))"},
    "Shl": {"py": "_f_from_i(_shl64(_f2i64({a}), _f2i64({b})))",
            "c": "(double)(rlx_f2l({a}) << (rlx_f2l({b}) & 63))"},
    "Shr": {"py": "_f_from_i(_f2i64({a}) >> (_f2i64({b}) & 63))",
            "c": "(double)(rlx_f2l({a}) >> (rlx_f2l({b}) & 63))"},
}
# integer (and bool) tensors: exact integer arithmetic in the tensor's own type
BINARY_INT = {
    "Add": {"py": "{a} + {b}", "c": "{a} + {b}"},
    "Sub": {"py": "{a} - {b}", "c": "{a} - {b}"},
    "Mul": {"py": "{a} * {b}", "c": "{a} * {b}"},
    "Div": {"py": "_idiv({a}, {b})", "c": "rlx_idiv({a}, {b})"},
    "Mod": {"py": "_imod({a}, {b})", "c": "rlx_imod({a}, {b})"},
    "Max": {"py": "max({a}, {b})", "c": "max({a}, {b})"},
    "Min": {"py": "min({a}, {b})", "c": "min({a}, {b})"},
    "Pow": {"py": "_ipow({a}, {b})", "c": "rlx_ipow({a}, {b})"},
    "BitAnd": {"py": "{a} & {b}", "c": "{a} & {b}"},
    "BitOr": {"py": "{a} | {b}", "c": "{a} | {b}"},
    "BitXor": {"py": "{a} ^ {b}", "c": "{a} ^ {b}"},
    "Shl": {"py": "{a} << ({b} % {bits})", "c": "{a} << ({b} & ({bits} - 1))"},
    "Shr": {"py": "{a} >> ({b} % {bits})", "c": "{a} >> ({b} & ({bits} - 1))"},
}

COMPARE = {"Eq": "==", "Ne": "!=", "Lt": "<", "Le": "<=", "Gt": ">", "Ge": ">="}
