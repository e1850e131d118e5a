"""The coverage report in RLX's layout: RLX's kind list and categories, the sections drawn
from the registry, the ONNX node-test summary, and extra columns from other machines."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rlx_ref.conformance import report
from rlx_ref.conformance._report_rows import rlx_kinds

FIXTURE = Path(__file__).parent / "fixtures" / "coverage" / "onnx-node-tests.json"


def res(case_id, op, status="ok", backend="ref", **kw) -> dict:
    d = {"case_id": case_id, "op": op, "dtype": "f32", "tags": [], "backend": backend,
         "status": status, "message": "", "max_abs": None, "max_rel": None, "max_ulp": None,
         "worst_index": None, "budget_ratio": None, "seconds": 0.1, "repro": None,
         "emulated": False, "path": "native"}
    d.update(kw)
    return d


def results_file(path, backends: dict, results: list, host="box") -> str:
    doc = {"format": report.FORMAT, "machine": {"host": host}, "backends": backends,
           "results": results}
    Path(path).write_text(json.dumps(doc))
    return str(path)


def info(declared, emulated=False, device="cpu", **kw) -> dict:
    return {"emulated": emulated, "device": device, "declared": declared,
            "paths": {k: "native" for k in declared}, **kw}


def coverage(tmp_path, files, *extra) -> tuple:
    out = tmp_path / "docs" / "op-coverage.md"
    code = report.main_coverage([*map(str, files), "--out", str(out), *extra])
    text = out.read_text(encoding="utf-8") if out.exists() else ""
    rep = json.loads(out.with_suffix(".json").read_text()) if out.exists() else {}
    return code, text, rep


def test_rlx_kind_list_records_where_it_came_from():
    rk = rlx_kinds()
    assert len(rk.categories) == 20
    assert len(rk.kinds) == len(set(rk.kinds)) == rk.source["enum_kinds"] == 184
    assert rk.on_page <= set(rk.kinds)
    for key in ("enum_commit", "page_commit"):
        assert len(rk.source[key]) == 40
    assert rk.categories[0] == ("Sources & leaves", ("Input", "Param", "Constant"))
    assert [t for t, _ in rk.categories][-1] == "Backward / training ops"


def test_a_kind_listed_twice_is_refused(tmp_path):
    bad = tmp_path / "kinds.toml"
    bad.write_text('[[category]]\ntitle = "A"\nkinds = ["X"]\n'
                   '[[category]]\ntitle = "B"\nkinds = ["Y"]\nadded = ["X"]\n')
    with pytest.raises(ValueError, match=r"\['X'\] listed more than once"):
        rlx_kinds(str(bad))


def test_onnx_node_tests_section_from_the_summary(tmp_path):
    ref = results_file(tmp_path / "r.json", {"ref": info({"MatMul": "all"})},
                       [res("m-1", "MatMul")])
    code, md, rep = coverage(tmp_path, [ref], "--onnx-tests", str(FIXTURE))
    assert code == 0
    assert "## ONNX node tests" in md and "ONNX 1.23.2, opsets up to 25, 12 cases." in md
    assert "| **reference** | 6 | 0 | 1 | 5 | 7/12 | 85% |" in md     # floor of 6/7
    assert "| **numba-cpu** | 5 | 1 | 1 | 5 | 7/12 | 71% |" in md
    assert md.index("| **reference** | 6") < md.index("| **numba-cpu** | 5")
    assert "`Bernoulli` (2), `StringNormalizer` (2), `Loop` (1)" in md
    assert rep["onnx"]["cases"] == 12 and rep["onnx"]["backends"][0]["pass_pct"] == 85


def test_onnx_summary_beside_the_results_is_found_and_its_absence_said(tmp_path):
    ref = results_file(tmp_path / "r.json", {"ref": info({})}, [])
    code, md, rep = coverage(tmp_path, [ref])
    assert code == 0 and rep["onnx"] is None
    assert "Not measured: no `docs/results/onnx-node-tests.json`" in md
    (tmp_path / "docs" / "results").mkdir()
    shutil.copy(FIXTURE, tmp_path / "docs" / "results" / "onnx-node-tests.json")
    code, md, rep = coverage(tmp_path, [ref])
    assert code == 0 and rep["onnx"]["total"] == 12 and "Not measured" not in md


def test_a_broken_onnx_summary_is_named(tmp_path, capsys):
    ref = results_file(tmp_path / "r.json", {"ref": info({})}, [])
    bad = tmp_path / "onnx.json"
    bad.write_text(json.dumps({"onnx_version": "1"}))
    code, _, _ = coverage(tmp_path, [ref], "--onnx-tests", str(bad))
    err = capsys.readouterr().err
    assert code == 2 and "onnx.json: no max_opset, total, backends" in err


def test_a_gpu_machine_results_file_merges_in_as_its_own_column(tmp_path):
    kinds = {"MatMul": "all", "Reduce": "all"}
    sim = results_file(tmp_path / "sim.json",
                       {"cuda": info(kinds, True, "numba CUDA simulator",
                                     selection="shard 1/100")},
                       [res("m-1", "MatMul", backend="cuda", emulated=True)], host="ci")
    gpu = results_file(tmp_path / "gpu.json", {"cuda": info(kinds, device="NVIDIA H200")},
                       [res("m-1", "MatMul", backend="cuda"),
                        res("r-1", "Reduce", "MISMATCH", backend="cuda")], host="gpu-box")
    code, md, rep = coverage(tmp_path, [sim, gpu])
    assert code == 0
    assert [b["column"] for b in rep["backends"]] == ["cuda", "cuda (emulated)"]
    assert "| **cuda** | `cuda` | real | NVIDIA H200 | gpu-box | 2 |" in md
    assert ("| **cuda (emulated)** | `cuda` | emulated | numba CUDA simulator | ci | "
            "1 (shard 1/100) |") in md
    cells = {op["kind"]: op["cells"] for c in rep["categories"] for op in c["ops"]}
    assert cells["MatMul"]["cuda"]["text"] == cells["MatMul"]["cuda (emulated)"]["text"] == "✅"
    assert cells["Reduce"]["cuda"]["text"] == "❌ 0/1 (1 MISMATCH)"
    assert cells["Reduce"]["cuda (emulated)"]["text"] == "—"
    [gaps] = [g for g in rep["gaps"] if g["column"] == "cuda"]
    assert gaps["failing"] == ["Reduce"] and "Conv" in gaps["unclaimed"]


def test_sections_follow_rlx_order_then_the_measured_extras(tmp_path):
    ref = results_file(tmp_path / "r.json", {"ref": info({"MatMul": "all"})},
                       [res("m-1", "MatMul")])
    _, md, rep = coverage(tmp_path, [ref])
    order = ["## Where the truth lives", "## Backends", "### Coverage at a glance",
             "## Coverage matrix (by category)", "### Sources & leaves",
             "### Backward / training ops", "## Notable gaps", "## Op variations",
             "### QuantScheme", "## Pass rate by dtype", "## ONNX node tests", "## Machines"]
    assert [md.index(h) for h in order] == sorted(md.index(h) for h in order)
    assert f"| Backend | Kinds claimed | of {rep['rows']} |" in md
    assert rlx_kinds().source["enum_commit"][:12] in md


def test_op_variations_and_quant_schemes_come_from_the_registry():
    rep = report.render_json(report.Merged())
    act = next(v for v in rep["variations"] if v["enum"] == "Activation")
    assert "Gelu" in act["variants"] and "Activation.op" in act["used_by"]
    q4k = next(q for q in rep["quant_schemes"] if q["scheme"] == "GgufQ4K")
    assert (q4k["family"], q4k["name"], q4k["bpw"]) == ("GGUF K-quant", "Q4_K", "4.5")
    assert {q["family"] for q in rep["quant_schemes"]} >= {"Linear int", "GGUF ternary"}


class _Protocol:
    """A backend with only the protocol's methods (no Backend base class)."""

    name = "plain"

    def supported_ops(self):
        from rlx_ref.ir.dtype import DType

        return {"Input": "all", "While": frozenset({DType.F32})}


def test_a_backend_without_describe_still_records_its_claims(tmp_path):
    from rlx_ref.conformance.runner import results_document, write_results

    doc = results_document([_Protocol()], [res("w-1", "While", backend="plain")], "m")
    assert doc["backends"]["plain"]["declared"] == {"Input": "all", "While": ["f32"]}
    write_results(doc, tmp_path / "r.json")
    rep = report.render_json(report.load_results([tmp_path / "r.json"]))
    assert rep["glance"][0]["claimed"] == 2 and rep["glance"][0]["kinds_passing"] == 1
    cells = {op["kind"]: op["cells"]["plain"] for c in rep["categories"] for op in c["ops"]}
    assert cells["While"]["text"] == "✅"


def test_html_marks_are_svg_and_rows_carry_what_the_filters_read(tmp_path):
    from rlx_ref.conformance._report_html import _inline

    assert _inline("✅ᴴ").startswith('<svg class="mk mk-pass"') and \
        _inline("✅ᴴ").endswith('<sup class="ann" title="host fallback">H</sup>')
    assert 'mk-warn' in _inline("⚠️ 1/2") and _inline("⚠️ 1/2").endswith(" 1/2")
    assert 'mk-fail' in _inline("❌ 0/1")
    ref = results_file(tmp_path / "r.json", {"ref": info({"MatMul": "all"})},
                       [res("m-1", "MatMul")])
    coverage(tmp_path, [ref])
    page = (tmp_path / "docs" / "op-coverage.html").read_text(encoding="utf-8")
    assert '<div id="filters" hidden>' in page          # shown by the script only
    assert '<tr class="op" data-registered="1" data-search="matmul ' in page
    assert '<tr class="op gap" data-registered="0" data-search="gaussiansplatrenderbackward ' in page
    assert '<td class="c pass" data-col="ref" data-state="pass"><svg' in page
    assert page.count('<section class="cat">') == 20
