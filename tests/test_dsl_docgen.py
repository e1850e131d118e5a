"""docs/dsl.md is current and lists what a DSL node answers; op pages show hand-checked samples."""
from pathlib import Path

import numpy as np

import rlx_ref
from rlx_ref.docgen import example_sample, render
from rlx_ref.dsl_docgen import render_dsl
from rlx_ref.ir.builder import snake

ROOT = Path(__file__).resolve().parents[1]


def test_dsl_md_is_up_to_date():
    assert (ROOT / "docs/dsl.md").read_text() == render_dsl(), \
        "docs/dsl.md is stale: run `rlx-ref docs`"


def test_dsl_page_lists_every_method_dir_shows():
    text = render_dsl()
    with rlx_ref.graph("m", verify=False) as g:
        x = g.input("x", [2, 2])
    public = [n for n in dir(x) if not n.startswith("_")]
    missing = [n for n in public if f"`{n}" not in text]
    assert not missing, f"documented nowhere: {missing}"
    assert "`x % y` appends `%2 = {\"Binary\":\"Mod\"}" in text
    assert "[LayerNorm](ops.md#layernorm)" in text


def test_op_page_uses_the_hand_checkable_sample():
    d = rlx_ref.opdef("LayerNorm")
    samples = d.samples(np.random.default_rng(0))
    chosen = example_sample(samples)
    assert chosen.expect is not None and samples[0].expect is None
    section = render().split("\n### LayerNorm\n", 1)[1].split("\n### ", 1)[0]
    assert "Expected by hand" in section
    assert snake("LayerNorm") == "layer_norm"


def test_docs_check_covers_both_pages(tmp_path, capsys):
    from rlx_ref.cli import main

    out = tmp_path / "ops.md"
    assert main(["docs", "--out", str(out)]) == 0
    assert (tmp_path / "dsl.md").read_text() == render_dsl()
    (tmp_path / "dsl.md").write_text("stale\n")
    assert main(["docs", "--out", str(out), "--check"]) == 1
    assert "dsl.md is stale" in capsys.readouterr().err
