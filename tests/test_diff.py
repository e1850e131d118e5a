"""rlx_ref.diff and `rlx-ref diff`: the first node where a backend departs from the oracle."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rlx_ref
from rlx_ref.cli import main
from rlx_ref.explain.corpus import example_graphs, text_graphs
from rlx_ref.explain.differ import DiffError
from rlx_ref.explain.feeds import random_feeds
from rlx_ref.ir.graph import Graph

ROOT = Path(__file__).resolve().parents[1]
RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 4)).astype(np.float32)


def _graph(middle: str) -> tuple[Graph, int]:
    """x*x -> <middle> -> + x -> sum over rows: the middle node's id is returned too."""
    g = Graph("chain")
    x = g.input("x", [3, 4])
    y = g.mul(x, x)
    if middle == "Cumsum":
        m = g.op("Cumsum", (y,), axis=1, exclusive=False)
    else:
        m = g.activation(middle, y)
    z = g.add(m, x)
    g.set_outputs([g.reduce(z, "Max", [1])])
    return g, m


def _repro_run(folder) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, str(Path(folder) / "repro.py")], env=env,
                          capture_output=True, text=True, timeout=120)


def test_broken_activation_is_found_at_its_node_with_a_repro(tmp_path):
    """``broken`` zeroes an Activation's elements past the last block of 8 (12 -> 4 lost)."""
    g, mid = _graph("Tanh")
    r = rlx_ref.diff(g, {"x": X}, backend="broken", repro_dir=tmp_path)
    assert not r.ok and r.mode == "exposed"
    assert (r.first.node_id, r.first.kind, r.first.how) == (mid, "Activation", "node")
    assert r.first.status in ("MISMATCH", "MISSING") and "over budget" in r.first.message
    assert [d.node_id for d in r.nodes] == [1, mid] and r.nodes[0].ok
    # the repro is the one op on the very values the backend fed it: x*x
    case = r.case
    assert case.op == "Activation" and np.array_equal(case.inputs["x0"], X * X)
    assert _repro_run(r.repro).returncode == 1
    assert "first departure: %2 Activation" in "\n".join(r.lines())


@pytest.mark.parametrize("fault", ["Reduce", "Binary"])
def test_broken_reduction_and_broadcast_are_found_mid_graph(fault):
    """``broken`` drops a Sum's last element; it aligns broadcast operands from the left."""
    g = Graph("mid")
    x, b = g.input("x", [2, 8]), g.input("b", [8])
    e = g.activation("Exp", g.mul(x, x))    # 16 elements: whole blocks, broken's Exp is right
    e = g.add(e, e)
    m = g.sum(e, [1]) if fault == "Reduce" else g.add(e, b)
    g.set_outputs([g.mul(m, m)])
    feeds = {"x": np.random.default_rng(1).standard_normal((2, 8)).astype(np.float32) / 4,
             "b": np.arange(8, dtype=np.float32)}
    r = rlx_ref.diff(g, feeds, backend="broken")
    assert (r.first.node_id, r.first.kind) == (m, fault)
    assert all(d.ok for d in r.nodes if d.node_id < m) and r.first.status != "ok"


def test_a_crashing_kernel_is_found_by_bisecting_prefixes(tmp_path):
    g, mid = _graph("Cumsum")                     # broken's Cumsum raises
    r = rlx_ref.diff(g, {"x": X}, backend="broken", repro_dir=tmp_path)
    assert r.mode == "bisect" and "every node exposed fails" in r.note
    assert (r.first.node_id, r.first.kind, r.first.status) == (mid, "Cumsum", "error")
    assert "planted defect" in r.first.message
    assert r.case.op == "Cumsum" and _repro_run(r.repro).returncode == 1


def test_the_oracle_as_a_backend_agrees_everywhere():
    g, _ = _graph("Tanh")
    r = rlx_ref.diff(g, {"x": X}, backend="reference", all_nodes=True)
    assert r.ok and r.first is None and len(r.nodes) == 4
    assert all(d.ok and d.contract for d in r.nodes)


def test_numba_cpu_agrees_and_a_planted_fused_fault_is_bisected():
    g = Graph("ew")
    x = g.input("x", [3, 5])
    z = g.add(g.activation("Tanh", g.mul(x, x)), x)
    g.set_outputs([z])
    xv = np.random.default_rng(2).standard_normal((3, 5)).astype(np.float32)
    assert rlx_ref.diff(g, {"x": xv}, backend="numba-cpu").ok
    # the fault sits in the fused region's step chaining: exposing every node hides it
    r = rlx_ref.diff(g, {"x": xv}, backend="numba-cpu+fault:ew-chain-step")
    assert r.mode == "bisect" and "plain graph's outputs depart" in r.note
    assert r.first.node_id == z and r.first.how == "chain"
    assert r.case.op.startswith("multi:") and r.case.graph.outputs == [z]


def test_missing_inputs_and_refused_graphs_are_clear_errors():
    g, _ = _graph("Tanh")
    with pytest.raises(ValueError, match=r"input 'x' \[3, 4\] f32"):
        rlx_ref.diff(g, {}, backend="reference")
    a = Graph("att")
    q = a.input("q", [1, 2, 4])
    a.set_outputs([a.attention(q, q, q, num_heads=1, head_dim=4, v_head_dim=None,
                               mask_kind="None", score_scale=None, attn_logit_softcap=None)])
    with pytest.raises(DiffError, match="broken refuses @att"):
        rlx_ref.diff(a, {"q": np.ones((1, 2, 4), np.float32)}, backend="broken")


def test_a_conformance_repro_offers_the_diff_command(tmp_path, capsys):
    from rlx_ref.backends.registry import get_backend
    from rlx_ref.conformance.cases import make_case
    from rlx_ref.conformance.ledger import Ledger
    from rlx_ref.conformance.runner import run_case

    g, mid = _graph("Tanh")
    case = make_case("multi:chain", "f32", g, {"x": X})
    res = run_case(get_backend("broken"), case, Ledger([]), repro_dir=tmp_path)
    assert res.repro
    script = (Path(res.repro) / "repro.py").read_text()
    line = "rlx-ref diff graph.rlx --backend broken --inputs inputs.npz"
    assert line in script
    cwd = os.getcwd()
    try:
        os.chdir(res.repro)
        rc = main(line.split()[1:] + ["--repro-dir", str(tmp_path / "diff")])
    finally:
        os.chdir(cwd)
    out = capsys.readouterr().out
    assert rc == 1 and f"first departure: %{mid} Activation" in out
    assert "repro: python " + str(tmp_path / "diff") in out


def test_cli_diff_on_a_fixture_with_random_inputs(capsys):
    path = ROOT / "tests/fixtures/fusion/matmul_bias_act.rlx"
    assert main(["diff", str(path), "--backend", "reference", "--random-inputs", "1"]) == 0
    captured = capsys.readouterr()
    assert "every node agrees" in captured.out and "holds 2 graphs" in captured.err


def _sample():
    """One graph of each source for numba-cpu (kernel compiles are slow on a cold cache;
    the whole set runs on the oracle as a backend above)."""
    pick = [e for e in text_graphs() if e.label in ("docs/ir.md#0", "docs/ops.md#2",
                                                    "tests/fixtures/fusion/matmul_bias_act.rlx#0")]
    return pick + [e for e in example_graphs() if e.label.endswith(":mlp")]


@pytest.mark.parametrize("entry", text_graphs() + example_graphs(), ids=lambda e: e.label)
def test_every_docs_and_examples_graph_diffs_on_the_oracle(entry):
    g = entry.load()
    inputs, params = random_feeds(g, 0, None, entry.params)
    r = rlx_ref.diff(g, inputs, params, backend="reference")
    assert r.ok, "\n".join(r.lines())


@pytest.mark.parametrize("entry", _sample(), ids=lambda e: e.label)
def test_docs_and_examples_graphs_diff_on_numba_cpu(entry):
    g = entry.load()
    inputs, params = random_feeds(g, 0, None, entry.params)
    r = rlx_ref.diff(g, inputs, params, backend="numba-cpu")
    assert r.ok, "\n".join(r.lines())


def test_a_kind_the_backend_does_not_claim_is_refused_by_name():
    entry = next(e for e in text_graphs() if e.text and "ScaledMatMul" in e.text)
    g = entry.load()
    inputs, params = random_feeds(g, 0)
    with pytest.raises(DiffError, match="numba-cpu refuses .*ScaledMatMul"):
        rlx_ref.diff(g, inputs, params, backend="numba-cpu")
