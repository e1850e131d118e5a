"""Error cases: every gather/scatter kind gets out-of-range, negative, NaN and inf indices,
integer Div/Mod get a zero divisor; the oracle raises on each, a backend passes only by
raising an error naming the same problem, and the report counts them."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rlx_ref.backends.reference import ReferenceBackend
from rlx_ref.backends.registry import get_backend
from rlx_ref.conformance import report
from rlx_ref.conformance.cases import build_cases
from rlx_ref.conformance.errors import (DIV_ZERO, INDEX_ERROR, INDEX_KINDS, TAG,
                                        error_matches)
from rlx_ref.conformance.ledger import Ledger
from rlx_ref.conformance.repro import load_case
from rlx_ref.conformance.runner import run_case, results_document, write_results
from rlx_ref.interpret import interpret

ROOT = Path(__file__).resolve().parents[1]
CASES = [c for c in build_cases(list(INDEX_KINDS) + ["Binary"]) if c.expect_error]
TAGS = {"index-past-end", "int-index-past-end", "nan-index", "inf-index"}


def test_every_indexing_kind_gets_each_bad_index():
    for kind in INDEX_KINDS:
        mine = [c for c in CASES if c.op == kind]
        tags = {t for c in mine for t in c.tags} - {TAG}
        negative = {"negative-index"} if kind in ("Gather", "ScatterAdd") else \
            {"negative-past-start"}
        assert tags == TAGS | negative, (kind, tags)
        assert all(c.expect_error == INDEX_ERROR for c in mine)
    div = [c for c in CASES if c.op == "Binary"]
    assert {c.dtype for c in div} == {"i32", "i64"} and len(div) == 4
    assert all(c.expect_error == DIV_ZERO for c in div)


def test_bad_index_values_are_the_first_invalid_ones():
    nd = next(c for c in CASES if c.op == "GatherElements" and "index-past-end" in c.tags)
    assert nd.inputs["x1"].ravel()[-1] == 3.0        # axis 1 of a 3x3 table: 3 is past it
    g = next(c for c in CASES if c.op == "Gather" and "negative-index" in c.tags)
    assert g.inputs["x1"].ravel()[-1] == -1.0        # Gather never wraps negatives
    w = next(c for c in CASES if c.op == "ScatterNd" and "negative-past-start" in c.tags)
    assert w.inputs["x1"].ravel()[-1] == -4.0        # -3 would count from the end
    assert next(c for c in CASES if "int-index-past-end" in c.tags).inputs["x1"].dtype \
        == np.int32


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.op}-{c.tags[1]}-{c.dtype}")
def test_oracle_raises_and_reference_passes(case):
    with pytest.raises(Exception) as info:
        interpret(case.graph, case.inputs, case.params)
    assert error_matches(info.value, case.expect_error)
    r = run_case(get_backend("reference"), case, Ledger([]))
    assert r.status == "ok" and r.message.startswith("raised as expected"), r.message


def test_wrapping_gather_passes_its_values_but_fails_its_error_cases(tmp_path):
    broken = get_backend("broken")
    values = [c for c in build_cases(["Gather"]) if not c.expect_error]
    assert {run_case(broken, c, Ledger([])).status for c in values} == {"ok"}
    errs = [run_case(broken, c, Ledger([]), repro_dir=tmp_path) for c in CASES
            if c.op == "Gather"]
    assert {r.status for r in errs} == {"MISMATCH"}
    assert all(r.message.startswith("no error raised") for r in errs)
    case, meta = load_case(errs[0].repro)
    assert case.expect_error == INDEX_ERROR and meta["expect_error"] == list(INDEX_ERROR)
    run = subprocess.run([sys.executable, str(Path(errs[0].repro) / "repro.py")],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode == 1 and "no error raised" in run.stdout


class _Vague(ReferenceBackend):
    """Raises on every run, without saying why."""

    name = "vague"

    def compile(self, graph, options=None):
        class Exe:
            def set_param(self, *a):
                pass

            def run(self, feeds):
                raise RuntimeError("kernel failed")
        return Exe()


def test_an_error_that_does_not_name_the_problem_is_an_error():
    case = next(c for c in CASES if c.op == "ScatterNd")
    r = run_case(_Vague(), case, Ledger([]))
    assert r.status == "error" and "does not mention 'out of range'" in r.message
    good = next(c for c in build_cases(["ScatterNd"]) if not c.expect_error)
    assert run_case(_Vague(), good, Ledger([])).status == "error"


def test_error_matching_follows_the_cause_chain():
    try:
        try:
            raise ValueError("index 9 is out of range for axis 0")
        except ValueError as e:
            raise RuntimeError("at %2: step failed") from e
    except RuntimeError as outer:
        assert error_matches(outer, INDEX_ERROR)
    assert not error_matches(RuntimeError("at %2: step failed"), INDEX_ERROR)
    assert error_matches(RuntimeError("Integer division BY ZERO"), DIV_ZERO)


def test_report_counts_error_cases_per_kind_and_backend(tmp_path):
    ref, broken = get_backend("reference"), get_backend("broken")
    mine = [c for c in CASES if c.op in ("Gather", "ScatterAdd")]
    results = [run_case(b, c, Ledger([])).to_json() for b in (ref, broken) for c in mine]
    path = tmp_path / "r.json"
    write_results(results_document([ref, broken], results, "box"), path)
    merged = report.load_results([path])
    rep = report.render_json(merged)
    cells = {r["name"]: {k: v["text"] for k, v in r["cells"].items()} for r in rep["errors"]}
    assert cells == {"Gather": {"reference": "✅ 5/5 (100%)", "broken": "❌ 0/5 (0%)"},
                     "ScatterAdd": {"reference": "✅ 5/5 (100%)", "broken": "✅ 5/5 (100%)"}}
    md = report.render_markdown(merged)
    assert "## Error cases" in md and "| `Gather` | ✅ 5/5 (100%) | ❌ 0/5 (0%) |" in md
    assert ">Error cases</h2>" in report.render_html(merged)
    assert json.loads(json.dumps(rep))["errors"] == rep["errors"]
