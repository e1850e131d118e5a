"""codegen/literal.py: every literal evaluates to exactly its value, in Python, Numba and C.

Each (dtype, value) pair is rendered, evaluated in the target language and compared bit
for bit with numpy's value of that dtype: by ``eval``, inside an ``njit`` function (whose
inferred return type must be the dtype), and in an OpenCL kernel that stores the literal.
A scan of the backend modules checks that nothing else formats values with ``repr``.
"""
import ast
import math
import pathlib

import ml_dtypes
import numpy as np
import pytest

from rlx_ref.backends.codegen.literal import (
    LiteralError, c_literal, c_type, exact_value, py_float, py_literal,
)
from rlx_ref.ir.dtype import DType

F = [DType.F32, DType.F64, DType.F16, DType.BF16]
I = [DType.I8, DType.I16, DType.I32, DType.I64, DType.U8, DType.U32, "uint16", "uint64"]
SPECIAL = [math.inf, -math.inf, math.nan, -math.nan, 0.0, -0.0, 1.0, -1.5, 0.1, 1e-300]


def _np(dt) -> np.dtype:
    return dt.np if isinstance(dt, DType) else np.dtype(dt)


def float_values(dt) -> list:
    """The special values plus the dtype's extremes: max/min finite, tiny, subnormals."""
    info = ml_dtypes.finfo(_np(dt)) if _np(dt).name == "bfloat16" else np.finfo(_np(dt))
    tiny, sub = float(info.tiny), float(info.smallest_subnormal)
    return SPECIAL + [float(info.max), float(info.min), tiny, -tiny, sub, -sub,
                      float(info.eps), 65504.0, 3.4028234663852886e38]


def int_values(dt) -> list:
    info = np.iinfo(_np(dt))
    return [0, 1, -1, info.min, info.max, info.min + 1, info.max - 1, 100, -100,
            float(info.max // 2), -0.0]


def cases():
    out = [(dt, v) for dt in F for v in float_values(dt)]
    out += [(dt, v) for dt in I for v in int_values(dt) if np.iinfo(_np(dt)).min <= v]
    out += [(DType.BOOL, v) for v in (True, False, 0, 1)]
    return out


def expected_bits(dt, v) -> int:
    """The bits of ``v`` converted to ``dt`` (16-bit floats: their own 16 bits)."""
    arr = np.array([exact_value(v, dt)]).astype(_np(dt))
    return int(arr.view(f"u{arr.itemsize}")[0])


def bits_of(value, dt) -> int:
    """The bits of an evaluated literal read back as ``dt`` (shadows narrowed exactly)."""
    if _np(dt).name in ("float16", "bfloat16"):
        narrow = np.array([value], np.float64).astype(_np(dt))
        assert float(narrow[0]) == float(value) or math.isnan(value), "shadow is not exact"
        arr = narrow
    else:
        arr = np.array([value]).astype(_np(dt))
    return int(arr.view(f"u{arr.itemsize}")[0])


@pytest.mark.parametrize("dt,v", cases(), ids=lambda x: str(x))
def test_python_literal_round_trips(dt, v):
    text = py_literal(v, dt)
    got = eval(text, {"np": np, "math": math})
    if _np(dt).name in ("float16", "bfloat16"):
        assert type(got) is np.float64      # 16-bit values live in f64 inside kernels
    elif _np(dt).kind != "b":
        assert type(got) is _np(dt).type, text
    assert bits_of(got, dt) == expected_bits(dt, v), text


@pytest.mark.parametrize("dt", F + I + [DType.BOOL], ids=str)
def test_numba_literal_round_trips_with_its_type(dt):
    numba = pytest.importorskip("numba")
    values = [v for d, v in cases() if d is dt or d == dt]
    src = "def f():\n    return (" + ", ".join(py_literal(v, dt) for v in values) + ",)\n"
    scope = {"np": np, "math": math}
    exec(src, scope)
    fn = numba.njit(scope["f"])
    got = fn()
    want_type = numba.from_dtype(np.dtype(np.float64) if _np(dt).name in
                                 ("float16", "bfloat16") else _np(dt))
    types = [numba.types.unliteral(t) for t in fn.nopython_signatures[0].return_type]
    assert all(t == want_type for t in types), (types, src)
    for v, g in zip(values, got):
        assert bits_of(g, dt) == expected_bits(dt, v), (v, py_literal(v, dt))


def _opencl_context():
    """A context on the first OpenCL device that can build a program; skip if none."""
    cl = pytest.importorskip("pyopencl")
    for plat in cl.get_platforms():
        for dev in plat.get_devices():
            ctx = cl.Context([dev])
            try:
                cl.Program(ctx, "__kernel void k(__global int* o) { o[0] = 1; }").build()
            except Exception:
                continue
            return cl, ctx, dev
    pytest.skip("no OpenCL device can build a program")


@pytest.mark.parametrize("dt", F + I + [DType.BOOL], ids=str)
def test_opencl_literal_round_trips(dt):
    cl, ctx, dev = _opencl_context()
    if dt is DType.F64 and "cl_khr_fp64" not in dev.extensions:
        pytest.skip(f"{dev.name} has no f64")
    values = [v for d, v in cases() if d is dt or d == dt]
    ct = c_type(dt)
    lines = [f"    o[{i}] = {c_literal(v, dt)};" for i, v in enumerate(values)]
    src = ("#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" if dt is DType.F64 else "")
    src += f"__kernel void k(__global {ct}* o) {{\n" + "\n".join(lines) + "\n}\n"
    prog = cl.Program(ctx, src).build()
    host = np.zeros(len(values), {"uchar": np.uint8, "float": np.float32}.get(
        ct, np.float64 if ct == "double" else _np(dt)))
    buf = cl.Buffer(ctx, cl.mem_flags.WRITE_ONLY, host.nbytes)
    queue = cl.CommandQueue(ctx)
    prog.k(queue, (1,), None, buf)
    cl.enqueue_copy(queue, host, buf)
    queue.finish()
    for i, v in enumerate(values):
        assert bits_of(host[i], dt) == expected_bits(dt, v), (v, c_literal(v, dt))


def test_c_literals_are_exact_text():
    assert c_literal(-2 ** 63, DType.I64) == "(-9223372036854775807L - 1L)"
    assert c_literal(math.inf, DType.F64) == "((double)INFINITY)"
    assert c_literal(-math.nan, DType.F32) == "as_float(0xffc00000U)"
    assert c_literal(-0.0, DType.F32) == "(-0.0f)"
    assert c_literal(0.5, DType.F32) == "(0.5f)"                 # exact decimals stay decimal
    assert c_literal(0.1, DType.F32) == "(0x1.99999ap-4f)"       # inexact ones are hex
    assert c_literal(2 ** 64 - 1, "uint64") == "(18446744073709551615UL)"
    assert py_literal(-2 ** 63, DType.I64) == "np.int64(-9223372036854775807 - 1)"
    assert py_literal(math.inf, DType.F32) == "np.float32(math.inf)"
    assert py_float(-math.inf) == "-math.inf" and py_float(0.25) == "0.25"
    assert c_literal(-10 ** 400, DType.F32) == "(-INFINITY)"      # rounds like a cast


@pytest.mark.parametrize("value,dt,match", [
    (math.inf, DType.I32, "not an integer"), (math.nan, DType.I64, "not an integer"),
    (1.5, DType.U8, "not an integer"), (256, DType.U8, r"outside the range of uint8 \(0..255\)"),
    (-1, "uint64", "outside the range"), (2, DType.BOOL, "not a bool literal"),
    (1.0, DType.C64, "complex"),
])
def test_values_without_a_literal_are_refused(value, dt, match):
    for render in (py_literal, c_literal):
        with pytest.raises(LiteralError, match=match):
            render(value, dt)


def _repr_outside_errors(path: pathlib.Path) -> list:
    """Lines that format a value with repr()/!r/!s outside an exception message."""
    tree = ast.parse(path.read_text())
    parent = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}

    def in_message(n) -> bool:
        while n in parent:
            n = parent[n]
            if isinstance(n, ast.Raise):
                return True
            if isinstance(n, ast.Call):
                f = n.func
                name = getattr(f, "id", getattr(f, "attr", ""))
                if name.endswith(("Error", "Exception", "Unavailable", "__init__", "warn")):
                    return True
        return False

    hits = []
    for n in ast.walk(tree):
        fmt = isinstance(n, ast.FormattedValue) and n.conversion in (ord("r"), ord("s"))
        call = isinstance(n, ast.Call) and getattr(n.func, "id", "") == "repr"
        if (fmt or call) and not in_message(n):
            hits.append(f"{path}:{n.lineno}")
    return hits


def test_no_backend_formats_values_outside_the_literal_module():
    root = pathlib.Path(__file__).resolve().parents[1] / "rlx_ref" / "backends"
    hits = [h for p in sorted(root.rglob("*.py")) if p.name != "literal.py"
            for h in _repr_outside_errors(p)]
    assert not hits, f"values formatted into source without codegen/literal.py: {hits}"
