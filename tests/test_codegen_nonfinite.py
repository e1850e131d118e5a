"""Non-finite payload values reach generated kernels as literals, and every backend agrees.

Clamp with ±inf and NaN bounds, in float and integer dtypes, runs on numba-cpu, OpenCL
and the CUDA simulator and must equal the oracle (C2 of Clamp: an integer Clamp's NaN
bound is no bound, ±inf saturate). The generated sources of these graphs, and of graphs
whose kernels carry dtype extremes (Cast saturation, Max/Min identities), must not name
a bare ``inf``/``nan`` or write an integer constant too wide for its C type.
"""
import io
import json
import math
import os
import re
import subprocess
import sys
import tokenize

import numpy as np
import pytest

import rlx_ref
from rlx_ref.backends.registry import get_backend

INF, NAN = math.inf, math.nan
BOUNDS = [(-INF, INF), (-INF, 1.0), (-1.5, INF), (INF, -INF), (NAN, 1.0), (-1.5, NAN),
          (NAN, NAN), (INF, 2.0)]
DTYPES = ("f32", "f16", "f64", "i32", "i64")
_NP = {"f32": np.float32, "f16": np.float16, "f64": np.float64, "i32": np.int32,
       "i64": np.int64}


def feed(dt: str) -> np.ndarray:
    """Values on both sides of every bound: the specials, or the integer extremes."""
    if dt.startswith("i"):
        info = np.iinfo(_NP[dt])
        return np.array([info.min, -5, -1, 0, 1, 2, 5, info.max], _NP[dt])
    return np.array([-INF, -3.0, -1.5, -0.0, 0.0, 0.5, 2.0, 3.0, INF, NAN], _NP[dt])


def clamp_graph(dt: str) -> rlx_ref.Graph:
    """One Clamp per bound pair over one input (each its own output)."""
    g = rlx_ref.Graph(f"clamp_{dt}")
    x = g.input("x", [10 if dt.startswith("f") else 8], dt)
    g.set_outputs([g.clamp(x, min=lo, max=hi) for lo, hi in BOUNDS])
    return g


def extremes_graph() -> rlx_ref.Graph:
    """Kernels whose sources hold dtype extremes: saturating casts and Max/Min identities."""
    g = rlx_ref.Graph("extremes")
    x = g.input("x", [2, 5], "f32")
    i = g.input("i", [2, 5], "i64")
    outs = [g.cast(x, to=t) for t in ("i64", "i32", "u32", "u8")]
    outs += [g.reduce(i, op, [1]) for op in ("Max", "Min")]
    outs += [g.reduce(x, op, [1]) for op in ("Max", "Min")]
    g.set_outputs(outs)
    return g


def extremes_feeds() -> dict:
    x = np.array([[-INF, -1e30, -2.5, 0.0, NAN], [1e30, INF, 3.5, 255.5, -0.0]], np.float32)
    info = np.iinfo(np.int64)
    i = np.array([[info.min, -1, 0, 1, info.max], [5, 4, 3, 2, 1]], np.int64)
    return {"x": x, "i": i}


_WIDE_C_INT = re.compile(r"(?<![\w.])(\d{19,})(?![\dU])")


def bare_names(src: str) -> list:
    """``inf``/``nan`` used as names (as ``repr`` writes them), outside comments/strings."""
    if "__kernel" in src:            # OpenCL C: no such identifiers exist
        code = re.sub(r"/\*.*?\*/|//[^\n]*", "", src, flags=re.S)
        return re.findall(r"(?<![\w.])(?:inf|nan)(?!\w)", code)
    toks = list(tokenize.generate_tokens(io.StringIO(src).readline))
    return [t.string for k, t in enumerate(toks) if t.type == tokenize.NAME
            and t.string in ("inf", "nan") and toks[k - 1].string != "."]


def assert_clean_source(src: str, where: str):
    bare = bare_names(src)
    assert not bare, f"{where}: bare non-finite names {bare} in\n{src}"
    if "__kernel" in src:
        for m in _WIDE_C_INT.finditer(src):
            assert int(m.group(1)) < 2 ** 63, f"{where}: {m.group(1)} does not fit a long"


def agree(got: list, want: list, where: str):
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype, f"{where} output {k}: dtype {g.dtype} != {w.dtype}"
        np.testing.assert_array_equal(g, w, err_msg=f"{where} output {k} {BOUNDS[k % 8]}")


def _backend(name: str):
    b = get_backend(name)
    ok, why = b.availability()
    if not ok:
        pytest.skip(f"{name}: {why}")
    return b


@pytest.mark.parametrize("backend", ["numba-cpu", "opencl"])
@pytest.mark.parametrize("dt", DTYPES)
def test_clamp_with_nonfinite_bounds_matches_the_oracle(backend, dt):
    b = _backend(backend)
    g = clamp_graph(dt)
    feeds = {"x": feed(dt)}
    exe = b.compile(g)
    agree(exe.run(feeds), rlx_ref.interpret(g, feeds), f"{backend} {dt}")
    for name, src in exe.kernel_sources().items():
        assert_clean_source(src, f"{backend} {dt} {name}")


@pytest.mark.parametrize("backend", ["numba-cpu", "opencl"])
def test_kernels_with_dtype_extremes_are_clean_and_right(backend):
    b = _backend(backend)
    g, feeds = extremes_graph(), extremes_feeds()
    exe = b.compile(g)
    agree(exe.run(feeds), rlx_ref.interpret(g, feeds), backend)
    for name, src in exe.kernel_sources().items():
        assert_clean_source(src, f"{backend} {name}")


def test_integer_clamp_bounds_follow_one_rule():
    from rlx_ref.ops.elementwise import clamp_int_bounds

    i8 = np.int8
    assert clamp_int_bounds(-1.5, 2.5, i8) == (-1, 2)
    assert clamp_int_bounds(-INF, INF, i8) == (-128, 127)
    assert clamp_int_bounds(NAN, NAN, i8) == (-128, 127)           # NaN: no bound
    assert clamp_int_bounds(INF, -INF, i8) == (127, -128)          # everything → max
    assert clamp_int_bounds(-3e9, 3e9, np.int32) == (-2 ** 31, 2 ** 31 - 1)
    assert clamp_int_bounds(-0.5, NAN, np.uint32) == (0, 2 ** 32 - 1)


@pytest.mark.parametrize("dt", DTYPES)
def test_decomposed_clamp_uses_the_same_rule(dt):
    from rlx_ref.passes.decompose import decompose

    g = clamp_graph(dt)
    after = decompose(g, kinds=["Clamp"])
    assert "Clamp" not in {n.kind for n in after}
    feeds = {"x": feed(dt)}
    agree(rlx_ref.interpret(after, feeds), rlx_ref.interpret(g, feeds), f"decomposed {dt}")


SIM_ENV = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "PYTHONWARNINGS": "ignore"}


def test_clamp_with_nonfinite_bounds_on_the_cuda_simulator():
    pytest.importorskip("numba")
    pytest.importorskip("numba_cuda")
    code = (
        "import json, sys\n"
        "sys.path.insert(0, %r)\n"
        "import test_codegen_nonfinite as T\n"
        "from rlx_ref.backends.registry import get_backend\n"
        "import rlx_ref\n"
        "b = get_backend('cuda')\n"
        "out = {}\n"
        "for dt in T.DTYPES:\n"
        "    g = T.clamp_graph(dt); feeds = {'x': T.feed(dt)}\n"
        "    exe = b.compile(g)\n"
        "    T.agree(exe.run(feeds), rlx_ref.interpret(g, feeds), 'cuda ' + dt)\n"
        "    for name, src in exe.kernel_sources().items():\n"
        "        T.assert_clean_source(src, 'cuda ' + name)\n"
        "    out[dt] = len(exe.kernel_sources())\n"
        "g, feeds = T.extremes_graph(), T.extremes_feeds()\n"
        "exe = b.compile(g)\n"
        "T.agree(exe.run(feeds), rlx_ref.interpret(g, feeds), 'cuda extremes')\n"
        "for name, src in exe.kernel_sources().items():\n"
        "    T.assert_clean_source(src, 'cuda ' + name)\n"
        "print(json.dumps(out))\n" % os.path.dirname(__file__))
    run = subprocess.run([sys.executable, "-c", code], env=SIM_ENV, capture_output=True,
                         text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stderr[-4000:]
    counts = json.loads(run.stdout.strip().splitlines()[-1])
    assert set(counts) == set(DTYPES) and all(counts.values())
