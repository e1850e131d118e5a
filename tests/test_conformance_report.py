"""The op-coverage report: merging, cells and annotations, pages, JUnit, --check, CLI."""
from __future__ import annotations

import json
from html.parser import HTMLParser
from types import SimpleNamespace
from xml.etree import ElementTree as ET

import pytest

from rlx_ref.conformance import report
from rlx_ref.conformance._report_html import first_sentence
from rlx_ref.ir.dtype import DType

REGISTRY = [SimpleNamespace(kind=k, family=f, doc=d) for k, f, d in (
    ("Input", "leaves", "A model input. Bound by name."),
    ("Binary", "elementwise", "Applies `a.b` elementwise (e.g. Add). More text."),
    ("MatMul", "linalg", "Matrix product."),
    ("Reduce", "reduction", "Reduces over axes."),
    ("Pad", "movement", "Pads."),
    ("Gather", "indexing", "Gathers."),
    ("Scan", "control", "A bounded loop."),
    ("CustomFn", "control", "A function with custom rules."),
    ("Odd", "newfamily", "Not in any category yet."),
)]
KINDS = [d.kind for d in REGISTRY]


def res(case_id, op, status="ok", backend="ref", dtype="f32", tags=(), **kw) -> dict:
    d = {"case_id": case_id, "op": op, "dtype": dtype, "tags": list(tags), "backend": backend,
         "status": status, "message": "", "max_abs": None, "max_rel": None, "max_ulp": None,
         "worst_index": None, "budget_ratio": None, "seconds": 0.5, "repro": None,
         "emulated": False, "path": "native"}
    d.update(kw)
    return d


def backend(declared=None, paths=None, emulated=False, device="cpu") -> dict:
    declared = {k: "all" for k in KINDS} if declared is None else declared
    return {"emulated": emulated, "device": device, "declared": declared,
            "paths": paths if paths is not None else {k: "native" for k in declared}}


def write(tmp_path, name, results, host="box", backends=None) -> str:
    doc = {"format": report.FORMAT,
           "machine": {"host": host, "platform": "linux", "python": "3.11", "numpy": "2.1"},
           "backends": {"ref": backend()} if backends is None else backends,
           "results": results}
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def every_kind(backend_name="ref", status="ok") -> list:
    return [res(f"{k.lower()}-1", k, status, backend_name) for k in KINDS]


def cells(rep: dict) -> dict:
    return {op["kind"]: op["cells"] for cat in rep["categories"] for op in cat["ops"]}


# ── merging ─────────────────────────────────────────────────────────────────

def test_same_case_twice_keeps_the_worse_status_and_both_machines(tmp_path):
    a = write(tmp_path, "a.json", every_kind(), host="alpha")
    b = write(tmp_path, "b.json", [res("matmul-1", "MatMul", "MISMATCH", message="off by 2",
                                       repro="repros/matmul-1")], host="beta")
    for order in ([a, b], [b, a]):
        seen = report.load_results(order).results[("ref", "matmul-1")]
        assert seen.result.status == "MISMATCH"
        assert seen.machines == ["alpha", "beta"]
        assert seen.by_machine == {"alpha": "ok", "beta": "MISMATCH"}
    md_ab = report.render_markdown(report.load_results([a, b]), REGISTRY)
    assert md_ab == report.render_markdown(report.load_results([b, a]), REGISTRY)
    assert "alpha (ok), beta (MISMATCH)" in md_ab
    assert cells(report.render_json(report.load_results([a, b]), REGISTRY))["MatMul"]["ref"][
        "text"] == "❌ 0/1 (1 MISMATCH)"


def test_failing_beats_passing_whatever_the_statuses():
    rank = report._rank
    for bad in ("MISMATCH", "MISSING", "error", "xpass"):
        for good in ("ok", "unsupported", "xfail"):
            assert rank(bad) > rank(good)
    assert rank("some new status") > rank("error")


def test_backends_add_columns_and_emulated_runs_get_their_own(tmp_path):
    a = write(tmp_path, "a.json", every_kind("ref") + every_kind("opencl"),
              backends={"ref": backend(), "opencl": backend(device="AMD gfx1100")})
    b = write(tmp_path, "b.json", every_kind("opencl", "MISMATCH"), host="ci",
              backends={"opencl": backend(emulated=True, device="PoCL")})
    merged = report.load_results([a, b])
    assert sorted(merged.columns) == ["opencl", "opencl (emulated)", "ref"]
    rep = report.render_json(merged, REGISTRY)
    assert [b["column"] for b in rep["backends"]] == ["opencl", "opencl (emulated)", "ref"]
    c = cells(rep)["MatMul"]
    assert c["opencl"]["text"] == "✅" and c["ref"]["text"] == "✅"
    assert c["opencl (emulated)"]["state"] == "fail"     # not merged into the real column
    md = report.render_markdown(merged, REGISTRY)
    assert "| **opencl (emulated)** | `opencl` | emulated | PoCL | ci |" in md
    assert "| **opencl** | `opencl` | real | AMD gfx1100 | box |" in md


def test_result_emulated_flag_alone_selects_the_emulated_column(tmp_path):
    p = write(tmp_path, "a.json", [res("x-1", "MatMul", backend="cuda", emulated=True)],
              backends={})
    merged = report.load_results([p])
    assert list(merged.columns) == ["cuda (emulated)"]


def test_unreadable_or_foreign_files_are_named(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "something/2"}))
    with pytest.raises(ValueError, match="bad.json.*rlx-ref-conformance/1"):
        report.load_results([bad])
    with pytest.raises(ValueError, match="absent.json: cannot read: no such file"):
        report.load_results([tmp_path / "absent.json"])
    assert report.main_coverage([str(bad), "--out", str(tmp_path / "x.md")]) == 2


# ── cells, annotations, categories ──────────────────────────────────────────

def test_cells_and_every_annotation(tmp_path):
    declared = {k: "all" for k in KINDS if k != "Gather"}
    paths = {k: "native" for k in declared}
    paths.update(Binary="rewritten", Pad="decomposed", Scan="host")
    results = [r for r in every_kind() if r["op"] not in ("Gather", "Input", "Odd")]
    results += [res("reduce-2", "Reduce", "MISSING"), res("reduce-3", "Reduce", "xfail"),
                res("matmul-2", "MatMul", "xfail"), res("gather-1", "Gather", "unsupported"),
                res("odd-1", "Odd", "unsupported"), res("customfn-2", "CustomFn", path="host")]
    merged = report.load_results([write(tmp_path, "a.json", results,
                                        backends={"ref": backend(declared, paths)})])
    c = {k: v["ref"] for k, v in cells(report.render_json(merged, REGISTRY)).items()}
    assert c["Binary"]["text"] == "✅ᵁ"
    assert c["Pad"]["text"] == "✅ᴰ"
    assert c["Scan"]["text"] == "✅ᴴ"
    assert c["CustomFn"]["text"] == "✅ᴴ"        # a result that took the host path
    assert c["Input"]["text"] == "—" and c["Input"]["state"] == "notrun"
    assert c["Gather"]["text"] == "" and c["Gather"]["state"] == "unclaimed"
    assert c["Odd"]["text"] == "unsupported"
    assert c["Reduce"]["text"] == "⚠️ 1/3 (1 MISSING, 1 xfail)"
    assert c["Reduce"]["failing"] == 1 and c["Reduce"]["state"] == "fail"
    assert c["MatMul"]["text"] == "⚠️ 1/2 (1 xfail)" and c["MatMul"]["state"] == "xfail"


def test_a_failure_shows_even_where_nothing_is_claimed(tmp_path):
    merged = report.load_results([write(tmp_path, "a.json", [res("g-1", "Gather", "error")],
                                        backends={"ref": backend({})})])
    c = cells(report.render_json(merged, REGISTRY))["Gather"]["ref"]
    assert c["text"] == "❌ 0/1 (1 error)" and not c["claimed"]


def test_rows_are_rlx_kinds_in_rlx_order_and_our_extra_kinds_go_last():
    rep = report.render_json(report.Merged(), REGISTRY)
    by_title = {c["title"]: [op["kind"] for op in c["ops"]] for c in rep["categories"]}
    assert by_title["Sources & leaves"] == ["Input", "Param", "Constant"]
    assert by_title["Shape & data movement"].index("Gather") < \
        by_title["Shape & data movement"].index("Pad")        # RLX's page order
    assert "CustomFn" in by_title["User-extensible"]
    assert [c["title"] for c in rep["categories"]][-1] == report.RLX_ONLY_TITLE
    assert by_title[report.RLX_ONLY_TITLE] == ["Odd"]
    assert rep["rlx_only_kinds"] == ["Odd"]
    rows = {op["kind"]: op for c in rep["categories"] for op in c["ops"]}
    assert rows["Input"]["registered"] and not rows["Param"]["registered"]
    assert "Param" in rep["missing_kinds"] and "Input" not in rep["missing_kinds"]
    assert rep["rows"] == rep["rlx_kinds"] + 1 == len(rows)


def test_a_kind_we_lack_is_a_row_of_blank_cells(tmp_path):
    merged = report.load_results([write(tmp_path, "a.json", every_kind())])
    rep = report.render_json(merged, REGISTRY)
    param = cells(rep)["Param"]["ref"]
    assert param["state"] == "absent" and param["text"] == ""
    md = report.render_markdown(merged, REGISTRY)
    assert "| `Param` | *(not in rlx_ref's registry yet)* |  |" in md
    assert f"| **ref** | **{len(KINDS)}** | {rep['rows']} |" in md      # "of N" is the rows


def test_the_rows_cover_rlx_enum_and_every_registered_kind_once():
    rep = report.render_json(report.Merged())        # the real registry
    kinds = [op["kind"] for c in rep["categories"] for op in c["ops"]]
    assert len(kinds) == len(set(kinds)) == rep["rows"]
    assert rep["rlx_kinds"] == report.rlx_kinds().source["enum_kinds"]
    from rlx_ref.ops.opdef import kinds as registered

    assert set(registered()) <= set(kinds)
    assert rep["rows"] == rep["rlx_kinds"] + len(rep["rlx_only_kinds"])
    assert len(rep["categories"]) - bool(rep["rlx_only_kinds"]) == 20


@pytest.mark.parametrize("doc, want", [
    ("A model input. Bound by name.", "A model input."),
    ("Applies `a.b` elementwise (e.g. Add). More.", "Applies `a.b` elementwise (e.g. Add)."),
    ("No period at all", "No period at all"),
    ("Group norm on `[N, C]`: " + "x" * 120 + ". Next.", "Group norm on `[N, C]`"),
    ("Softmax (the guard; harmless) along " + "y" * 100 + ".",
     "Softmax (the guard; harmless) along " + "y" * 100 + "."),
])
def test_description_is_the_first_sentence(doc, want):
    assert first_sentence(doc) == want


# ── rates, multi-op cases, failures ─────────────────────────────────────────

def test_dtype_and_tag_pass_rates(tmp_path):
    results = [res("a", "MatMul", dtype="f32", tags=("empty",)),
               res("b", "MatMul", "MISMATCH", dtype="f32", tags=("nan", "empty")),
               res("c", "MatMul", "unsupported", dtype="f16", tags=("nan",)),
               res("d", "MatMul", dtype="bf16", tags=("nan",))]
    rep = report.render_json(report.load_results([write(tmp_path, "a.json", results)]),
                             REGISTRY)
    dt = [(r["name"], r["cells"]["ref"]["text"]) for r in rep["dtypes"]]
    assert dt == [("f32", "⚠️ 1/2 (50%)"), ("f16", "—"), ("bf16", "✅ 1/1 (100%)")]
    tags = {r["name"]: r["cells"]["ref"]["text"] for r in rep["tags"]}
    assert tags == {"empty": "⚠️ 1/2 (50%)", "nan": "⚠️ 1/2 (50%)"}


def test_multi_op_cases_table(tmp_path):
    results = [res("m1", "multi:mlp"), res("m2", "multi:mlp", dtype="f16"),
               res("m3", "multi:attention_block", "MISMATCH")]
    merged = report.load_results([write(tmp_path, "a.json", results)])
    rep = report.render_json(merged, REGISTRY)
    assert [(m["name"], m["dtypes"], m["cells"]["ref"]["text"]) for m in rep["multi"]] == [
        ("attention_block", ["f32"], "❌ 0/1 (1 MISMATCH)"), ("mlp", ["f16", "f32"], "✅")]
    assert rep["unknown_ops"] == []
    assert "| `mlp` | f16, f32 | ✅ |" in report.render_markdown(merged, REGISTRY)


def test_failures_list(tmp_path):
    results = every_kind() + [res("z-9", "Reduce", "MISSING", message="all | zero\ndetail",
                                  repro="repros/z-9", max_abs=2.0, worst_index=[0, 1])]
    merged = report.load_results([write(tmp_path, "a.json", results)])
    [f] = report.render_json(merged, REGISTRY)["failures"]
    assert (f["case_id"], f["column"], f["status"], f["message"], f["repro"]) == (
        "z-9", "ref", "MISSING", "all | zero", "repros/z-9")
    assert f["max_abs"] == 2.0 and f["worst_index"] == [0, 1]
    md = report.render_markdown(merged, REGISTRY)
    assert "| `z-9` | ref | `Reduce` | f32 | MISSING | all \\| zero | `repros/z-9` | box " \
           "(MISSING) |" in md


# ── determinism, HTML, JUnit ────────────────────────────────────────────────

def _mixed(tmp_path):
    a = write(tmp_path, "a.json", every_kind() + [res("r-2", "Reduce", "MISMATCH",
                                                      tags=("ties",))], host="zeta")
    b = write(tmp_path, "b.json", every_kind("cuda", "xfail") + [res("m", "multi:mlp")],
              host="alpha", backends={"cuda": backend(emulated=True), "ref": backend()})
    return report.load_results([a, b])


def test_output_is_deterministic_and_json_ready(tmp_path):
    merged = _mixed(tmp_path)
    assert report.render_markdown(merged, REGISTRY) == report.render_markdown(merged, REGISTRY)
    assert report.render_html(merged, REGISTRY) == report.render_html(merged, REGISTRY)
    rep = report.render_json(merged, REGISTRY)
    assert json.loads(json.dumps(rep)) == rep
    assert [m["host"] for m in rep["machines"]] == ["alpha", "zeta"]
    assert report.render_markdown(merged, REGISTRY).startswith("<!-- generated by")


class _Nesting(HTMLParser):
    VOID = {"meta", "hr", "br", "img", "link", "input"}

    def __init__(self):
        super().__init__()
        self.stack, self.errors, self.tags = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()


def test_html_is_well_formed_and_self_contained(tmp_path):
    page = report.render_html(_mixed(tmp_path), REGISTRY)
    p = _Nesting()
    p.feed(page)
    p.close()
    assert p.errors == [] and p.stack == []
    assert page.startswith("<!DOCTYPE html>")
    assert "http://" not in page and "https://" not in page
    names = [t for t, _ in p.tags]
    assert not set(names) & {"link", "img", "iframe"} and names.count("script") == 1
    assert not any("src" in a or "href" in a for _, a in p.tags)
    # marks are drawn, not typed: no emoji or modifier letters for a font to lack
    assert not set(page) & set("✅⚠❌ᵁᴰᴴ")
    assert 'class="mk mk-pass"' in page and 'class="mk mk-fail"' in page
    for title in ("Coverage at a glance", "Sources &amp; leaves", "Pass rate by dtype",
                  "Pass rate by edge tag", "Multi-op cases", "Failures"):
        assert title in page
    assert 'class="c fail"' in page and 'class="c pass"' in page


def test_junit_counts_failures_and_skips(tmp_path):
    results = [res("a", "MatMul"), res("b", "MatMul", "MISMATCH", message="bad\nworse"),
               res("c", "Reduce", "MISSING"), res("d", "Reduce", "error"),
               res("e", "Reduce", "xpass"), res("f", "Pad", "unsupported"),
               res("g", "Pad", "xfail"), res("h", "Pad", backend="gpu", emulated=True)]
    root = ET.fromstring(report.render_junit(results, "conf"))
    assert root.tag == "testsuites" and root.get("name") == "conf"
    assert (root.get("tests"), root.get("failures"), root.get("skipped")) == ("8", "4", "2")
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert sorted(suites) == ["gpu (emulated)", "ref"]
    ref = suites["ref"]
    assert (ref.get("tests"), ref.get("failures"), ref.get("skipped")) == ("7", "4", "2")
    cases = {c.get("name"): c for c in ref.iter("testcase")}
    assert cases["b"].get("classname") == "MatMul"
    fail = cases["b"].find("failure")
    assert fail.get("type") == "MISMATCH" and fail.get("message") == "bad"
    assert cases["a"].find("failure") is None and cases["a"].find("skipped") is None
    assert cases["f"].find("skipped") is not None and cases["g"].find("skipped") is not None
    assert cases["d"].find("failure").get("type") == "error"
    merged = report.load_results([write(tmp_path, "a.json", results)])
    assert ET.fromstring(report.render_junit(merged)).get("tests") == "8"


# ── --check ─────────────────────────────────────────────────────────────────

def test_check_report_finds_each_kind_of_staleness(tmp_path):
    merged = report.load_results([write(tmp_path, "a.json", every_kind())])
    md = tmp_path / "op-coverage.md"
    assert any("does not exist" in p for p in report.check_report(md, merged, REGISTRY))
    md.write_text(report.render_markdown(merged, REGISTRY))
    same = {"ref": {k: "all" for k in KINDS}}
    assert report.check_report(md, merged, REGISTRY, same) == []

    md.write_text(md.read_text().replace("✅", "⚠️", 1))
    [stale] = report.check_report(md, merged, REGISTRY, same)
    assert "is stale" in stale and "line" in stale

    grown = REGISTRY + [SimpleNamespace(kind="NewOp", family="linalg", doc="New.")]
    md.write_text(report.render_markdown(merged, grown))
    [missing] = report.check_report(md, merged, grown, same)
    assert "'NewOp'" in missing and "no results" in missing

    shrunk = REGISTRY[1:]
    md.write_text(report.render_markdown(merged, shrunk))
    assert any("'Input'" in p and "does not have" in p
               for p in report.check_report(md, merged, shrunk, same))

    md.write_text(report.render_markdown(merged, REGISTRY))
    now = {"ref": {**{k: "all" for k in KINDS if k != "Pad"},
                   "MatMul": frozenset({DType.F32, DType.F16}), "Extra": "all"}}
    [declared] = report.check_report(md, merged, REGISTRY, now)
    assert "now claims: Extra" in declared and "no longer claims: Pad" in declared
    assert "dtypes changed for: MatMul" in declared
    assert any("'gone'" in p for p in report.check_report(md, merged, REGISTRY,
                                                          {**same, "gone": {}}))


def test_leaves_need_no_cases_of_their_own(tmp_path):
    from rlx_ref.ops.opdef import Caps

    reg = [SimpleNamespace(kind="In", family="leaves", doc="Input.", caps=Caps.LEAF),
           SimpleNamespace(kind="Op", family="linalg", doc="Op.", caps=Caps.BLAS)]
    merged = report.load_results([write(tmp_path, "a.json", [],
                                        backends={"ref": backend({"In": "all", "Op": "all"})})])
    md = tmp_path / "m.md"
    md.write_text(report.render_markdown(merged, reg))
    [problem] = report.check_report(md, merged, reg, {"ref": {"In": "all", "Op": "all"}})
    assert "'Op'" in problem
    assert "`In`, `Op`" in md.read_text()        # both still listed under Gaps


def test_pages_cap_the_failures_list_but_json_keeps_all(tmp_path, monkeypatch):
    from rlx_ref.conformance import _report_text

    monkeypatch.setattr(_report_text, "PAGE_FAILURES", 2)
    results = [res(f"f-{i}", "MatMul", "MISMATCH") for i in range(5)]
    results += [res("g-1", "MatMul", "error", backend="gpu")]
    merged = report.load_results([write(tmp_path, "a.json", results)])
    assert len(report.render_json(merged, REGISTRY)["failures"]) == 6
    md = report.render_markdown(merged, REGISTRY)
    assert "`f-1`" in md and "`f-2`" not in md and "`g-1`" in md
    assert "at most 2 failures per op and backend (1 on gpu, 5 on ref in all)" in md


def test_declared_dtypes_compare_by_display_name(tmp_path):
    decl = {**{k: "all" for k in KINDS}, "MatMul": ["f16", "f32"]}
    merged = report.load_results([write(tmp_path, "a.json", every_kind(),
                                        backends={"ref": backend(decl)})])
    md = tmp_path / "m.md"
    md.write_text(report.render_markdown(merged, REGISTRY))
    now = {"ref": {**{k: "all" for k in KINDS}, "MatMul": frozenset({DType.F32, DType.F16})}}
    assert report.check_report(md, merged, REGISTRY, now) == []


# ── command line ────────────────────────────────────────────────────────────

def test_cli_writes_then_checks(tmp_path, monkeypatch):
    from rlx_ref.backends import registry as breg
    from rlx_ref.ops.opdef import kinds

    table = {k: "all" for k in kinds()}
    results = [res(f"{k}-1", k, backend="fake") for k in kinds()]
    results.append(res("bad-1", "MatMul", "MISMATCH", backend="fake"))
    rfile = write(tmp_path, "r.json", results,
                  backends={"fake": {"emulated": False, "device": "x", "declared": table,
                                     "paths": {}}})
    out = {k: str(tmp_path / "docs" / f"op-coverage.{k}") for k in ("md", "json", "html")}
    flags = ["--out", out["md"], "--json", out["json"], "--html", out["html"]]
    fake = SimpleNamespace(supported_ops=lambda: table)
    monkeypatch.setattr(breg, "get_backend", lambda name: fake)

    assert report.main_coverage([rfile, *flags, "--junit", str(tmp_path / "j.xml")]) == 0
    assert ET.parse(tmp_path / "j.xml").getroot().get("failures") == "1"
    assert json.loads(open(out["json"]).read())["glance"][0]["failing"] == 1
    page = _Nesting()                 # every real OpDef doc, escaped into a well-formed page
    page.feed(open(out["html"]).read())
    assert page.errors == [] and page.stack == []
    assert report.main_coverage([rfile, *flags, "--check"]) == 0

    with open(out["html"], "a") as f:
        f.write("<!-- edited -->")
    assert report.main_coverage([rfile, *flags, "--check"]) == 1

    def unloadable(name):
        raise RuntimeError("no such device")
    monkeypatch.setattr(breg, "get_backend", unloadable)
    assert report.main_coverage([rfile, *flags]) == 0
    assert report.main_coverage([rfile, *flags, "--check"]) == 1


def test_cli_check_reports_an_unloadable_backend(tmp_path, monkeypatch, capsys):
    from rlx_ref.backends import registry as breg

    def unloadable(name):
        raise RuntimeError("no such device")
    monkeypatch.setattr(breg, "get_backend", unloadable)
    rfile = write(tmp_path, "r.json", every_kind())
    assert report.main_coverage([rfile, "--out", str(tmp_path / "m.md"), "--check"]) == 1
    err = capsys.readouterr().err
    assert "backend 'ref' cannot be loaded" in err and "no such device" in err


def test_json_and_html_go_beside_the_markdown_by_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)                 # a stray write to docs/ would land here
    rfile = write(tmp_path, "r.json", [res("MatMul-1", "MatMul")])
    out = tmp_path / "site" / "cov.md"
    assert report.main_coverage([rfile, "--out", str(out)]) == 0
    assert {p.name for p in out.parent.iterdir()} == {"cov.md", "cov.json", "cov.html"}
    assert not (tmp_path / "docs").exists()
