"""rlx_ref.trace and `rlx-ref explain`: one record per node, bodies per call, table and page."""
import re

import numpy as np
import pytest

import rlx_ref
from rlx_ref.cli import main
from rlx_ref.explain.corpus import all_graphs, example_graphs, text_graphs
from rlx_ref.explain.feeds import random_feeds
from rlx_ref.explain.render import html_page, text_lines
from rlx_ref.explain.tracing import TraceInputError
from rlx_ref.ir.graph import Graph
from rlx_ref.ops.opdef import get
from rlx_ref.ops.single import single_op_graph


def _chain():
    g = Graph("chain")
    x = g.input("x", [2, 3])
    y = g.activation("Log", x)               # NaN for negatives, -inf at zero
    z = g.mul(y, x)
    g.set_outputs([z])
    return g


X = np.array([[1.0, -2.0, 0.0], [4.0, 0.5, -1.0]], np.float32)


def test_one_record_per_node_with_shapes_values_and_doc():
    g = _chain()
    tr = rlx_ref.trace(g, {"x": X})
    assert [r.node_id for r in tr] == [0, 1, 2] and tr.error is None
    assert [r.text for r in tr] == [str(n) for n in g.nodes]
    log = tr[1]
    assert log.inputs == [("[2, 3]", "f32")] and (log.out_shape, log.out_dtype) == ("[2, 3]",
                                                                                    "f32")
    with np.errstate(all="ignore"):
        want = np.log(X)
    s = log.summary
    finite = want[np.isfinite(want)]
    assert (s.nan, s.inf, s.zeros) == (2, 1, 1)
    assert s.min == pytest.approx(finite.min()) and s.max == pytest.approx(finite.max())
    assert s.mean == pytest.approx(finite.mean())
    assert s.first[:2] == (0.0, pytest.approx(np.nan, nan_ok=True))
    assert log.doc and get("Activation").doc.startswith(log.doc.split(" (Log:")[0])
    assert "Log:" in log.doc                     # the chosen function's formula line
    np.testing.assert_array_equal(tr.outputs[0], rlx_ref.interpret(g, {"x": X})[0])


def test_missing_inputs_name_each_with_its_shape():
    g = Graph("two")
    g.set_outputs([g.add(g.input("a", [3], "f64"), g.param("w", [3], "f64"))])
    with pytest.raises(TraceInputError, match=r"input 'a' \[3\] f64.*param 'w' \[3\] f64"):
        rlx_ref.trace(g, {})


def _while_sample():
    s = get("While").samples(np.random.default_rng(0))[0]
    g = single_op_graph("While", s.attrs, s.inputs, s.out)
    return g, {f"x{i}": a for i, a in enumerate(s.inputs)}


def test_nested_bodies_are_traced_per_call_up_to_the_bound():
    g, feeds = _while_sample()
    full = rlx_ref.trace(g, feeds, max_iterations=100)
    calls = {r.iteration for r in full if r.body == "body"}
    assert len(calls) >= 2 and not [r for r in full if r.elided]
    cut = rlx_ref.trace(g, feeds, max_iterations=1)
    assert {r.iteration for r in cut if r.body == "body" and not r.elided} == {0}
    elided = {r.body: r.elided for r in cut if r.elided}
    assert elided["body"] == len(calls) - 1
    assert all(r.path.startswith("%2/@") and r.depth == 1 for r in cut if r.body)
    loop = next(r for r in cut if r.kind == "While" and not r.elided)
    assert cut.records.index(loop) < min(i for i, r in enumerate(cut.records) if r.body)
    np.testing.assert_array_equal(cut.outputs[0], full.outputs[0])


def test_a_failing_node_is_recorded_and_the_run_stops():
    g = Graph("bad")
    t = g.input("t", [3])
    g.set_outputs([g.gather(t, g.input("i", [1], "i64"), axis=0)])
    feeds = {"t": np.ones(3, np.float32), "i": np.array([7])}
    with pytest.raises(rlx_ref.InterpretError):
        rlx_ref.trace(g, feeds)
    tr = rlx_ref.trace(g, feeds, raise_errors=False)
    assert tr.error and tr.outputs is None and tr[-1].error and tr[-1].kind == "Gather"
    assert "run failed" in text_lines(tr)[-1]


def test_text_table_is_plain_unless_coloured():
    tr = rlx_ref.trace(_chain(), {"x": X})
    plain = "\n".join(text_lines(tr))
    assert "\x1b[" not in plain and "%1  Activation" in plain and "nan 2" in plain
    assert "\x1b[" in "\n".join(text_lines(tr, color=True))


def test_html_page_is_self_contained():
    page = html_page(rlx_ref.trace(_chain(), {"x": X}))
    assert page.startswith("<!DOCTYPE html>") and "<style>" in page
    assert not re.search(r"\b(src|href)=|<script|@import|url\(", page)
    assert page.count("<tr class=") == 3 and "&quot;Activation&quot;" in page


def _graph_file(tmp_path):
    path = tmp_path / "g.rlx"
    path.write_text(_chain().to_text())
    return path


def test_cli_explain_with_an_input_file_and_html(tmp_path, capsys):
    path = _graph_file(tmp_path)
    np.save(tmp_path / "x.npy", X)
    out = tmp_path / "out.html"
    assert main(["explain", str(path), "--input", f"x={tmp_path / 'x.npy'}",
                 "--html", str(out)]) == 0
    text = capsys.readouterr().out
    assert "trace of @chain" in text and "%2  Binary" in text and "\x1b[" not in text
    assert out.read_text().startswith("<!DOCTYPE html>")


def test_cli_explain_names_a_missing_input_and_offers_random_inputs(tmp_path, capsys):
    path = _graph_file(tmp_path)
    assert main(["explain", str(path)]) == 2
    err = capsys.readouterr().err
    assert "input 'x' [2, 3] f32" in err and "--random-inputs SEED" in err
    assert main(["explain", str(path), "--random-inputs", "3", "--color", "always"]) == 0
    assert "\x1b[" in capsys.readouterr().out


def test_random_feeds_are_seeded_and_respect_index_operands():
    g = Graph("lookup")
    t, i = g.input("t", [2, 4]), g.input("i", [5], "f32")
    g.set_outputs([g.gather(t, i, axis=0)])
    a, _ = random_feeds(g, 7)
    b, _ = random_feeds(g, 7)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert set(np.unique(a["i"])) <= {0.0, 1.0} and a["i"].dtype == np.float32


def test_corpus_covers_docs_fixtures_and_examples():
    labels = [e.label for e in all_graphs()]
    assert any(x.startswith("docs/ops.md#") for x in labels)
    assert any(x.startswith("docs/ir.md#") for x in labels)
    assert any(x.startswith("tests/fixtures/") for x in labels)
    stems = {x.split(":")[0] for x in labels if x.startswith("examples/")}
    assert stems == {f"examples/{n}.py" for n in ("dsl_quickstart", "gguf_llama", "train_mlp",
                                                  "train_transformer")}


@pytest.mark.parametrize("entry", text_graphs() + example_graphs(), ids=lambda e: e.label)
def test_every_docs_and_examples_graph_explains(entry):
    g = entry.load()
    inputs, params = random_feeds(g, 0, None, entry.params)
    tr = rlx_ref.trace(g, inputs, params)
    assert len(tr.top()) == len(g) and tr.outputs is not None
    assert html_page(tr).count("<tr class=") == len(tr)


def test_cli_explain_reads_an_example_script_with_its_params(capsys):
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    script = str(root / "examples/dsl_quickstart.py")
    assert main(["explain", script]) == 2              # x is missing; params come along
    err = capsys.readouterr().err
    assert "needs input 'x' [4, 8] f32:" in err          # and no param
    assert main(["explain", str(root / "examples/train_mlp.py"), "--graph", "1",
                 "--random-inputs", "0", "--max-iterations", "0"]) == 0
    captured = capsys.readouterr()
    assert "trace of @" in captured.out and "1: train_step" in captured.err


def test_trace_and_diff_load_lazily():
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = ("import sys, rlx_ref; assert 'rlx_ref.explain' not in sys.modules; "
            "assert callable(rlx_ref.trace) and callable(rlx_ref.diff)")
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root,
                   env={**os.environ, "PYTHONPATH": str(root)})


def test_cli_explain_reads_a_markdown_page_graph(capsys):
    from pathlib import Path

    page = Path(__file__).resolve().parents[1] / "docs/ir.md"
    assert main(["explain", str(page), "--random-inputs", "0"]) == 0
    assert "(ran as [3, 8])" in capsys.readouterr().out       # ?0 bound to DYN_SIZE


class _Tty:
    def isatty(self):
        return True


def test_no_color_turns_off_auto_colour_but_not_always():
    from rlx_ref import env_registry
    from rlx_ref.explain.render import use_color
    with env_registry.overrides(NO_COLOR=""):
        assert use_color(_Tty(), "auto")
    with env_registry.overrides(NO_COLOR="1"):
        assert not use_color(_Tty(), "auto")
        assert use_color(_Tty(), "always")
    assert not use_color(_Tty(), "never")
