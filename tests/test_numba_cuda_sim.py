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
SHARD = "3/14"          # ~620 cases: the simulator runs each thread step in Python


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


_CHECK = '''
    import json, warnings
    import numpy as np, rlx_ref
    from rlx_ref.backends.registry import get_backend
    warnings.filterwarnings("ignore")
    b = get_backend("cuda")
    rng = np.random.default_rng(1)
    out = {}

    def check(name, build, **feeds):
        g = rlx_ref.Graph(name)
        g.set_outputs([build(g)])
        got = b.compile(g).run(feeds)[0].astype(np.float64)
        want = rlx_ref.interpret(g, feeds)[0].astype(np.float64)
        finite = np.isfinite(want)
        same = bool(((got == want) | (np.isnan(got) & np.isnan(want)))[~finite].all()
                    and np.isfinite(got[finite]).all())
        scale = max(1.0, np.abs(want[finite]).max(initial=0))
        err = np.abs(np.where(finite, got - want, 0)).max(initial=0) / scale
        out[name] = float(err) if same else "NaN/inf positions differ"

    def normal(*dims):
        return rng.standard_normal(dims).astype(np.float32)
'''


def _checks(body: str, timeout: int = 300) -> dict:
    run = _sim(textwrap.dedent(_CHECK) + textwrap.dedent(body) + "\nprint(json.dumps(out))\n",
               timeout)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def _attention(g, mask_kind, dims=(1, 2, 12, 4), **attrs):
    ins = [g.input(n, list(dims)) for n in "qkv"]
    return g.op("Attention", ins, num_heads=dims[1], head_dim=dims[3], mask_kind=mask_kind,
                **attrs)


def test_gemm_and_attention_at_hardware_tiles():
    """The simulator normally runs small tiles (a Python thread per CUDA thread); these
    cases run the tilings a GPU gets: 128×128 GEMM tiles of 256 threads with 8×8 outputs
    each, and 32-query attention tiles."""
    out = _checks('''
        from rlx_ref.backends.numba_cuda import _gemm, device, lower_attention
        _gemm.SIM = _gemm.BIG
        lower_attention.simulator_active = lambda: False
        device.SIM_THREADS = 256
        check("matmul_broadcast", lambda g: g.matmul(g.input("a", [2, 1, 100, 9]),
                                                     g.input("b", [3, 9, 70])),
              a=normal(2, 1, 100, 9), b=normal(3, 9, 70))
        check("conv_groups_stride", lambda g: g.op(
            "Conv", [g.input("x", [2, 4, 9, 9]), g.input("w", [100, 2, 3, 3])],
            kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), dilation=(1, 2), groups=2),
            x=normal(2, 4, 9, 9), w=normal(100, 2, 3, 3))
        check("conv_transpose", lambda g: g.op(
            "ConvTranspose2d", [g.input("x", [1, 4, 5, 5]), g.input("w", [4, 50, 3, 3])],
            kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), output_padding=(1, 1),
            groups=2), x=normal(1, 4, 5, 5), w=normal(4, 50, 3, 3))
        v = normal(1, 2, 40, 8)
        v[0, 1, 39, 2] = np.inf
        check("attention_causal_inf_v", lambda g: g.op(
            "Attention", [g.input(n, [1, 2, 40, 8]) for n in "qkv"], num_heads=2, head_dim=8,
            mask_kind="Causal"), q=normal(1, 2, 40, 8), k=normal(1, 2, 40, 8), v=v)
        keep = (rng.random((1, 64)) > 0.3).astype(np.float32)
        check("attention_f32_products_f16", lambda g: g.op(          # S_k·D = 4096: f32
            "Attention", [g.input(n, [1, 64, 64], "f16") for n in "qkv"]
            + [g.input("m", [1, 64])], num_heads=1, head_dim=64, mask_kind="Custom",
            attn_logit_softcap=5.0), m=keep, **{n: normal(1, 64, 64).astype(np.float16)
                                               for n in "qkv"})
    ''', timeout=600)
    assert set(out) == {"matmul_broadcast", "conv_groups_stride", "conv_transpose",
                        "attention_causal_inf_v", "attention_f32_products_f16"}
    f16 = out.pop("attention_f32_products_f16")
    assert f16 == pytest.approx(0, abs=2e-3), f16          # f16 outputs: half an ulp
    assert all(v == pytest.approx(0, abs=1e-5) for v in out.values()), out


def test_attention_skips_hidden_key_tiles_only_when_exact():
    """Causal and sliding-window blocks skip key tiles no row sees, except where a hidden
    key still counts: V holding inf (0·inf is NaN), rows that see no key (uniform weights
    over all keys) and rows whose best score is near the -1e9 fill."""
    out = _checks('''
        dims = (1, 2, 12, 4)
        q, k, v = normal(*dims), normal(*dims), normal(*dims)
        vinf = v.copy()
        vinf[0, 0, 11, 1] = np.inf
        low = np.zeros(dims, np.float32)        # every score exactly the -1e9 fill
        low[..., 0] = -2.5e8
        for name, mk, vv, qq, kk in [
                ("causal", "Causal", v, q, k), ("window", ("SlidingWindow", 2), v, q, k),
                ("causal_inf_v", "Causal", vinf, q, k),
                ("window_inf_v", ("SlidingWindow", 1), vinf, q, k),
                ("at_fill", "Causal", v, low, np.full(dims, 4, np.float32))]:
            check(name, lambda g, mk=mk: _attention(g, mk, score_scale=1.0), q=qq, k=kk,
                  v=vv)
        check("rows_see_no_key", lambda g: g.op(
            "Attention", [g.input("q", [1, 1, 12, 4]), g.input("k", [1, 1, 5, 4]),
                          g.input("v", [1, 1, 5, 4])], num_heads=1, head_dim=4,
            mask_kind=("SlidingWindow", 1)), q=normal(1, 1, 12, 4), k=normal(1, 1, 5, 4),
            v=normal(1, 1, 5, 4))
    '''.replace("_attention(", "attention(")
        .replace("        dims = (1, 2, 12, 4)", '''        def attention(g, mk, **attrs):
            ins = [g.input(n, list(dims)) for n in "qkv"]
            return g.op("Attention", ins, num_heads=2, head_dim=4, mask_kind=mk, **attrs)

        dims = (1, 2, 12, 4)'''))
    assert set(out) == {"causal", "window", "causal_inf_v", "window_inf_v", "at_fill",
                        "rows_see_no_key"}
    assert all(v == pytest.approx(0, abs=1e-5) for v in out.values()), out


def test_index_kernels_report_bad_indices_naming_the_node():
    run = _sim('''
        import numpy as np, rlx_ref
        from rlx_ref.backends.registry import get_backend
        b = get_backend("cuda")

        def err(g, feeds):
            try:
                b.compile(g).run(feeds)
            except Exception as e:
                return str(e).splitlines()[0]
            return "no error"
        g = rlx_ref.Graph("nd")
        d = g.input("d", [3, 4]); i = g.input("i", [2, 1]); u = g.input("u", [2, 4])
        g.set_outputs([g.op("ScatterNd", [d, i, u], reduction="Add")])
        f = {"d": np.zeros((3, 4), np.float32), "u": np.ones((2, 4), np.float32)}
        print(err(g, {**f, "i": np.array([[1], [3]], np.float32)}))
        print(err(g, {**f, "i": np.array([[1], [0.5]], np.float32)}))
        print(b.compile(g).run({**f, "i": np.array([[-1], [-1]], np.float32)})[0].tolist())
        g = rlx_ref.Graph("ge")
        d = g.input("d", [2, 3]); i = g.input("i", [2, 1], "i32")
        g.set_outputs([g.op("GatherElements", [d, i], axis=1)])
        print(err(g, {"d": np.ones((2, 3), np.float32), "i": np.array([[0], [-4]], np.int32)}))
    ''')
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()[-4:]
    assert lines[0] == "at %3 in @nd: index out of range"
    assert lines[1] == "at %3 in @nd: index is not an integer"
    assert lines[2] == [[0.0] * 4, [0.0] * 4, [2.0] * 4].__repr__().replace("'", "")
    assert lines[3] == "at %2 in @ge: index out of range"


def test_float_scatter_add_and_mul_fold_duplicates_in_update_order():
    """Atomics would add duplicates in arrival order; the fold repeats the oracle's sums."""
    run = _sim('''
        import numpy as np, rlx_ref
        from rlx_ref.backends.registry import get_backend
        b = get_backend("cuda")
        rng = np.random.default_rng(5)
        out = []
        for red in ("Add", "Mul"):
            g = rlx_ref.Graph("nd")
            d = g.input("d", [3, 2]); i = g.input("i", [40, 1], "i32")
            u = g.input("u", [40, 2])
            g.set_outputs([g.op("ScatterNd", [d, i, u], reduction=red)])
            f = {"d": np.ones((3, 2), np.float32),
                 "i": rng.integers(-3, 3, (40, 1)).astype(np.int32),
                 "u": (rng.standard_normal((40, 2)) * 10.0 ** rng.integers(-3, 4, (40, 2))
                       if red == "Add" else 1 + rng.standard_normal((40, 2)) / 8
                       ).astype(np.float32)}
            exe = b.compile(g)
            runs = [exe.run(f)[0] for _ in range(3)]
            want = rlx_ref.interpret(g, f)[0]
            out.append(all(r.tobytes() == want.tobytes() for r in runs))
        print(out)
    ''')
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().splitlines()[-1] == "[True, True]"
