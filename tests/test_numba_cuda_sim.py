"""The CUDA backend on numba's CUDA simulator: its contract and a conformance sample.

The simulator is picked when numba.cuda is first imported, so each check runs in a
child process with NUMBA_ENABLE_CUDASIM=1. The CLI runs every case on the simulator
(``NUMBA_ENABLE_CUDASIM=1 rlx-ref conformance --backend cuda``); here one deterministic
shard of the cases keeps the test short.
"""
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
SHARD = "3/10"


def _sim(code: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=SIM_ENV,
                          check=False, capture_output=True, text=True, timeout=timeout)


def test_contract_on_the_simulator():
    run = _sim('''
        import json
        import numpy as np, rlx_ref
        from rlx_ref.backends.registry import get_backend
        from rlx_ref.runtime.options import CompileOptions, FusionOptions
        b = get_backend("cuda")
        out = {"available": b.availability(), "emulated": b.emulated, "device": b.device}

        g = rlx_ref.Graph("chain")
        x = g.input("x", [64])
        y = x
        for _ in range(6):
            y = g.exp(g.neg(y))
        g.set_outputs([y, x])
        exe = b.compile(g, CompileOptions(fusion_opts=FusionOptions(enable=False)))
        xv = np.linspace(0, 1, 64, dtype=np.float32)
        got = exe.run({"x": xv})
        want = rlx_ref.interpret(g, {"x": xv})
        out["close"] = bool(np.allclose(got[0], want[0], rtol=1e-6))
        out["input_out_copied"] = got[1] is not xv and bool((got[1] == xv).all())
        plan = exe._plans[()]
        plan_buffers = plan._assign_buffers()
        out["buffers"] = [len(plan_buffers), len({id(v) for v in plan_buffers.values()})]
        out["sources"] = sorted(exe.kernel_sources())[:1]
        out["caps"] = exe.capabilities()["typed_io"]

        def err(g, feeds):
            try:
                b.compile(g).run(feeds)
            except Exception as e:
                return str(e).splitlines()[0]
            return "no error"
        g = rlx_ref.Graph("div")
        a = g.input("a", [3], "i32"); c = g.input("c", [3], "i32")
        g.set_outputs([g.div(a, c)])
        out["div0"] = err(g, {"a": np.ones(3, np.int32), "c": np.array([1, 0, 2], np.int32)})
        g = rlx_ref.Graph("emb")
        t = g.input("t", [4, 3]); i = g.input("i", [2], "i32")
        g.set_outputs([g.op("Gather", [t, i], axis=0)])
        out["oob"] = err(g, {"t": np.ones((4, 3), np.float32), "i": np.array([1, 9], np.int32)})
        out["ok_after_error"] = b.compile(g).run(
            {"t": np.arange(12, dtype=np.float32).reshape(4, 3),
             "i": np.array([3, 0], np.int32)})[0].tolist()
        print(json.dumps(out))
    ''')
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["available"] == [True, ""] and out["emulated"]
    assert out["device"] == "numba CUDA simulator"
    assert out["close"] and out["input_out_copied"] and out["caps"]
    assert out["buffers"][0] == 12 and out["buffers"][1] <= 3   # 12 values, reused by liveness
    assert out["sources"] and out["sources"][0].startswith("ew_")
    assert out["div0"] == "at %2 in @div: integer division by zero"
    assert out["oob"] == "at %2 in @emb: index out of range"
    assert out["ok_after_error"] == [[9.0, 10.0, 11.0], [0.0, 1.0, 2.0]]


def test_conformance_shard_on_the_simulator(tmp_path):
    out = tmp_path / "results.json"
    run = subprocess.run(
        [sys.executable, "-m", "rlx_ref.cli", "conformance", "--backend", "cuda",
         "--shard", SHARD, "--quiet", "--out", str(out), "--repro-dir",
         str(tmp_path / "repros")], env=SIM_ENV, capture_output=True, text=True,
        timeout=600, check=False)
    summary = [ln for ln in run.stdout.splitlines() if ln.startswith(("cuda:", "FAIL"))]
    assert run.returncode == 0, "\n".join(summary) + run.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["backends"]["cuda"]["emulated"] is True
    statuses = {r["status"] for r in doc["results"]}
    assert statuses <= {"ok", "unsupported", "xfail"}, statuses
    assert len(doc["results"]) > 400


def test_gpu_check_dry_run_writes_its_reports(tmp_path):
    script = os.path.join(os.path.dirname(__file__), "..", "bench", "gpu_check.py")
    run = subprocess.run([sys.executable, script, "--dry-run", "--skip-conformance", "--only",
                          "gelu_chain_16M,sum_64M,embedding_gather", "--out", str(tmp_path)],
                         env=SIM_ENV, capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    doc = json.loads((tmp_path / "gpu-dry-run.json").read_text())
    assert [r["name"] for r in doc["benchmarks"]] == ["gelu_chain_16M", "sum_64M",
                                                       "embedding_gather"]
    assert all(r["cuda_device"] > 0 and "error" not in r for r in doc["benchmarks"])
    assert "| sum_64M |" in (tmp_path / "gpu-dry-run.md").read_text()
