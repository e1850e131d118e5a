"""Runner, ledger, repros, CLI and pytest plugin, driven by the reference backend and the
deliberately broken test backend (each planted defect must surface under its status)."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rlx_ref.backends.registry import BackendUnavailable, get_backend
from rlx_ref.conformance.cases import build_cases, filter_cases
from rlx_ref.conformance.ledger import Ledger, LedgerError, load_ledger
from rlx_ref.conformance.runner import run_backend, run_case, shard_cases

ROOT = Path(__file__).resolve().parents[1]
CASES = build_cases()


def pick(op, dtype="f32", pred=lambda c: True):
    return [c for c in filter_cases(CASES, op, [dtype], None) if pred(c)]


def statuses(backend, cases, ledger=Ledger([]), **kw):
    return [run_case(get_backend(backend), c, ledger, **kw) for c in cases]


def test_reference_backend_passes_a_cross_section():
    for op in ("Binary", "Reduce", "Conv", "Attention", "Scan", "multi:*"):
        res = statuses("reference", pick(op)[:6])
        assert res and all(r.status == "ok" for r in res), [(r.case_id, r.message) for r in res]


def test_wrong_reduction_is_a_mismatch_with_a_working_repro(tmp_path):
    cases = pick("Reduce", pred=lambda c: c.graph.nodes[-1].attrs.op == "Sum"
                 and c.inputs["x0"].size > 4)
    res = statuses("broken", cases[:3], repro_dir=tmp_path)
    assert {r.status for r in res} == {"MISMATCH"}
    r = res[0]
    assert "worst" in r.message.lower() or "abs" in r.message.lower()
    assert r.max_abs > 0 and r.repro is not None
    folder = Path(r.repro)
    assert {p.name for p in folder.iterdir()} >= {"graph.rlx", "inputs.npz", "meta.json",
                                                  "repro.py"}
    run = subprocess.run([sys.executable, str(folder / "repro.py")], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 1 and "MISMATCH" in run.stdout


def test_missing_tail_is_reported_as_missing_or_mismatch():
    tiny = pick("Activation", pred=lambda c: 0 < c.inputs["x0"].size < 8
                and c.graph.nodes[-1].attrs.op == "Exp")
    assert tiny and all(r.status == "MISSING" for r in statuses("broken", tiny[:3]))
    tail = pick("Activation", pred=lambda c: c.inputs["x0"].size % 8 != 0
                and c.inputs["x0"].size > 8 and c.graph.nodes[-1].attrs.op == "Exp")
    assert tail and all(r.status == "MISMATCH" for r in statuses("broken", tail[:3]))


def _left_right_differ(c):
    a, b = c.inputs["x0"], c.inputs["x1"]
    return a.ndim != b.ndim and min(a.size, b.size) > 1


def test_swapped_broadcast_is_caught():
    cases = pick("Binary", pred=_left_right_differ)
    res = statuses("broken", cases[:8])
    assert res and all(r.status in ("MISMATCH", "error") for r in res), \
        [(r.case_id, r.status) for r in res]


def test_crash_and_undeclared_ops():
    assert {r.status for r in statuses("broken", pick("Cumsum")[:3])} == {"error"}
    res = statuses("broken", pick("Attention")[:2])
    assert {r.status for r in res} == {"unsupported"}
    assert "not in broken's declared op table" in res[0].message
    f16 = statuses("broken", pick("Softmax", "f16")[:2])
    assert f16 and {r.status for r in f16} == {"unsupported"}


def _ledger(tmp_path, text):
    p = tmp_path / "expectations.toml"
    p.write_text(textwrap.dedent(text))
    return load_ledger(p)


def test_ledger_xfail_and_unexpected_pass(tmp_path):
    led = _ledger(tmp_path, """
        # comment
        [[xfail]]
        backend = "broken"
        op = "Cumsum"
        status = "error"
        error = "kernel launch failed"
        reason = "planted crash"

        [[xfail]]
        backend = "reference"
        op = "Transpose"
        status = "MISMATCH"
        reason = "stale entry"
        """)
    (r,) = statuses("broken", pick("Cumsum")[:1], led)
    assert r.status == "xfail" and "planted crash" in r.message
    (r,) = statuses("reference", pick("Transpose")[:1], led)
    assert r.status == "xpass"
    assert "delete expectations.toml lines 10-14" in r.message


def test_ledger_unsupported_entry_is_checked_too(tmp_path):
    led = _ledger(tmp_path, """
        [[unsupported]]
        backend = "broken"
        op = "Cumsum"
        reason = "no scan kernels yet"

        [[unsupported]]
        backend = "reference"
        op = "Reverse"
        reason = "claimed unsupported but it works"
        """)
    (r,) = statuses("broken", pick("Cumsum")[:1], led)
    assert r.status == "unsupported" and "no scan kernels yet" in r.message
    (r,) = statuses("reference", pick("Reverse")[:1], led)
    assert r.status == "xpass" and "delete expectations.toml line" in r.message


def test_ledger_wrong_expectation_keeps_the_failure(tmp_path):
    led = _ledger(tmp_path, """
        [[xfail]]
        backend = "broken"
        op = "Cumsum"
        status = "MISMATCH"
        reason = "wrong guess"
        """)
    (r,) = statuses("broken", pick("Cumsum")[:1], led)
    assert r.status == "error" and "the ledger expects MISMATCH" in r.message


@pytest.mark.parametrize("text,match", [
    ('[[xfail]]\nbackend="b"\nop="X"\nstatus="MISMATCH"\n', "'reason' is required"),
    ('[[xfail]]\nbackend="b"\nop="X"\nreason="r"\nstatus="bad"\n', "status must be one of"),
    ('[[unsupported]]\nbackend="b"\nop="X"\nreason="r"\nwhy="?"\n', "unknown key 'why'"),
    ('[[maybe]]\nbackend="b"\n', "unknown section 'maybe'"),
    ('[[tolerance]]\nbackend="b"\nop="X"\nreason="r"\n', "needs `ulps` or `c`"),
    ("[[xfail]\n", "expectations.toml"),
])
def test_ledger_errors_are_clear(tmp_path, text, match):
    p = tmp_path / "expectations.toml"
    p.write_text(text)
    with pytest.raises(LedgerError, match=match):
        load_ledger(p)


def test_packaged_ledger_loads_and_tolerance_overrides(tmp_path):
    load_ledger()
    led = _ledger(tmp_path, """
        [[tolerance]]
        backend = "*"
        op = "Softmax"
        dtype = "f16"
        ulps = 8
        reason = "exp approximation"
        """)
    case = pick("Softmax", "f16")[0]
    assert led.overrides("anything", case) == {"ulps": 8}
    assert led.overrides("anything", pick("Softmax")[0]) == {}


def test_shards_partition_the_cases():
    sub = CASES[:50]
    parts = [shard_cases(sub, f"{i}/3") for i in (1, 2, 3)]
    assert sorted(c.id for p in parts for c in p) == sorted(c.id for c in sub)
    with pytest.raises(ValueError, match="i/n"):
        shard_cases(sub, "x")


def test_parallel_run_equals_serial():
    cases = pick("Binary")[:40]
    b = get_backend("reference")
    one = run_backend(b, cases, Ledger([]), jobs=1, progress=False)
    two = run_backend(b, cases, Ledger([]), jobs=2, progress=False)
    strip = lambda rs: [(r["case_id"], r["status"]) for r in rs]  # noqa: E731
    assert strip(one) == strip(two)


def test_backend_lookup_errors():
    with pytest.raises(BackendUnavailable, match="unknown backend 'nope'"):
        get_backend("nope")
    with pytest.raises(BackendUnavailable, match="cannot import backend module"):
        get_backend("no_such_module_xyz:Backend")


def _cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "rlx_ref.cli", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


def test_cli_runs_third_party_backend_and_writes_results(tmp_path):
    mod = tmp_path / "my_backend.py"
    mod.write_text(textwrap.dedent("""
        from rlx_ref.backends.reference import ReferenceBackend

        class MyBackend(ReferenceBackend):
            name = "mine"
            def supported_ops(self):
                return {k: v for k, v in super().supported_ops().items() if k != "Cumsum"}
        """))
    out, junit = tmp_path / "r.json", tmp_path / "j.xml"
    env_path = f"{tmp_path}"
    run = subprocess.run(
        [sys.executable, "-m", "rlx_ref.cli", "conformance", "--backend", "my_backend:MyBackend",
         "--op", "Cum*", "--dtype", "f32", "--out", str(out), "--junit", str(junit), "--quiet",
         "--repro-dir", str(tmp_path / "repros")],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
        env={**__import__("os").environ, "PYTHONPATH": env_path})
    assert run.returncode == 0, run.stdout + run.stderr
    doc = json.loads(out.read_text())
    assert doc["format"] == "rlx-ref-conformance/1" and "mine" in doc["backends"]
    st = {r["op"]: set() for r in doc["results"]}
    for r in doc["results"]:
        st[r["op"]].add(r["status"])
    assert st["Cumsum"] == {"unsupported"} and st["CumProd"] == {"ok"}
    assert "<testsuite" in junit.read_text()


def test_cli_exit_status_and_listing(tmp_path):
    run = _cli("conformance", "--backend", "broken", "--op", "Cumsum", "--dtype", "f32",
               "--quiet", "--repro-dir", str(tmp_path))
    assert run.returncode == 1 and "FAIL broken" in run.stdout and "repro:" in run.stdout
    run = _cli("conformance", "--op", "Transpose", "--list")
    assert run.returncode == 0 and "Transpose" in run.stdout
    run = _cli("conformance", "--op", "NoSuchOp")
    assert run.returncode == 2 and "no cases match" in run.stderr


def test_pytest_plugin_reports_failures_per_case(tmp_path):
    base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "conformance",
            "--conformance-op", "Cumsum", "--conformance-dtype", "f32",
            "--repro-dir", str(tmp_path)]
    good = subprocess.run(base, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert good.returncode == 0, good.stdout[-2000:]
    bad = subprocess.run(base + ["--backend", "broken"], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    assert bad.returncode == 1 and "kernel launch failed" in bad.stdout
