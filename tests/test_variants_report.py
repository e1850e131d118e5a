"""Kernel-variant coverage in the report: counts per backend and ``coverage --check``."""
import json

import pytest

from rlx_ref.backends import variants
from rlx_ref.backends.registry import get_backend
from rlx_ref.conformance import report
from rlx_ref.conformance.model import CaseResult
from rlx_ref.conformance.runner import results_document, write_results

pytest.importorskip("numba")


def _results(tmp_path, names, name="numba-cpu"):
    """A results file with one passing case per variant in ``names``."""
    be = get_backend(name)
    rows = [CaseResult(f"Reduce.f32.{i:012x}", "Reduce", "f32", (), name, "ok",
                       variants=[n]).to_json()
            for i, n in enumerate(names)]
    path = tmp_path / "results.json"
    write_results(results_document([be], rows, "variants-test"), path)
    return path


def _report(tmp_path, path, *extra):
    out = [str(tmp_path / f) for f in ("c.md", "c.json", "c.html")]
    return report.main_coverage([str(path), "--out", out[0], "--json", out[1], "--html",
                                 out[2], *extra])


def test_the_report_counts_exercised_of_declared_and_lists_the_rest(tmp_path):
    every = sorted(variants.applicable("numba-cpu", ("cpu",)))
    path = _results(tmp_path, every[1:])
    assert _report(tmp_path, path) == 0
    rep = json.loads((tmp_path / "c.json").read_text())
    [row] = rep["variants"]
    assert row["exercised"] == len(every) - 1 and row["applicable"] == len(every)
    assert row["unexercised"] == [every[0]]
    md = (tmp_path / "c.md").read_text()
    assert "## Kernel variants" in md and f"`{every[0]}`" in md
    assert every[0] in (tmp_path / "c.html").read_text()


def test_coverage_check_fails_naming_an_unexercised_variant_and_passes_when_all_ran(
        tmp_path, capsys):
    every = sorted(variants.applicable("numba-cpu", ("cpu",)))
    path = _results(tmp_path, every[:-1])
    assert _report(tmp_path, path) == 0
    assert _report(tmp_path, path, "--check") == 1
    err = capsys.readouterr().err
    assert every[-1] in err and "never exercised" in err
    path = _results(tmp_path, every)
    assert _report(tmp_path, path) == 0
    _report(tmp_path, path, "--check")      # fails here only for the kinds without results
    assert "kernel variant" not in capsys.readouterr().err
    rows = report.render_json(report.load_results([path]))["variants"]
    assert rows[0]["unexercised"] == [] and report.unexercised_problems(rows) == []


def test_gpu_variants_are_not_expected_from_cpu_results():
    cpu = variants.applicable("opencl", ("cpu",))
    assert "opencl:reduce.rows_cpu" in cpu and "opencl:reduce.rows_gpu" not in cpu
    assert "opencl:reduce.rows.segmented" in cpu
