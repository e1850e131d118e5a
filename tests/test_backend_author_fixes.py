"""The backend author's path: ledger payload filters and names, repro folders, the dispatch
report's last line, and the pytest plugin collecting its own test."""
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import rlx_ref
from rlx_ref.conformance.ledger import (LedgerError, LedgerWarning, load_ledger,
                                        name_mismatch, warn_name_mismatch)
from rlx_ref.conformance.model import Case
from rlx_ref.conformance.repro import write_repro

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "docs/tutorials/example_backend"


def _binary_case(fn: str) -> Case:
    g = rlx_ref.Graph("binary")
    a, b = g.input("x0", [3]), g.input("x1", [3])
    g.set_outputs([g.binary(fn, a, b)])
    x = np.ones(3, np.float32)
    return Case(f"Binary.f32.{fn.lower()}", "Binary", "f32", ("samples",), g,
                {"x0": x, "x1": x})


def _ledger(tmp_path, body: str):
    p = tmp_path / "ledger.toml"
    p.write_text(body)
    return load_ledger(p)


def test_ledger_payload_targets_one_binary_function(tmp_path):
    led = _ledger(tmp_path, '[[xfail]]\nbackend = "b"\nop = "Binary"\npayload = { op = "Mod" }\n'
                  'status = "MISMATCH"\nreason = "r"\n')
    assert led.find("xfail", "b", _binary_case("Mod")) is not None
    assert led.find("xfail", "b", _binary_case("Add")) is None


def test_ledger_payload_list_is_any_of(tmp_path):
    led = _ledger(tmp_path, '[[unsupported]]\nbackend = "b"\nop = "Binary"\n'
                  'payload = { op = ["Mod", "Pow"] }\nreason = "r"\n')
    assert led.find("unsupported", "b", _binary_case("Pow")) is not None
    assert led.find("unsupported", "b", _binary_case("Sub")) is None


def test_ledger_payload_field_must_exist(tmp_path):
    with pytest.raises(LedgerError, match=r"Binary has no payload field 'fn'; fields: op"):
        _ledger(tmp_path, '[[unsupported]]\nbackend = "b"\nop = "Binary"\n'
                'payload = { fn = "Mod" }\nreason = "r"\n')


def test_entries_under_the_selection_name_warn(tmp_path):
    led = _ledger(tmp_path, '[[unsupported]]\nbackend = "tiny-ep"\nop = "Softmax"\n'
                  'reason = "r"\n')
    msg = name_mismatch(led, "tiny-ep", "tiny")
    assert "selected as 'tiny-ep' reports as 'tiny'" in msg and "backend = 'tiny'" in msg
    assert name_mismatch(led, "tiny", "tiny") is None
    with pytest.warns(LedgerWarning, match="never apply"):
        warn_name_mismatch(led, "tiny-ep", "tiny")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_name_mismatch(load_ledger(), "reference", "reference")


def test_entry_point_backend_reports_its_class_name(tmp_path, monkeypatch):
    dist = tmp_path / "rlx_tiny-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: rlx-tiny\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text("[rlx_ref.backends]\ntiny-ep = rlx_tiny:TinyBackend\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(TINY))
    from rlx_ref.backends.registry import backend_names, get_backend

    assert "tiny-ep" in backend_names()
    assert get_backend("tiny-ep").name == "tiny"


def test_repro_folder_has_no_colon(tmp_path):
    from rlx_ref.conformance.model import CaseResult

    case = _binary_case("Add")
    res = CaseResult(case.id, case.op, case.dtype, case.tags, "x", "MISMATCH", "m")
    d = Path(write_repro(tmp_path, "my_pkg.mod:Backend", case, res))
    assert ":" not in str(d.relative_to(tmp_path))
    assert '"backend": "my_pkg.mod:Backend"' in (d / "meta.json").read_text()


def test_dispatch_report_ends_with_a_newline():
    g = rlx_ref.Graph("m")
    g.set_outputs([g.relu(g.input("x", [4]))])
    exe = rlx_ref.Session("numba-cpu").compile(g)
    text = exe.dispatch_report.format()
    assert text.endswith("compile-ready: yes\n") and not text.endswith("\n\n")
    assert str(exe.dispatch_report) == text


def _pytest(args, cwd, extra_path=()):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *map(str, extra_path)]))
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           "-p", "rlx_ref.conformance.pytest_plugin", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_pytest_plugin_collects_its_own_test(tmp_path):
    r = _pytest(["--backend", "reference", "--conformance-op", "Softmax",
                 "--conformance-dtype", "f32", "--ledger", str(TINY / "expectations.toml"),
                 "--collect-only", "-q"], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    ids = [ln for ln in r.stdout.splitlines() if "test_conformance[reference::" in ln]
    assert len(ids) > 10 and all("Softmax.f32." in ln for ln in ids)


def test_pytest_plugin_keeps_the_old_ledger_option_and_a_users_own_test(tmp_path):
    (tmp_path / "test_mine.py").write_text(
        "def test_mine(conformance_check, conformance_backend, conformance_case):\n"
        "    conformance_check(conformance_backend, conformance_case)\n")
    r = _pytest(["--backend", "reference", "--conformance-op", "Softmax",
                 "--conformance-dtype", "f32", "--conformance-ledger",
                 str(TINY / "expectations.toml"), "--collect-only", "-q"], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "test_mine.py::test_mine[reference::" in r.stdout
    assert "test_conformance[" not in r.stdout       # the shipped test steps aside
