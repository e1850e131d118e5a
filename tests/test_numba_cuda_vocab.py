"""The CUDA kernels of the later vocabulary (RNG, Sample, Sort, KvAppend, Conv3d,
Interpolate3d and the state-space scans): declared native, every kernel their
conformance cases and some larger shapes make compiles to PTX for cc 9.0, and on the
simulator they match the oracle at shapes past the cases' (grid-stride loops, several
merge passes, many lanes): bit for bit where the oracle's contract is exact."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("numba")
try:
    import numba_cuda  # noqa: F401
except ImportError:
    pytest.skip("numba-cuda is not installed (pip install 'numba-cuda[cu13]')",
                allow_module_level=True)

from rlx_ref.backends.registry import get_backend

KINDS = ("RngUniform", "RngNormal", "Sample", "Sort", "ArgSort", "KvAppend", "Conv3d",
         "Interpolate3d", "SelectiveScan", "Mamba2", "GatedDeltaNet")
SIM_ENV = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "PYTHONWARNINGS": "ignore"}


def test_kinds_are_native():
    paths = get_backend("cuda").paths()
    assert {k: paths[k] for k in KINDS} == {k: "native" for k in KINDS}


def _big_graphs():
    import rlx_ref

    def g_of(name, build):
        g = rlx_ref.Graph(name)
        g.set_outputs([build(g)])
        return g

    return [
        g_of("rng", lambda g: g.add(
            g.op("RngNormal", [g.input("t", [1000, 3])], mean=0.0, scale=1.0, key=5,
                 shape=rlx_ref.Shape((1000, 3), rlx_ref.DType.F32)),
            g.op("RngUniform", [], low=0.0, high=1.0, key=5,
                 shape=rlx_ref.Shape((1000, 3), rlx_ref.DType.F32)))),
        g_of("sort16", lambda g: g.op("Sort", [g.input("x", [8, 4097], "f16")], axis=1,
                                      descending=True)),
        g_of("argsort_i64", lambda g: g.op("ArgSort", [g.input("x", [5000], "i64")],
                                           axis=0, descending=False)),
        g_of("sample", lambda g: g.op("Sample", [g.input("x", [4, 32000])], top_k=50,
                                      top_p=0.9, temperature=0.8, seed=3,
                                      shape=rlx_ref.Shape((4,), rlx_ref.DType.F32))),
        g_of("conv3d_bf16", lambda g: g.op(
            "Conv3d", [g.input("x", [2, 8, 9, 9, 9], "bf16"),
                       g.input("w", [16, 4, 3, 3, 3], "bf16")],
            stride=(2, 1, 1), padding=(1, 1, 1), dilation=(1, 2, 1), groups=2)),
        g_of("gdn", lambda g: g.op(
            "GatedDeltaNet", [g.input(n, [2, 64, 4, 64]) for n in "qkv"]
            + [g.input("g", [2, 64, 4, 64]), g.input("beta", [2, 64, 4]),
               g.input("s", [2, 4, 64, 64])],
            state_size=64, carry_state=True, gate_per_channel=True)),
    ]


def test_kernels_compile_to_ptx_for_cc90():
    cuda = pytest.importorskip("numba.cuda")
    if not hasattr(cuda, "compile_ptx"):
        pytest.skip("numba.cuda has no compile_ptx (simulator active)")
    from rlx_ref.backends.numba_cuda.ptx_check import _DONE, compile_launches, launches_of
    from rlx_ref.conformance.cases import build_cases

    backend = get_backend("cuda")
    seen, kinds = {}, set()
    graphs = [c.graph for c in build_cases(kinds=KINDS)] + _big_graphs()
    for graph in graphs:
        for ln in launches_of(backend, graph):
            seen.setdefault(ln.key(), ln)
            kinds.add(ln.kernel.name.split("_")[0])
    assert {"rnguni", "rngnorm", "sortinit", "sortpass", "sortout", "smpscale", "smpcut",
            "smpsoft", "smptopp", "smpdraw", "kvappend", "conv3d", "interp3d", "s6", "ssd",
            "gdn"} <= kinds
    result = compile_launches(list(seen.values()), cc=(9, 0))
    assert result["kernels"] + result["cached"] == len(seen)
    assert all(_DONE[key + ((9, 0),)][0] > 0 for key in seen)


_SIM = '''
import json, warnings
import numpy as np, rlx_ref
from rlx_ref.backends.registry import get_backend
warnings.filterwarnings("ignore")
b = get_backend("cuda")
rng = np.random.default_rng(7)
out = {}

def check(name, build, shape=None, **feeds):
    g = rlx_ref.Graph(name)
    g.set_outputs([build(g)])
    got = b.compile(g).run(feeds)[0]
    want = rlx_ref.interpret(g, feeds)[0]
    bits = (got.dtype == want.dtype and got.shape == want.shape
            and np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes())
    scale = max(1.0, float(np.abs(want.astype(np.float64)).max(initial=0)))
    err = float(np.abs(got.astype(np.float64) - want).max(initial=0)) / scale
    out[name] = {"bits": bool(bits), "err": err}

def normal(*dims, dt=np.float32):
    return rng.standard_normal(dims).astype(dt)
'''


def _sim(body: str) -> dict:
    code = textwrap.dedent(_SIM) + textwrap.dedent(body) + "\nprint(json.dumps(out))\n"
    run = subprocess.run([sys.executable, "-c", code], env=SIM_ENV, capture_output=True,
                         text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_exact_kinds_match_the_oracle_bit_for_bit_on_the_simulator():
    out = _sim('''
        F32 = rlx_ref.DType.F32
        check("uniform", lambda g: g.op("RngUniform", [], low=-2.0, high=3.0, key=2**63 + 5,
              shape=rlx_ref.Shape((301,), F32)))
        check("normal", lambda g: g.op("RngNormal", [g.input("t", [3, 67])], mean=0.5,
              scale=3.0, key=11, shape=rlx_ref.Shape((3, 67), F32)), t=normal(3, 67))
        x = np.round(normal(3, 70) * 3).astype(np.float32)      # many ties
        x[0, [3, 9, 40]] = np.nan
        x[1, [0, 5]] = [np.inf, -np.inf]
        x[2, [1, 2]] = [-0.0, 0.0]
        for desc in (False, True):
            for kind in ("Sort", "ArgSort"):
                check(f"{kind}_{desc}", lambda g: g.op(kind, [g.input("x", [3, 70])], axis=1,
                      descending=desc), x=x)
        xi = rng.integers(-5, 5, (4, 33, 2)).astype(np.int64)
        check("argsort_i64_mid", lambda g: g.op("ArgSort", [g.input("x", [4, 33, 2], "i64")],
              axis=1, descending=True), x=xi)
        logits = normal(3, 150) * 2
        check("sample_k_p", lambda g: g.op("Sample", [g.input("x", [3, 150])], top_k=40,
              top_p=0.7, temperature=0.9, seed=77, shape=rlx_ref.Shape((3,), F32)), x=logits)
        check("sample_plain", lambda g: g.op("Sample", [g.input("x", [3, 150])], top_k=0,
              top_p=1.0, temperature=1.3, seed=0, shape=rlx_ref.Shape((3,), F32)), x=logits)
        c16 = normal(2, 9, 3, 5).astype(np.float16)
        r16 = normal(2, 1, 3, 5).astype(np.float16)
        check("kv_f16", lambda g: g.op("KvAppend", [g.input("c", [2, 9, 3, 5], "f16"),
              g.input("r", [2, 1, 3, 5], "f16")], axis=1, pos=6), c=c16, r=r16)
        check("interp_up_down", lambda g: g.op("Interpolate3d", [g.input("x", [2, 3, 5, 4, 7])],
              size=(9, 3, 7)), x=normal(2, 3, 5, 4, 7))
        g = rlx_ref.Graph("nan")
        g.set_outputs([g.op("Sample", [g.input("x", [2, 9])], top_k=3, top_p=1.0,
                            temperature=1.0, seed=1, shape=rlx_ref.Shape((2,), F32))])
        bad = normal(2, 9)
        bad[1, 4] = np.nan
        try:
            b.compile(g).run({"x": bad})
            out["nan_error"] = "no error"
        except Exception as e:
            out["nan_error"] = str(e).splitlines()[0]
    ''')
    nan = out.pop("nan_error")
    assert "NaN" in nan and "%1" in nan, nan
    assert {k: v["bits"] for k, v in out.items()} == {k: True for k in out}, out


def test_summing_kinds_match_the_oracle_on_the_simulator():
    out = _sim('''
        check("conv3d", lambda g: g.op("Conv3d", [g.input("x", [2, 4, 7, 6, 5]),
              g.input("w", [6, 2, 3, 2, 3])], stride=(2, 1, 2), padding=(1, 0, 1),
              dilation=(1, 2, 1), groups=2), x=normal(2, 4, 7, 6, 5), w=normal(6, 2, 3, 2, 3))
        check("s6", lambda g: g.op("SelectiveScan", [g.input("x", [2, 9, 40]),
              g.input("d", [2, 9, 40]), g.input("a", [40, 5]), g.input("b", [2, 9, 5]),
              g.input("c", [2, 9, 5])], state_size=5), x=normal(2, 9, 40),
              d=np.abs(normal(2, 9, 40)) * 0.1, a=-np.abs(normal(40, 5)), b=normal(2, 9, 5),
              c=normal(2, 9, 5))
        check("ssd", lambda g: g.op("Mamba2", [g.input("x", [2, 7, 3, 8]),
              g.input("dt", [2, 7, 3]), g.input("a", [3]), g.input("b", [2, 7, 3, 4]),
              g.input("c", [2, 7, 3, 4])], head_dim=8, state_size=4),
              x=normal(2, 7, 3, 8), dt=np.abs(normal(2, 7, 3)) * 0.1, a=-np.abs(normal(3)),
              b=normal(2, 7, 3, 4), c=normal(2, 7, 3, 4))
        for pc in (False, True):
            gd = [2, 6, 3, 5] if pc else [2, 6, 3]
            check(f"gdn_{pc}", lambda g: g.op("GatedDeltaNet",
                  [g.input(n, [2, 6, 3, 5]) for n in "qkv"] + [g.input("g", gd),
                   g.input("beta", [2, 6, 3]), g.input("s", [2, 3, 5, 5])], state_size=5,
                  carry_state=True, gate_per_channel=pc),
                  q=normal(2, 6, 3, 5), k=normal(2, 6, 3, 5) * 0.4, v=normal(2, 6, 3, 5),
                  g=-np.abs(normal(*gd)) * 0.1, beta=np.abs(normal(2, 6, 3)) * 0.5,
                  s=normal(2, 3, 5, 5))
    ''')
    assert all(v["err"] < 1e-5 for v in out.values()), out


def test_results_do_not_depend_on_the_launch_shape():
    out = _sim('''
        from rlx_ref.backends.numba_cuda import device
        device.SIM_THREADS, device.SIM_MAX_BLOCKS = 5, 3      # odd grids: the strides differ
        F32 = rlx_ref.DType.F32
        check("uniform", lambda g: g.op("RngUniform", [], low=0.0, high=1.0, key=9,
              shape=rlx_ref.Shape((7, 13), F32)))
        check("normal", lambda g: g.op("RngNormal", [], mean=0.0, scale=1.0, key=9,
              shape=rlx_ref.Shape((5, 11), F32)))
        x = np.round(normal(3, 37) * 2).astype(np.float32)
        check("argsort", lambda g: g.op("ArgSort", [g.input("x", [3, 37])], axis=1,
              descending=True), x=x)
        check("sample", lambda g: g.op("Sample", [g.input("x", [3, 37])], top_k=9,
              top_p=0.6, temperature=0.5, seed=5, shape=rlx_ref.Shape((3,), F32)), x=x)
        check("s6", lambda g: g.op("SelectiveScan", [g.input("x", [1, 4, 23]),
              g.input("d", [1, 4, 23]), g.input("a", [23, 3]), g.input("b", [1, 4, 3]),
              g.input("c", [1, 4, 3])], state_size=3), x=normal(1, 4, 23),
              d=np.abs(normal(1, 4, 23)) * 0.1, a=-np.abs(normal(23, 3)), b=normal(1, 4, 3),
              c=normal(1, 4, 3))
    ''')
    err = out.pop("s6")["err"]
    assert err < 1e-5, err
    assert {k: v["bits"] for k, v in out.items()} == {k: True for k in out}, out
