"""RLX's pass fixtures as data: every ``tests/fixtures/fusion/*.rlx`` holds an input graph,
``// RUN: pass, pass`` (``pass_by_name`` names, applied in order) and the ``// EXPECT``ed
graph; running the passes must give that graph (compared structurally, node naming
ignored, as RLX's runner does). Five files reproduce RLX's own fixtures; the rest cover
each pattern pass, positive and declined. Also: every fixture's output computes what its
input computes on the oracle, and the compile pipeline fuses only for a native claim."""
from pathlib import Path

import numpy as np
import pytest

from rlx_ref import DType, Graph, interpret
from rlx_ref.backends.base import Backend
from rlx_ref.backends.registry import get_backend
from rlx_ref.ir.text import parse
from rlx_ref.ir.verify import verify_or_raise
from rlx_ref.passes import compile_pipeline
from rlx_ref.passes.fuse_patterns import FUSIONS, fusions_for
from rlx_ref.passes.pass_registry import PASS_BY_NAME, pass_by_name, run_passes
from rlx_ref.passes._rewrite import PassLog, SupportTable
from rlx_ref.passes.unfuse_composites import KINDS as FUSED_KINDS

FIXTURES = Path(__file__).parent / "fixtures" / "fusion"
FILES = sorted(FIXTURES.glob("*.rlx"))
RLX_FIXTURES = ("lower_fma.rlx", "lower_fma_chained.rlx", "lower_fma_noop.rlx",
                "matmul_bias_act.rlx", "pipeline_two_passes.rlx")
PATTERN_PASSES = tuple(n for n in PASS_BY_NAME if n.startswith("fuse_"))


def load(path: Path):
    """``(passes, input graph, expected graph)`` of one fixture file."""
    passes, head, tail, in_expected = [], [], [], False
    for line in path.read_text().splitlines():
        t = line.strip()
        if t.startswith("// RUN:"):
            passes += [p.strip() for p in t[len("// RUN:"):].split(",") if p.strip()]
            continue
        if t == "// EXPECT":
            in_expected = True
            continue
        (tail if in_expected else head).append(line)
    assert passes, f"{path.name}: no `// RUN:` directive"
    assert in_expected, f"{path.name}: no `// EXPECT` section"
    return passes, parse("\n".join(head)), parse("\n".join(tail))


def semantic(g: Graph):
    """What the comparison sees: ops, operands, shapes and outputs (no names)."""
    return [(n.op, tuple(n.inputs), n.shape) for n in g.nodes], list(g.outputs)


def feeds(graph: Graph, rng):
    """Random values for every Input and Param, by name (masks as 0/1)."""
    inputs, params = {}, {}
    for n in graph.nodes:
        if n.kind not in ("Input", "Param"):
            continue
        dims = n.shape.static_dims()
        if n.attrs.name == "mask":
            v = (rng.random(dims) > 0.3).astype(n.shape.dtype.np)
        else:
            v = rng.uniform(-1, 1, dims).astype(n.shape.dtype.np)
        (inputs if n.kind == "Input" else params)[n.attrs.name] = v
    return inputs, params


def test_fixtures_exist_and_include_rlx_own():
    names = {p.name for p in FILES}
    assert set(RLX_FIXTURES) <= names
    # one positive and one declined fixture for every pattern pass
    for name in PATTERN_PASSES:
        runs = [p for p in FILES if name in load(p)[0]]
        assert any("declined" in p.name for p in runs), name
        assert any("declined" not in p.name for p in runs), name


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_fixture_gives_expected_graph(path):
    passes, graph, want = load(path)
    got = run_passes(graph, passes)
    verify_or_raise(got)
    assert semantic(got) == semantic(want), \
        f"{path.name}: `{', '.join(passes)}` gave\n{got}\nwanted\n{want}"
    if "declined" in path.name or "noop" in path.name:
        assert semantic(got) == semantic(graph)
    else:
        assert semantic(got) != semantic(graph)


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_fixture_output_computes_the_input(path):
    passes, graph, _ = load(path)
    got = run_passes(graph, passes)
    inputs, params = feeds(graph, np.random.default_rng(11))
    before = interpret(graph, inputs, params)
    after = interpret(got, inputs, params)
    for a, b in zip(before, after):
        # concatenated weights may take another summation order: a few ulps of f32
        np.testing.assert_allclose(b, a, rtol=2e-5, atol=2e-6)


def test_pass_by_name_knows_rlx_names_and_refuses_others():
    assert pass_by_name("lower_fma") is PASS_BY_NAME["lower_fma"]
    for name in ("fuse_matmul_bias_act", "fuse_residual_ln", "fuse_residual_rms_norm",
                 "fuse_swiglu", "fuse_swiglu_dual_matmul", "fuse_attention_block",
                 "fuse_transformer_layer", "fuse_conv_bias_act", "fuse_gated_residual",
                 "fuse_ada_layer_norm", "mark_elementwise_regions", "mark_transform_regions",
                 "fuse_region_prologue", "mark_batch_slice_regions", "fuse_batch_preprocess"):
        assert callable(pass_by_name(name))
    with pytest.raises(KeyError, match="unknown pass 'fuse_nothing'"):
        pass_by_name("fuse_nothing")


def test_a_pass_is_gated_on_the_claimed_dtype():
    _, graph, _ = load(FIXTURES / "matmul_bias_act.rlx")
    f64_only = SupportTable({"FusedMatMulBiasAct": [DType.F64]})
    assert semantic(pass_by_name("fuse_matmul_bias_act")(graph, f64_only)) == semantic(graph)
    log = PassLog()
    fused = pass_by_name("fuse_matmul_bias_act")(graph, SupportTable(None), log)
    assert [n.kind for n in fused.nodes][-1] == "FusedMatMulBiasAct"
    assert "fused into FusedMatMulBiasAct" in log.rewritten["MatMul"]


def test_region_passes_need_the_claim():
    _, graph, want = load(FIXTURES / "mark_transform_regions.rlx")
    bare = SupportTable({"ResizeNearest2x": "all"})
    assert semantic(pass_by_name("mark_transform_regions")(graph, bare)) == semantic(graph)
    with_claim = SupportTable({"ResizeNearest2x": "all", "TransformRegion": "all"})
    got = pass_by_name("mark_transform_regions")(graph, with_claim)
    assert semantic(got) == semantic(want)


# ── the compile pipeline ──────────────────────────────────────────────────

class ClaimBackend(Backend):
    """Only a table: ``native`` kinds and kinds claimed through their decomposition."""

    name = "claims"

    def __init__(self, native, decomposed=()):
        self.native, self.decomposed = set(native), set(decomposed)

    def supported_ops(self):
        return {k: "all" for k in self.native | self.decomposed}

    def paths(self):
        return {k: "decomposed" if k in self.decomposed else "native"
                for k in self.native | self.decomposed}


PRIMS = ("Input", "Param", "Constant", "MatMul", "Binary", "Activation", "Expand")


def _kinds(g):
    return [n.kind for n in g.nodes]


def test_pipeline_fuses_only_for_a_native_claim():
    _, graph, _ = load(FIXTURES / "matmul_bias_act.rlx")
    native, _ = compile_pipeline(graph, ClaimBackend(PRIMS + ("FusedMatMulBiasAct",)))
    assert "FusedMatMulBiasAct" in _kinds(native) and "MatMul" not in _kinds(native)
    plain, _ = compile_pipeline(graph, ClaimBackend(PRIMS))
    assert "FusedMatMulBiasAct" not in _kinds(plain) and "MatMul" in _kinds(plain)
    # claimed only through its decomposition: not created (decompose would undo it)
    via, _ = compile_pipeline(graph, ClaimBackend(PRIMS, ("FusedMatMulBiasAct",)))
    assert "FusedMatMulBiasAct" not in _kinds(via)
    assert semantic(via) == semantic(plain)


def test_pipeline_unfuses_an_unclaimed_fused_input_without_refusing_it():
    _, _, fused = load(FIXTURES / "matmul_bias_act.rlx")
    g, _ = compile_pipeline(fused, ClaimBackend(PRIMS, ("FusedMatMulBiasAct",)))
    assert "FusedMatMulBiasAct" not in _kinds(g)
    assert {"MatMul", "Binary", "Activation"} <= set(_kinds(g))


def test_fusions_for_follows_the_claims(monkeypatch):
    monkeypatch.delenv("RLX_ENABLE_FUSE_TRANSFORMER_LAYER", raising=False)
    everything = SupportTable(None)
    assert fusions_for(everything) == [n for n, _ in FUSIONS if n != "fuse_transformer_layer"]
    monkeypatch.setenv("RLX_ENABLE_FUSE_TRANSFORMER_LAYER", "1")
    assert "fuse_transformer_layer" in fusions_for(everything)
    assert fusions_for(SupportTable({"FusedSwiGLU": "all", "MatMul": "all"})) == \
        ["fuse_swiglu_dual_matmul", "fuse_swiglu"]
    assert fusions_for(SupportTable({"MatMul": "all"})) == []


@pytest.mark.parametrize("name", ["fuse_transformer_layer.rlx", "fuse_swiglu_dual_matmul.rlx",
                                  "fuse_ada_layer_norm.rlx", "fuse_conv_bias_act.rlx",
                                  "fuse_gated_residual.rlx"])
def test_reference_fuses_and_computes_the_unfused_graph(name, monkeypatch):
    monkeypatch.setenv("RLX_ENABLE_FUSE_TRANSFORMER_LAYER", "1")
    _, graph, want = load(FIXTURES / name)
    reference = get_backend("reference")
    fused, _ = compile_pipeline(graph, reference)
    made = {n.kind for n in want.nodes} & set(FUSED_KINDS)
    assert made and made <= set(_kinds(fused))
    # numba-cpu gets the fused kinds it has kernels for, primitives for the rest
    numba = get_backend("numba-cpu")
    native = {k for k in FUSED_KINDS if SupportTable.of(numba).claims_kind(k)}
    compiled, _ = compile_pipeline(graph, numba)
    assert made & native <= set(_kinds(compiled))
    assert set(_kinds(compiled)) & set(FUSED_KINDS) <= native
    inputs, params = feeds(graph, np.random.default_rng(5))
    want_values = interpret(graph, inputs, params)
    for g in (fused, compiled):
        for a, b in zip(want_values, interpret(g, inputs, params)):
            np.testing.assert_allclose(b, a, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name", ["fuse_swiglu_dual_matmul.rlx", "fuse_gated_residual.rlx",
                                  "fuse_residual_rms_norm.rlx"])
def test_numba_cpu_runs_the_fused_kinds_it_claims(name):
    from rlx_ref import Session

    _, graph, want = load(FIXTURES / name)
    cg = Session("numba-cpu").compile(graph)
    made = {n.kind for n in want.nodes} & set(FUSED_KINDS)
    assert made <= set(_kinds(compile_pipeline(graph, get_backend("numba-cpu"))[0]))
    inputs, params = feeds(graph, np.random.default_rng(3))
    for k, v in params.items():
        cg.set_param(k, v)
    for a, b in zip(interpret(graph, inputs, params), cg.run(inputs)):
        np.testing.assert_allclose(b, a, rtol=2e-5, atol=2e-6)
