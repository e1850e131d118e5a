"""The committed op-coverage report is current: a fresh reference run, merged with the
committed results of the kernel backends (``docs/results/*.json.gz``, runs on the machines
they name), renders it exactly."""
from pathlib import Path

from rlx_ref.backends.registry import get_backend
from rlx_ref.conformance.cases import build_cases
from rlx_ref.conformance.ledger import load_ledger
from rlx_ref.conformance.report import main_coverage
from rlx_ref.conformance.runner import results_document, run_backend, write_results

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
MACHINE_RESULTS = sorted((DOCS / "results").glob("*.json.gz"))
REGENERATE = ("rlx-ref conformance --backend reference --jobs 2 --machine 'rlx_ref docs' "
              "--out build/results.json && rlx-ref coverage build/results.json "
              "docs/results/*.json.gz")


def test_committed_coverage_report_is_not_stale(tmp_path, capsys):
    backend = get_backend("reference")
    results = run_backend(backend, build_cases(), load_ledger(), jobs=2, progress=False)
    path = tmp_path / "results.json"
    write_results(results_document([backend], results, "rlx_ref docs"), path)
    code = main_coverage([str(path), *map(str, MACHINE_RESULTS), "--check",
                          "--out", str(DOCS / "op-coverage.md"),
                          "--json", str(DOCS / "op-coverage.json"),
                          "--html", str(DOCS / "op-coverage.html")])
    assert code == 0, f"{capsys.readouterr()}\nregenerate with: {REGENERATE}"
