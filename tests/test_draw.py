"""Graph drawings: clusters for fused regions and nested bodies, labels, the CLI, the
Jupyter reprs and the errors when Graphviz is missing; drawings of every graph in docs/,
tests/fixtures/ and the examples."""
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

import rlx_ref
from rlx_ref.draw import DrawError, draw_svg
from rlx_ref.draw._dot import build
from rlx_ref.ir.graph import Graph
from rlx_ref.ir.text import parse
from rlx_ref.ops.opdef import get
from rlx_ref.ops.region import Input, Step, activation, binary, encode_region

try:
    import graphviz
except ImportError:             # the docs extra is not installed: only the error paths run
    graphviz = None

ROOT = Path(__file__).resolve().parents[1]
NEEDS_PACKAGE = pytest.mark.skipif(graphviz is None, reason="pip install 'rlx_ref[docs]'")
NEEDS_DOT = pytest.mark.skipif(graphviz is None or shutil.which("dot") is None,
                               reason="needs the graphviz package and Graphviz's dot "
                                      "(apt-get install graphviz)")


def _svg_root(svg: str):
    return ET.fromstring(svg)           # raises on malformed XML


def _clusters(svg: str) -> int:
    ns = "{http://www.w3.org/2000/svg}"
    return sum(1 for g in _svg_root(svg).iter(f"{ns}g") if g.get("class") == "cluster")


def hand_built() -> Graph:
    """Two fused nodes (a region, a FusedMatMulBiasAct) and an If with two bodies."""
    g = Graph("handmade")
    x = g.input("x", [2, 4], "f32")
    w = g.param("w", [4, 3], "f32")
    b = g.param("b", [3], "f32")
    chain = [binary("Add", Input(0), Input(1)), activation("Relu", Step(0))]
    shapes = [g.shape(x), g.shape(x)]
    r = g.op("ElementwiseRegion", [x, x], encode_region(chain, shapes))
    m = g.op("FusedMatMulBiasAct", [r, w, b], activation="Gelu")
    if_sample = get("If").samples(np.random.default_rng(0))[0]
    pred = g.input("p", [], "bool")
    then_b = if_sample.attrs.then_branch
    operands = [g.input(f"a{i}", n.shape.dims, n.shape.dtype)
                for i, n in enumerate(then_b.input_nodes())]
    c = g.op("If", [pred, *operands], if_sample.attrs)
    g.set_outputs([m, c])
    return g


@NEEDS_DOT
def test_clusters_equal_fused_regions_and_bodies():
    g = hand_built()
    dot, drawer = build(g)
    assert (drawer.fused_clusters, drawer.body_clusters) == (2, 2)
    svg = draw_svg(g)
    assert _clusters(svg) == 4
    for kind in ("Binary", "Activation", "MatMul", "Expand", "If", "then_branch",
                 "else_branch", "ElementwiseRegion", "FusedMatMulBiasAct"):
        assert kind in svg, kind
    assert "[2, 4] f32" in svg and "[2, 3] f32" in svg       # shapes on edges
    assert "input x" in svg and "param w" in svg
    flat, flat_drawer = build(g, expand_fused=False)
    assert (flat_drawer.fused_clusters, flat_drawer.body_clusters) == (0, 2)
    assert _clusters(draw_svg(g, expand_fused=False)) == 2


@NEEDS_PACKAGE
def test_roles_are_styled_apart():
    src = build(hand_built())[0].source
    assert "shape=ellipse" in src and "shape=cylinder" in src      # inputs, params
    assert "peripheries=2" in src                                  # outputs


@NEEDS_DOT
def test_public_api_is_lazy_and_callable():
    g = hand_built()
    assert isinstance(rlx_ref.draw(g), graphviz.Digraph)
    assert isinstance(rlx_ref.draw.draw(g), graphviz.Digraph)
    assert rlx_ref.draw_svg(g).lstrip().startswith("<?xml")
    code = "import sys, rlx_ref; print('graphviz' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


@NEEDS_DOT
def test_repr_svg_and_html():
    g = hand_built()
    assert _clusters(g._repr_svg_()) == 4
    assert g._repr_html_().lstrip().startswith("<?xml")


def test_missing_graphviz_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)       # import now fails
    g = hand_built()
    with pytest.raises(DrawError, match=r"docs\] .*extra|docs extra"):
        draw_svg(g)
    assert g._repr_svg_() is None
    html = g._repr_html_()
    assert html.startswith("<pre>") and "graph @handmade" in html and "&quot;" in html


@NEEDS_PACKAGE
def test_missing_dot_binary(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(DrawError, match="apt-get install graphviz.*brew install graphviz"):
        draw_svg(hand_built())
    assert hand_built()._repr_svg_() is None
    assert hand_built()._repr_html_().startswith("<pre>graph @handmade")


def _cli(capsys, *args):
    """``rlx-ref draw ARGS`` in this process: (exit code, stdout, stderr); an exception
    escaping ``main`` (a traceback for the user) fails the test."""
    from rlx_ref.cli import main

    rc = main(["draw", *args])
    out, err = capsys.readouterr()
    return rc, out, err


CHAIN = """graph @chain {
  %0 = {"Input":{"name":"x"}} : [4, 8] f32
  %1 = {"Input":{"name":"y"}} : [8] f32
  %2 = {"Binary":"Add"}(%0, %1) : [4, 8] f32
  %3 = {"Activation":"Relu"}(%2) : [4, 8] f32
  %4 = {"Activation":"Exp"}(%3) : [4, 8] f32
  return %4
}
"""


@NEEDS_DOT
def test_cli_draws_before_and_after_passes(tmp_path, capsys):
    src = tmp_path / "chain.rlx"
    src.write_text(CHAIN)
    rc, out, err = _cli(capsys, str(src), "-o", str(tmp_path / "plain.svg"))
    assert rc == 0, err
    assert _clusters((tmp_path / "plain.svg").read_text()) == 0
    rc, out, err = _cli(capsys, str(src), "-o", str(tmp_path / "passes.svg"), "--passes",
                        "--backend", "numba-cpu")
    assert rc == 0, err
    assert "after the numba-cpu passes" in out and "1 fused region" in out
    assert _clusters((tmp_path / "passes.svg").read_text()) == 1
    rc, out, err = _cli(capsys, str(src), "-o", str(tmp_path / "g.dot"))
    assert rc == 0 and (tmp_path / "g.dot").read_text().startswith("//")
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]   # atomic


@NEEDS_DOT
def test_cli_draws_the_chosen_graph_of_a_file_with_several(tmp_path, capsys):
    src = tmp_path / "two.rlx"
    src.write_text(CHAIN + "\n// EXPECT\n" + CHAIN.replace("@chain", "@second"))
    rc, out, err = _cli(capsys, str(src), "-o", str(tmp_path / "a.svg"))
    assert rc == 0 and "@chain" in out and "holds 2 graphs" in err
    rc, out, err = _cli(capsys, str(src), "--graph", "1", "-o", str(tmp_path / "b.svg"))
    assert rc == 0 and "@second" in out and "@second" in (tmp_path / "b.svg").read_text()
    rc, out, err = _cli(capsys, str(src), "--graph", "2")
    assert rc == 2 and "--graph 2 is out of range (0..1)" in err


@NEEDS_PACKAGE
def test_cli_errors_are_messages_not_tracebacks(tmp_path, capsys, monkeypatch):
    src = tmp_path / "chain.rlx"
    src.write_text(CHAIN)
    rc, out, err = _cli(capsys, str(src), "--passes", "--backend", "no-such-backend")
    assert rc == 2 and "unknown backend" in err
    rc, out, err = _cli(capsys, str(tmp_path / "missing.rlx"))
    assert rc == 2 and "missing.rlx" in err
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    rc, out, err = _cli(capsys, str(src), "-o", str(tmp_path / "x.svg"))
    assert rc == 2
    assert "dot` program was not found" in err and "apt-get install graphviz" in err
    assert "brew install graphviz" in err and "conda" in err
    assert not (tmp_path / "x.svg").exists()
    monkeypatch.setitem(sys.modules, "graphviz", None)
    rc, out, err = _cli(capsys, str(src), "-o", str(tmp_path / "x.svg"))
    assert rc == 2 and "pip install 'rlx_ref[docs]'" in err and "docs extra" in err


def _graphs_in(path: Path) -> list:
    """Every graph in a .rlx file (fixtures hold an input and an ``// EXPECT`` graph)."""
    return [parse(part) for part in path.read_text().split("// EXPECT") if "graph @" in part]


RLX_FILES = sorted(ROOT.glob("docs/**/*.rlx")) + sorted(ROOT.glob("tests/fixtures/**/*.rlx"))


@NEEDS_DOT
def test_every_rlx_file_draws():
    assert RLX_FILES
    for path in RLX_FILES:
        for g in _graphs_in(path):
            svg = draw_svg(g)
            _svg_root(svg)
            assert f"@{g.name}" in svg, path


def _example_graphs() -> list:
    import runpy

    from rlx_ref.models import llama as L
    from rlx_ref.training.models import mlp_classifier, transformer_lm
    from rlx_ref.training.optim import SGD, train_step

    quick = runpy.run_path(str(ROOT / "examples/dsl_quickstart.py"))["graph"]
    mlp, params = mlp_classifier(batch=4)
    lm, _ = transformer_lm(batch=2, seq=4, vocab=8, d_model=8, layers=1)
    cfg = L.LlamaConfig(vocab=16, dim=32, layers=1, heads=2, kv_heads=1, ffn=64)
    return [quick, mlp, train_step(mlp, list(params), SGD(lr=0.1)), lm,
            L.build_graph(cfg, 4)]


@NEEDS_DOT
def test_example_graphs_draw(capsys):
    for g in _example_graphs():
        svg = draw_svg(g)
        _svg_root(svg)
        assert len(build(g)[0].body) >= len(g)
