"""The weight-only prefix (split_param_invariant) in the CUDA executable, on numba's CUDA
simulator: prepared once per set of params as device arrays bound like params, prepared
again after a set_param it reads, results equal with the option off."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("numba")
try:
    import numba_cuda  # noqa: F401  (the package; numba.cuda itself is imported by children)
except ImportError:
    pytest.skip("numba-cuda is not installed (pip install 'numba-cuda[cu13]')",
                allow_module_level=True)

SIM_ENV = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "PYTHONWARNINGS": "ignore"}

_CHILD = '''
import json
import numpy as np, rlx_ref
from rlx_ref.backends.registry import get_backend
from rlx_ref.runtime.options import CompileOptions
b = get_backend("cuda")
F = np.float32
rng = np.random.default_rng(3)
out = {}

def attention():
    """One attention head with scaled, transposed weights (the weight-only part)."""
    g = rlx_ref.Graph("attn")
    x = g.input("x", [4, 8])
    wq, wk, wv = (g.param(n, [8, 8]) for n in ("wq", "wk", "wv"))
    h = g.mul(x, g.activation("Exp", g.param("gain", [8])))
    q, k, v = (g.matmul(h, g.transpose(w, (1, 0))) for w in (wq, wk, wv))
    att = g.softmax(g.matmul(q, g.transpose(k, (1, 0))), -1)
    g.set_outputs([g.add(g.matmul(att, v), x), g.transpose(wv, (1, 0))])
    return g

params = {n: (rng.standard_normal((8, 8)) * 0.3).astype(F) for n in ("wq", "wk", "wv")}
params["gain"] = (rng.standard_normal(8) * 0.1).astype(F)
g = attention()
on = b.compile(g)
off = b.compile(g, CompileOptions().with_hoist_param_invariant(False))
for exe in (on, off):
    for k, v in params.items():
        exe.set_param(k, v)

def same(x):
    a, c = on.run({"x": x}), off.run({"x": x})
    ref = rlx_ref.interpret(g, {"x": x}, params)
    return (all(np.array_equal(p, q) for p, q in zip(a, c))
            and all(np.allclose(p, r, rtol=1e-4, atol=1e-5) for p, r in zip(a, ref)))

out["hoisted"] = on.hoisted is not None and off.hoisted is None
out["prepare_params"] = sorted(on.hoisted.split.prepare_params)
out["equal"] = [same(rng.standard_normal((4, 8)).astype(F)) for _ in range(3)]
out["runs_before"] = on.hoisted.runs
out["on_device"] = all(hasattr(v, "copy_to_host") for v in on.hoisted._cache[1].values())
params["gain"] = params["gain"] * F(2)       # read per run (fused into x's kernel)
for exe in (on, off):
    exe.set_param("gain", params["gain"])
out["equal_gain"] = same(rng.standard_normal((4, 8)).astype(F))
out["runs_gain"] = on.hoisted.runs
params["wq"] = params["wq"] * F(0.5)          # read by the prefix: prepared again
for exe in (on, off):
    exe.set_param("wq", params["wq"])
out["equal_after"] = same(rng.standard_normal((4, 8)).astype(F))
same(rng.standard_normal((4, 8)).astype(F))
out["runs_after"] = on.hoisted.runs
out["plans"] = [len(on.memory_plans()), len(off.memory_plans())]
print(json.dumps(out))
'''


def test_prefix_once_per_params_on_the_simulator():
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(_CHILD)], env=SIM_ENV,
                         capture_output=True, text=True, timeout=900, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["hoisted"] and out["prepare_params"] == ["wk", "wq", "wv"]
    assert out["equal"] == [True] * 3 and out["equal_gain"] and out["equal_after"]
    assert out["runs_before"] == 1 and out["runs_gain"] == 1 and out["runs_after"] == 2
    assert out["on_device"]
    assert out["plans"] == [2, 1]          # the prefix's own plan has an arena too
