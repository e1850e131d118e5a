"""Crash and hang isolation: the broken-faults backend aborts (SIGABRT) on Tile and hangs on
Expand; the runner, the CLI and the pytest plugin must finish, record crash / timeout with
the signal and a repro, replace the worker, and still pass every other case."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlx_ref.backends.registry import get_backend
from rlx_ref.conformance.cases import build_cases, filter_cases
from rlx_ref.conformance.ledger import Ledger, load_ledger
from rlx_ref.conformance.runner import run_backend
from rlx_ref.conformance.workers import WorkerPool, death_message

ROOT = Path(__file__).resolve().parents[1]
CASES = filter_cases(build_cases(), "Tile,Expand,Transpose", ["f32"], None)
N_TILE = sum(c.op == "Tile" for c in CASES)          # broken-faults aborts on each
N_EXPAND = sum(c.op == "Expand" for c in CASES)      # ... and hangs on each
FAULTY = get_backend("broken-faults")


def _mixed():
    """Passing cases around one abort and one hang, so each fault hits a used worker."""
    by = {op: [c for c in CASES if c.op == op] for op in ("Tile", "Expand", "Transpose")}
    t = by["Transpose"]
    return [t[0], by["Tile"][0], t[1], by["Expand"][0], t[2], by["Tile"][1], t[3]]


def _check_lost(res, case, status, repro_root):
    assert res["status"] == status, res
    if status == "crash":
        assert "killed by SIGABRT" in res["message"]
    else:
        assert "no result within" in res["message"] and "worker was killed" in res["message"]
    folder = Path(res["repro"])
    assert folder.parent.parent == Path(repro_root)
    assert {p.name for p in folder.iterdir()} >= {"graph.rlx", "inputs.npz", "meta.json",
                                                  "repro.py"}
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["case_id"] == case.id and meta["seen"]["status"] == status


@pytest.mark.parametrize("jobs", [1, 2])
def test_pool_records_crash_and_timeout_and_replaces_the_worker(tmp_path, jobs):
    cases = _mixed()
    with WorkerPool(FAULTY, "broken-faults", Ledger([]), jobs=jobs, repro_dir=tmp_path,
                    case_timeout=1.5) as pool:
        got = dict(pool.run(cases))
        assert pool.replaced == 3             # two aborts and one hang
        assert len(pool.workers) <= jobs and all(w.proc.is_alive() for w in pool.workers)
    assert sorted(got) == list(range(len(cases)))
    for i, case in enumerate(cases):
        want = {"Tile": "crash", "Expand": "timeout", "Transpose": "ok"}[case.op]
        if want == "ok":
            assert got[i]["status"] == "ok" and got[i]["repro"] is None, got[i]
        else:
            _check_lost(got[i], case, want, tmp_path)


def test_run_backend_keeps_case_order_and_in_process_still_works(tmp_path):
    cases = _mixed()
    out = run_backend(FAULTY, cases, Ledger([]), jobs=2, repro_dir=tmp_path,
                      progress=False, case_timeout=1.5)
    assert [r["case_id"] for r in out] == [c.id for c in cases]
    ok = [c for c in cases if c.op == "Transpose"]
    here = run_backend(FAULTY, ok, Ledger([]), in_process=True, progress=False)
    assert {r["status"] for r in here} == {"ok"}


def test_ledger_can_expect_a_crash(tmp_path):
    p = tmp_path / "expectations.toml"
    p.write_text('[[xfail]]\nbackend = "broken-faults"\nop = "Tile"\nstatus = "crash"\n'
                 'error = "SIGABRT"\nreason = "planted abort"\n')
    tile = [c for c in CASES if c.op == "Tile"][:1]
    (r,) = run_backend(FAULTY, tile, load_ledger(p), progress=False)
    assert r["status"] == "xfail" and "planted abort" in r["message"]


def test_death_messages():
    assert death_message(-6) == "killed by SIGABRT"
    assert death_message(-9) == "killed by SIGKILL"
    assert death_message(3) == "exited with status 3"


def test_bad_case_timeout_is_refused():
    with pytest.raises(ValueError, match="--case-timeout must be a positive number"):
        WorkerPool(FAULTY, "broken-faults", Ledger([]), case_timeout=0)


def _run(args, timeout=240):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout, env=env)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_cli_finishes_and_reports_crash_and_timeout(tmp_path, jobs):
    out = tmp_path / "r.json"
    run = _run(["-m", "rlx_ref.cli", "conformance", "--backend", "broken-faults",
                "--op", "Tile,Expand,Transpose", "--dtype", "f32", "--jobs", jobs, "--quiet",
                "--case-timeout", "1.5", "--out", str(out), "--repro-dir", str(tmp_path)])
    assert run.returncode == 1, run.stdout + run.stderr
    doc = json.loads(out.read_text())
    st = {}
    for r in doc["results"]:
        st.setdefault(r["op"], set()).add(r["status"])
    assert st == {"Tile": {"crash"}, "Expand": {"timeout"}, "Transpose": {"ok"}}
    assert f"crash {N_TILE}" in run.stdout and f"timeout {N_EXPAND}" in run.stdout
    assert "killed by SIGABRT" in run.stdout and "repro:" in run.stdout
    from rlx_ref.conformance import report

    rep = report.render_json(report.load_results([out]))
    ops = {op["kind"]: op["cells"]["broken-faults"]["text"]
           for cat in rep["categories"] for op in cat["ops"]}
    assert ops["Tile"] == f"❌ 0/{N_TILE} ({N_TILE} crash)"
    assert ops["Expand"] == f"❌ 0/{N_EXPAND} ({N_EXPAND} timeout)"
    assert {f["status"] for f in rep["failures"]} == {"crash", "timeout"}
    assert rep["glance"][0]["failing"] == N_TILE + N_EXPAND


def test_cli_refuses_a_bad_case_timeout():
    run = _run(["-m", "rlx_ref.cli", "conformance", "--op", "Tile", "--case-timeout", "-1"])
    assert run.returncode == 2 and "--case-timeout must be a positive" in run.stderr


def test_pytest_plugin_turns_crash_and_timeout_into_failures(tmp_path):
    run = _run(["-m", "pytest", "-p", "no:cacheprovider", "conformance",
                "--backend", "broken-faults", "--conformance-op", "Tile,Expand,Transpose",
                "--conformance-dtype", "f32", "--case-timeout", "1.5",
                "--repro-dir", str(tmp_path)])
    assert run.returncode == 1, run.stdout[-3000:]
    passing = len(build_cases(["Transpose"], dtypes="f32"))   # its Transpose is correct
    assert f"{N_TILE + N_EXPAND} failed, {passing} passed" in run.stdout, run.stdout[-3000:]
    # each failure's message shows in its report and, width permitting, in the summary
    assert run.stdout.count("crash: worker process killed by SIGABRT") in (N_TILE, 2 * N_TILE)
    assert run.stdout.count(": timeout: no result within") in (N_EXPAND, 2 * N_EXPAND)
    assert f"repro: python {tmp_path}/broken-faults/" in run.stdout


def test_run_one_serves_threads_in_turn_and_survives_a_crash(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    cases = _mixed()
    with WorkerPool(FAULTY, "broken-faults", Ledger([]), repro_dir=tmp_path,
                    case_timeout=1.5) as pool:
        with ThreadPoolExecutor(3) as ex:
            got = list(ex.map(pool.run_one, cases))
    assert [r.case_id for r in got] == [c.id for c in cases]
    assert [r.status for r in got] == ["ok", "crash", "ok", "timeout", "ok", "crash", "ok"]


class Unnamed(type(FAULTY)):
    """A backend no name rebuilds: workers get the pickled object."""

    name = "unnamed-faults"


def test_a_backend_without_a_name_is_sent_pickled(tmp_path):
    cases = [c for c in CASES if c.op in ("Tile", "Transpose")][:6]
    out = run_backend(Unnamed(), cases, Ledger([]), spec="unnamed-faults", progress=False,
                      repro_dir=tmp_path)
    assert {r["backend"] for r in out} == {"unnamed-faults"}
    assert [r["status"] for r in out] == ["crash" if c.op == "Tile" else "ok" for c in cases]
