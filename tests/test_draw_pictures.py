"""The op pages' plots and diagrams: derivatives from grad agree with finite differences,
diagrams agree with the ops' written rules, output is deterministic and docs/ is current."""
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from rlx_ref.docgen import render_images
from rlx_ref.draw import diagrams as D
from rlx_ref.draw import diagrams_index as X
from rlx_ref.draw import diagrams_quant as Q
from rlx_ref.draw import pages, plots
from rlx_ref.draw.svg import num

ROOT = Path(__file__).resolve().parents[1]


def _near_kink(x: np.ndarray, kind: str) -> np.ndarray:
    """Points where a kind is not differentiable or finite differences are unreliable:
    half-integers (Relu, Abs, Sign, Round, Floor, Ceil, Elu, the Hard* corners at ±3)
    and Tan's poles."""
    near = np.abs(x * 2 - np.round(x * 2)) < 0.04
    if kind == "Tan":
        near |= np.abs(np.cos(x)) < 0.1
    return near


# Round's VJP is straight-through (dy, as RLX's ActivationBackward), not its derivative 0
STRAIGHT_THROUGH = {"Round"}


@pytest.mark.parametrize("kind", plots.activation_kinds())
def test_grad_derivative_matches_finite_differences(kind):
    lo, hi = plots.domain(kind)
    x = np.linspace(lo + 0.05, hi - 0.05, 37) + 0.0123
    x = x[~_near_kink(x, kind)]
    _, f, df = plots.activation_curves(kind, x)
    h = 1e-6
    fd = (plots.activation_curves(kind, x + h)[1] - plots.activation_curves(kind, x - h)[1])
    fd /= 2 * h
    if kind in STRAIGHT_THROUGH:
        np.testing.assert_array_equal(fd, 0.0)
        fd = np.ones_like(fd)
    assert np.all(np.isfinite(df)) and np.all(np.isfinite(f))
    np.testing.assert_allclose(df, fd, rtol=1e-5, atol=1e-5, err_msg=kind)


def test_plot_curve_is_the_oracle_table():
    from rlx_ref.ops.elementwise import ACTIVATIONS

    x, f, _ = plots.activation_curves("Gelu")
    np.testing.assert_allclose(f, ACTIVATIONS["Gelu"][1](x), rtol=1e-12)


def test_clipped_runs_break_at_poles_and_keep_steps():
    x = np.linspace(-1, 1, 9)
    with np.errstate(divide="ignore"):
        runs = plots.clipped_runs(x, 1 / x, -3.0, 3.0)
    assert len(runs) == 2 and all(abs(y) <= 3 + 1e-12 for r in runs for _, y in r)
    assert len(plots.clipped_runs(x, np.sign(x), -2.0, 2.0)) == 1
    assert plots.clipped_runs(x, np.full(9, np.nan), -1.0, 1.0) == []


def test_number_format_is_fixed():
    assert [num(v) for v in (1.5, 2.0, -0.001, 1 / 3, -12.345)] == \
        ["1.5", "2", "0", "0.33", "-12.35"]


def test_rope_pairs_follow_the_styles():
    neox = D.rope_partners("NeoX", 8, 6)
    gptj = D.rope_partners("GptJ", 8, 6)
    for i in range(3):
        assert neox[i] == (i + 3, i) and neox[i + 3] == (i, i)
        assert gptj[2 * i] == (2 * i + 1, i) and gptj[2 * i + 1] == (2 * i, i)
    assert neox[6:] == gptj[6:] == [None, None]


def test_attention_masks_and_gqa_follow_the_doc():
    s_q, s_k = 3, 5
    qi, ki = np.indices((s_q, s_k))
    limit = qi + max(s_k - s_q, 0)
    assert D.visible_keys("None", s_q, s_k).all()
    np.testing.assert_array_equal(D.visible_keys("Causal", s_q, s_k), ki <= limit)
    np.testing.assert_array_equal(D.visible_keys(("SlidingWindow", 1), s_q, s_k),
                                  (ki <= limit) & (ki >= limit - 1))
    assert D.kv_head_of(4, 2) == [0, 0, 1, 1]
    assert D.kv_head_of(6, 3) == [h // 2 for h in range(6)]


@pytest.mark.parametrize("stride,pad,dil", [(1, 1, 1), (2, 1, 2), (2, 0, 1)])
def test_conv_receptive_field_is_the_taps_inside_the_input(stride, pad, dil):
    o = (1, 0)
    taps = {(r - pad, c - pad) for r, c in D.conv_taps(3, stride, pad, dil, o)}
    inside = {(r, c) for r, c in taps if 0 <= r < 5 and 0 <= c < 5}
    assert D.receptive_field(5, 3, stride, pad, dil, o) == inside


def test_index_maps_follow_numpy():
    from rlx_ref.ops.indexing import GatherAttrs

    idx = np.array([2, 0, 3], np.float32)
    pairs = X.gather_map("Gather", GatherAttrs(1), (2, 4), idx)
    assert pairs == [((r, int(idx[c])), (r, c)) for r in range(2) for c in range(3)]
    pairs = X.scatter_map("ScatterAdd", None, (4, 2), np.array([2, 0, 2], np.float32),
                          (3, 2), data=False)
    assert sorted(pairs) == sorted(((i, j), (t, j)) for i, t in enumerate([2, 0, 2])
                                   for j in range(2))


def test_every_gguf_block_layout_is_drawn():
    schemes = Q.gguf_schemes()
    assert {"Q4_0", "Q8_0", "Q4_K", "Q6_K", "IQ4_NL"} <= {s.name for s in schemes}
    for sd in schemes:
        f = Q.block_fields(sd)
        assert f and sum(n for _, n, _ in f) == sd.block_bytes, sd.name
    assert "not drawn" not in Q.gguf_blocks()


def test_pictures_are_deterministic_well_formed_and_current():
    files = render_images()
    assert len(files) >= len(plots.activation_kinds()) + 9
    assert render_images() == files
    for rel, text in files.items():
        ET.fromstring(text)
        assert rel.startswith(pages.IMG_DIR + "/")
    assert pages.stale(ROOT / "docs", files) == [], "run `rlx-ref docs`"
    ops_md = (ROOT / "docs/ops.md").read_text()
    for rel in files:
        assert f"]({rel})" in ops_md, rel


def test_docs_check_flags_changed_and_extra_pictures(tmp_path, capsys):
    from rlx_ref.cli import main

    out = tmp_path / "ops.md"
    assert main(["docs", "--out", str(out)]) == 0
    assert main(["docs", "--out", str(out), "--check"]) == 0
    pic = tmp_path / pages.IMG_DIR / "activation-relu.svg"
    pic.write_text(pic.read_text().replace("Relu", "ReLU"))
    (tmp_path / pages.IMG_DIR / "orphan.svg").write_text("<svg/>")
    capsys.readouterr()
    assert main(["docs", "--out", str(out), "--check"]) == 1
    err = capsys.readouterr().err
    assert "activation-relu.svg is stale" in err and "orphan.svg is not generated" in err
    assert main(["docs", "--out", str(out)]) == 0
    assert not (tmp_path / pages.IMG_DIR / "orphan.svg").exists()
    assert main(["docs", "--out", str(out), "--check"]) == 0


def test_plot_view_is_clipped():
    lo, hi = plots.view(np.array([-100.0, 0.0]), np.array([math.inf, 1.0]))
    assert lo >= -plots.Y_LIMIT * 1.2 and hi < 2
