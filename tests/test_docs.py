"""Generated docs are current and the example runs."""
import runpy
from pathlib import Path

import pytest

from rlx_ref.docgen import render

ROOT = Path(__file__).resolve().parents[1]


def test_ops_md_is_up_to_date():
    assert (ROOT / "docs/ops.md").read_text() == render(), \
        "docs/ops.md is stale: run `rlx-ref docs`"


def test_every_kind_has_a_section():
    from rlx_ref.ops.opdef import kinds

    text = (ROOT / "docs/ops.md").read_text()
    for k in kinds():
        assert f"\n### {k}\n" in text


def test_dsl_quickstart_example_runs(capsys):
    runpy.run_path(str(ROOT / "examples/dsl_quickstart.py"), run_name="__main__")
    assert "max abs difference" in capsys.readouterr().out


@pytest.mark.parametrize("example,steps", [("train_mlp", 40), ("train_transformer", 30)])
def test_training_examples_run_and_learn(example, steps, capsys):
    """The examples run as their docstrings say (on the oracle here, a few steps)."""
    mod = runpy.run_path(str(ROOT / f"examples/{example}.py"))
    losses = mod["main"](["--device", "reference", "--steps", str(steps)])
    assert len(losses) == steps and losses[-1] < 0.7 * losses[0]
    assert f"step {steps:4d}  loss" in capsys.readouterr().out
