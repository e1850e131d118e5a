"""ONNX's backend node tests as an external suite: every case on the oracle, a fast subset
on numba-cpu, and the committed results file (docs/results/onnx-node-tests.json) kept
current. Chunked so that ``pytest -n 2`` spreads the cases over both workers."""
import fnmatch
import functools
import json
from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx")

from rlx_ref.onnx.node_suite import ledger_entry, load_ledger  # noqa: E402
from rlx_ref.onnx.node_tests import (FAIL, NOT_MAPPABLE, PASS, collect,  # noqa: E402
                                     fast_subset, run_case)

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results" / "onnx-node-tests.json"
CHUNKS = 8


@functools.lru_cache(maxsize=1)
def _cases():
    return collect()


@functools.lru_cache(maxsize=1)
def _committed():
    data = json.loads(RESULTS.read_text())
    return data if data["onnx_version"] == onnx.__version__ else None


def _check(cases, backend):
    """Run ``cases`` on ``backend``; a failure not in the ledger is a test failure, and so
    is a status that differs from the committed results file (when its onnx matches)."""
    ledger, committed = load_ledger(), _committed()
    bad, drift = [], []
    for name, mb, ins, outs in cases:
        st, detail = run_case(name, mb, ins, outs, (backend,))[backend]
        if st == FAIL and not ledger_entry(ledger, name, backend):
            bad.append(f"{name}: {detail}")
        shown = "differs" if st == FAIL and ledger_entry(ledger, name, backend) else st
        if committed is not None and committed["cases"].get(name, {}).get(backend) != shown:
            drift.append(f"{name}: {shown}, committed "
                         f"{committed['cases'].get(name, {}).get(backend)}")
    assert not bad, f"{len(bad)} unledgered failure(s) on {backend}:\n" + "\n".join(bad)
    assert not drift, (f"{RESULTS.name} is stale (run `rlx-ref onnx-tests --backend "
                       f"numba-cpu`):\n" + "\n".join(drift))


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_oracle_chunk(chunk):
    _check(_cases()[chunk::CHUNKS], "reference")


@pytest.mark.parametrize("chunk", range(2))
def test_numba_cpu_fast_subset(chunk):
    pytest.importorskip("numba")
    _check(fast_subset(_cases())[chunk::2], "numba-cpu")


def test_targets_in_results_file():
    """≥ 60% of all cases map, and the oracle passes ≥ 95% of the mappable ones."""
    data = json.loads(RESULTS.read_text())
    c = data["backends"]["reference"]
    assert sum(c.values()) == data["total"] == len(data["cases"])
    mappable = data["total"] - c["not_mappable"]
    assert mappable >= 0.60 * data["total"], (mappable, data["total"])
    assert c["pass"] >= 0.95 * mappable, (c, mappable)
    assert c["fail"] == 0


def test_results_file_schema_and_counts():
    data = json.loads(RESULTS.read_text())
    assert set(data) >= {"onnx_version", "max_opset", "total", "backends",
                         "not_mappable_ops", "cases"}
    for b, counts in data["backends"].items():
        tally = {s: 0 for s in counts}
        for per in data["cases"].values():
            if b in per:
                tally[per[b]] += 1
        assert tally == counts, b
    nm = sum(1 for per in data["cases"].values() if per["reference"] == NOT_MAPPABLE)
    assert nm == data["backends"]["reference"]["not_mappable"]
    assert RESULTS.read_text() == json.dumps(data, indent=1, sort_keys=True) + "\n"


def test_ledger_entries_have_reasons_and_are_not_stale():
    """Every entry covers a case the committed results show as ``differs``."""
    data = json.loads(RESULTS.read_text())
    for e in load_ledger():
        assert e["reason"].strip()
        hits = [n for n, per in data["cases"].items() if fnmatch.fnmatchcase(n, e["pattern"])
                and "differs" in per.values()]
        assert hits, f"ledger entry {e['pattern']!r} covers no failing case"
    assert PASS in {s for per in data["cases"].values() for s in per.values()}


def _crashy(name, mb, ins, outs, backends):
    """A case runner whose worker dies on one case (module level: workers import it)."""
    import os

    if name == "boom":
        os._exit(3)
    return {b: (PASS, {"max_abs": 0.0, "max_rel": 0.0}) for b in backends}


def test_a_crashing_case_does_not_end_the_run():
    from rlx_ref.onnx.node_suite import run_cases

    cases = [(n, b"", [], []) for n in ("a", "b", "boom", "c", "d")]
    res = run_cases(cases, ("reference",), jobs=2, fn=_crashy)
    assert set(res) == {"a", "b", "boom", "c", "d"}
    assert res["boom"]["reference"][0] == FAIL
    assert "died" in res["boom"]["reference"][1]["error"]
    assert all(res[n]["reference"][0] == PASS for n in "abcd")


def test_summary_applies_the_ledger_and_is_deterministic():
    from rlx_ref.onnx.node_suite import summary

    ledger = [{"pattern": "test_x_*", "reason": "r", "backends": ("*",)}]
    results = {"test_x_1": {"reference": (FAIL, {"max_abs": 1.0, "max_rel": 0.5})},
               "test_y": {"reference": (FAIL, {"error": "boom"})},
               "test_z": {"reference": (NOT_MAPPABLE, {"ops": ["Foo"], "why": "w"})},
               "test_w": {"reference": (PASS, {})}}
    s = summary(results, ledger, ("reference",))
    assert s["cases"] == {"test_x_1": {"reference": "differs"},
                          "test_y": {"reference": "fail"},
                          "test_z": {"reference": "not_mappable"},
                          "test_w": {"reference": "pass"}}
    assert s["backends"]["reference"] == {"pass": 1, "fail": 1, "differs": 1,
                                          "not_mappable": 1}
    assert s["not_mappable_ops"] == {"Foo": 1} and s["total"] == 4
    assert "boom" in s["failures"]["test_y"]["reference"]
