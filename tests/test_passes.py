"""The compile passes (rlx_ref/passes) and the pipeline around them: each pass on small
graphs, run before and after on the oracle; the decompositions on every registry sample of
each decomposed kind; fusion caps and the single-consumer rule; legalization errors; the
dispatch report and the environment variables that print it."""
import numpy as np
import pytest

from rlx_ref import DType, Graph, Shape, interpret
from rlx_ref.backends.base import Backend, UnsupportedOp
from rlx_ref.conformance.cases import build_cases
from rlx_ref.conformance.runner import _judge, oracle_outputs
from rlx_ref.ir.shape import Dyn
from rlx_ref.ops._control_bodies import make_body
from rlx_ref.ops.control import IfAttrs
from rlx_ref.ops.region import MAX_INPUTS, MAX_STEPS
from rlx_ref.passes import (DECOMPOSITIONS, LegalizeError, PassLog, PassVerifyError,
                            SupportTable, compile_pipeline, dead_code_elimination, decompose,
                            fold_constants, fuse_elementwise, legalize, unfuse_elementwise)
from rlx_ref.passes._rewrite import graph_pass
from rlx_ref.runtime.dispatch import dispatch_report
from rlx_ref.env_registry import flag, get
from rlx_ref.runtime.options import CompileOptions, FusionOptions

RNG = np.random.default_rng(7)
F32 = DType.F32
EW = ("Input", "Param", "Constant", "Activation", "Binary", "Compare", "Where", "Cast")


class TableBackend(Backend):
    """A backend that is only a declared table (and paths), for the passes to read."""

    def __init__(self, table, name="toy", paths=None, reasons=None):
        self.table, self.name = table, name
        self._paths, self._reasons = paths or {}, reasons or {}

    def supported_ops(self):
        return self.table

    def paths(self):
        return {k: self._paths.get(k, "native") for k in self.table}

    def path_reasons(self):
        return dict(self._reasons)


def claims(*kinds, **dtyped):
    table = {k: "all" for k in kinds}
    table.update(dtyped)
    return table


def feeds_for(graph):
    out = {}
    for n in graph.input_nodes():
        dims = n.shape.static_dims()
        if n.shape.dtype is DType.BOOL:
            out[n.attrs.name] = RNG.random(dims) > 0.5
        else:
            out[n.attrs.name] = (RNG.standard_normal(dims) * 3).astype(n.shape.dtype.np)
    return out


def same_values(got, want) -> bool:
    """Equal dtype, shape and values (NaN matches NaN; the sign of zero counts)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if got.dtype.kind in "iub":
        return np.array_equal(got, want)
    wide = np.complex128 if got.dtype.kind == "c" else np.float64
    g, w = got.astype(wide), want.astype(wide)
    nan = np.isnan(g)
    if not (nan == np.isnan(w)).all():
        return False
    g, w = np.where(nan, 0, g), np.where(nan, 0, w)
    return bool((g == w).all() and (np.signbit(g.real) == np.signbit(w.real)).all())


def assert_same_results(before, after, feeds=None):
    feeds = feeds if feeds is not None else feeds_for(before)
    want, got = interpret(before, feeds), interpret(after, feeds)
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert same_values(g, w), (g, w)


def kinds_of(graph):
    return [n.kind for n in graph.nodes]


# ── dead-code elimination ──────────────────────────────────────────────────

def test_dce_removes_dead_nodes_and_keeps_the_interface():
    g = Graph("main")
    x, w = g.input("x", [4]), g.param("w", [4])
    unused = g.input("unused", [2])
    dead = g.activation("Exp", g.add(x, w))
    y = g.mul(x, w)
    g.set_outputs([y])
    out = dead_code_elimination(g)
    assert kinds_of(out) == ["Input", "Param", "Input", "Binary"]
    assert out.nodes[out.outputs[0]].attrs.op == "Mul"
    assert (unused, dead) == (2, 4)
    feeds = {"x": np.arange(4, dtype=np.float32), "unused": np.zeros(2, np.float32)}
    params = {"w": np.full(4, 2, np.float32)}
    assert same_values(interpret(out, feeds, params)[0], interpret(g, feeds, params)[0])


def test_dce_returns_the_same_graph_when_nothing_is_dead():
    g = Graph("main")
    x = g.input("x", [3])
    g.set_outputs([g.add(x, x)])
    assert dead_code_elimination(g) is g


def test_dce_cleans_nested_bodies():
    s = Shape([3], F32)

    def branch(g, a, b):
        g.op("Activation", (a,), op="Exp")          # dead inside the body
        return g.add(a, b)

    attrs = IfAttrs(make_body("then", [s, s], branch), make_body("else", [s, s], branch))
    g = Graph("main")
    p, x, y = g.input("p", [], "bool"), g.input("x", [3]), g.input("y", [3])
    g.set_outputs([g.op("If", (p, x, y), attrs)])
    out = dead_code_elimination(g)
    body = out.nodes[out.outputs[0]].attrs.then_branch
    assert "Activation" not in kinds_of(body) and len(body.input_nodes()) == 2
    assert_same_results(g, out, {"p": np.bool_(True), "x": np.ones(3, np.float32),
                                 "y": np.arange(3, dtype=np.float32)})


# ── constant folding ───────────────────────────────────────────────────────

def test_folding_folds_chains_of_constants():
    g = Graph("main")
    x = g.input("x", [2, 3])
    c = g.cast(g.mul(g.constant(np.float64(2.0), "f64"), g.constant(np.float64(3.5), "f64")),
               "f32")
    r = g.reshape(g.constant(np.arange(6, dtype=np.float32)), (2, 3))
    g.set_outputs([g.add(g.mul(x, c), g.activation("Sqrt", r))])
    folded = dead_code_elimination(fold_constants(g))
    assert kinds_of(folded).count("Constant") == 2
    assert sorted(kinds_of(folded)) == ["Binary", "Binary", "Constant", "Constant", "Input"]
    assert_same_results(g, folded)


def test_folding_keeps_runtime_values_large_results_and_failures():
    g = Graph("main")
    x = g.input("x", [4])
    big = g.expand(g.constant(np.float32(1.0)), target_shape=(64, 64))
    zero = g.constant(np.array([0], np.int32))
    bad = g.div(g.constant(np.array([1], np.int32)), zero)       # fails: left for run time
    g.set_outputs([g.activation("Exp", x), big, bad])
    log = PassLog()
    out = fold_constants(g, max_elements=1024, log=log)
    assert out is g                                   # nothing foldable, nothing changed
    assert any("not folded" in line for line in log.lines)
    assert kinds_of(fold_constants(g, max_elements=4096))[3] == "Constant"


# ── decompositions: every registry sample of every decomposed kind ─────────

def _cases(kind):
    return [c for c in build_cases(kinds=[kind]) if c.op == kind]


@pytest.mark.parametrize("kind", sorted(DECOMPOSITIONS))
def test_decomposition_equals_the_op_on_its_samples(kind):
    d = DECOMPOSITIONS[kind]
    cases = _cases(kind)
    assert cases
    for case in cases:
        after = decompose(case.graph, kinds=[kind])
        assert kind not in kinds_of(after), case.id
        assert set(kinds_of(after)) - {"Input"} <= set(d.produces), case.id
        want = interpret(case.graph, case.inputs, case.params)
        got = interpret(after, case.inputs, case.params)
        if d.exact or all(same_values(a, b) for a, b in zip(got, want)):
            assert all(same_values(a, b) for a, b in zip(got, want)), (case.id, got, want)
            continue
        verdict, _ = _judge(case, got, *oracle_outputs(case), None)
        if not verdict.ok and kind == "Fma" and case.dtype == "f64":
            # RLX's f64 Mul + Add: a·b may overflow where the fused a·b + c does not.
            a, b = (case.inputs[n] for n in ("x0", "x1"))
            with np.errstate(over="ignore"):
                assert np.isinf(a * b).any(), (case.id, verdict.message)
            continue
        assert verdict.ok, (case.id, verdict.message)


def test_decomposition_needs_static_shapes():
    g = Graph("main")
    x = g.input("x", [Dyn(0), 3])
    g.set_outputs([g.op("Pad", (x,), pads=((1, 0), (0, 2)), mode=("Constant", 0.0))])
    assert decompose(g, kinds=["Pad"]) is g
    with pytest.raises(LegalizeError, match="only for static shapes"):
        legalize(g, SupportTable(claims(*EW), "toy"))


def test_decompose_only_touches_unclaimed_kinds_and_recurses_into_bodies():
    s = Shape([2, 3], F32)

    def branch(g, a):
        return g.op("Pad", (a,), pads=((0, 1), (2, 0)), mode="Replicate")

    attrs = IfAttrs(make_body("then", [s], branch), make_body("else", [s], branch))
    g = Graph("main")
    p, x = g.input("p", [], "bool"), g.input("x", [2, 3])
    g.set_outputs([g.op("If", (p, x), attrs), g.op("Tile", (x,), reps=(2, 1))])
    table = SupportTable(claims(*EW, "If", "Tile", "Concat", "Narrow", "Expand"), "toy")
    out = decompose(g, table)
    then = out.nodes[out.outputs[0]].attrs.then_branch
    assert "Pad" not in kinds_of(then) and "Concat" in kinds_of(then)
    assert "Tile" in kinds_of(out)                   # claimed: left alone
    for pred in (True, False):
        assert_same_results(g, out, {"p": np.bool_(pred), "x": feeds_for(g)["x"]})


# ── fusion ─────────────────────────────────────────────────────────────────

def regions(graph):
    return [n for n in graph.nodes if n.kind == "ElementwiseRegion"]


def test_fusion_makes_one_region_of_a_chain():
    g = Graph("main")
    x, b = g.input("x", [3, 4]), g.input("b", [4])
    y = g.activation("Relu", g.mul(g.add(x, b), g.constant(np.float32(0.5))))
    g.set_outputs([y])
    out = fuse_elementwise(g)
    (r,) = regions(out)
    assert len(r.attrs.chain) == 3 and r.attrs.num_inputs == 3
    assert r.attrs.input_modulus[:3] == (0, 4, 1) and r.attrs.scalar_input_mask == 0b100
    assert kinds_of(out) == ["Input", "Input", "Constant", "ElementwiseRegion"]
    assert_same_results(g, out)


def test_a_multi_consumer_intermediate_stays_unfused():
    g = Graph("main")
    x, y = g.input("x", [8]), g.input("y", [8])
    s = g.add(x, y)                                  # read twice: must materialize
    a = g.activation("Tanh", g.mul(s, x))
    b = g.activation("Sigmoid", g.sub(s, y))
    g.set_outputs([a, b])
    out = fuse_elementwise(g)
    assert "Binary" in kinds_of(out)                 # s itself
    for r in regions(out):
        assert [st[0] for st in r.attrs.chain] == ["Binary", "Activation"]
    assert len(regions(out)) == 2
    assert_same_results(g, out)


def test_a_graph_output_is_not_fused_into_its_reader():
    g = Graph("main")
    x = g.input("x", [5])
    t = g.activation("Exp", x)
    g.set_outputs([t, g.activation("Neg", g.add(t, x))])
    out = fuse_elementwise(g)
    assert out.nodes[out.outputs[0]].kind == "Activation"
    assert len(regions(out)) == 1
    assert_same_results(g, out)


def test_fusion_respects_the_step_and_input_caps():
    g = Graph("main")
    x = g.input("x", [6])
    cur = x
    for _ in range(MAX_STEPS + 8):
        cur = g.activation("Tanh", g.add(cur, x))    # 2 steps per round: 80 steps
    g.set_outputs([cur])
    out = fuse_elementwise(g)
    assert all(len(r.attrs.chain) <= MAX_STEPS for r in regions(out))
    assert sum(len(r.attrs.chain) for r in regions(out)) == 2 * (MAX_STEPS + 8)
    assert_same_results(g, out)

    g = Graph("wide")
    xs = [g.input(f"x{i}", [4]) for i in range(MAX_INPUTS + 6)]
    cur = xs[0]
    for x in xs[1:]:
        cur = g.add(cur, x)
    g.set_outputs([cur])
    out = fuse_elementwise(g)
    assert all(r.attrs.num_inputs <= MAX_INPUTS for r in regions(out))
    assert len(regions(out)) == 2
    assert_same_results(g, out)

    small = fuse_elementwise(g, FusionOptions(max_elementwise_steps=4, max_elementwise_inputs=3))
    assert all(len(r.attrs.chain) <= 4 and r.attrs.num_inputs <= 3 for r in regions(small))
    assert_same_results(g, small)


def test_fusion_boundaries():
    g = Graph("main")
    x, m = g.input("x", [3, 4]), g.input("m", [3, 1])
    w = g.input("w", [4, 4])
    lone = g.activation("Relu", x)                                 # one op: min_ops is 2
    col = g.activation("Exp", g.add(x, m))                         # [3, 1] is no suffix
    erf = g.activation("Relu", g.activation("Erf", g.add(x, x)))   # Erf: not region-fusable
    mm = g.activation("Tanh", g.add(g.matmul(x, w), x))            # after a BLAS boundary
    g.set_outputs([lone, col, erf, mm])
    out = fuse_elementwise(g)
    (r,) = regions(out)                              # only Tanh(MatMul + x)
    assert r.attrs.chain == (("Binary", ("Add", ("Input", 0), ("Input", 1))),
                             ("Activation", ("Tanh", ("Step", 0))))
    assert out.nodes[out.nodes[r.id].inputs[0]].kind == "MatMul"
    assert_same_results(g, out)


def test_fusion_forms_regions_only_for_claimed_dtypes():
    g = Graph("main")
    x, y = g.input("x", [4], "f64"), g.input("y", [4], "f32")
    g.set_outputs([g.activation("Relu", g.add(x, x)), g.activation("Relu", g.add(y, y))])
    table = SupportTable(claims(*EW, ElementwiseRegion=[DType.F32]), "toy")
    out = fuse_elementwise(g, supported=table)
    (r,) = regions(out)
    assert r.shape.dtype is F32


# ── unfusing ───────────────────────────────────────────────────────────────

def test_unfuse_restores_the_ops_and_their_values():
    g = Graph("main")
    x, b = g.input("x", [2, 5]), g.input("b", [5])
    c = g.compare("Gt", g.add(x, b), x)
    g.set_outputs([g.where_(c, g.mul(x, b), x)])
    fused = fuse_elementwise(g)
    assert regions(fused)
    flat = unfuse_elementwise(fused)
    assert not regions(flat)
    assert sorted(kinds_of(flat)) == sorted(kinds_of(g))
    assert_same_results(g, flat)
    claimed = SupportTable(claims(*EW, "ElementwiseRegion"), "toy")
    assert unfuse_elementwise(fused, claimed) is fused
    assert not regions(unfuse_elementwise(fused, claimed, force=True))


# ── legalization ───────────────────────────────────────────────────────────

def test_legalize_lists_every_unsupported_node():
    s = Shape([4], F32)
    cumsum = lambda g, a: g.op("Cumsum", (a,), axis=0, exclusive=False)  # noqa: E731
    attrs = IfAttrs(make_body("then", [s], cumsum), make_body("else", [s], lambda g, a: a))
    g = Graph("main")
    p, x = g.input("p", [], "bool"), g.input("x", [4])
    h = g.op("If", (p, x), attrs)
    soft = g.softmax(g.cast(h, "f64"))
    g.set_outputs([g.op("Cumsum", (soft,), axis=0, exclusive=False), g.softmax(x)])
    table = SupportTable(claims(*EW, "If", Softmax=[F32]), "toy")
    with pytest.raises(LegalizeError) as info:
        legalize(g, table)
    err = info.value
    assert isinstance(err, UnsupportedOp) and err.backend == "toy"
    assert sorted((o.graph, o.kind) for o in err.offenders) == [
        ("@main", "Cumsum"), ("@main", "Softmax"), ("@main/%2.then_branch", "Cumsum")]
    msg = str(err)
    assert 'backend "toy"' in msg and "3 node(s) of 2 op kind(s)" in msg
    assert "claims Softmax for f32 only" in msg and "Cast" in msg
    assert "declare Cumsum in toy's supported_ops()" in msg


def test_legalize_names_the_decomposition_a_node_came_from():
    g = Graph("main")
    x = g.input("x", [2, 3])
    g.set_outputs([g.op("Pad", (x,), pads=((1, 1), (0, 0)), mode="Circular")])
    backend = TableBackend(claims(*EW, "Narrow"))
    with pytest.raises(LegalizeError) as info:
        compile_pipeline(g, backend)
    assert [o.kind for o in info.value.offenders] == ["Concat"]
    assert "made by decomposing Pad" in str(info.value)
    assert info.value.report is not None and not info.value.report.compile_ready


def test_an_empty_claim_accepts_every_kind():
    g = Graph("main")
    x = g.input("x", [3])
    g.set_outputs([g.op("Cumsum", (x,), axis=0, exclusive=False)])
    assert legalize(g, SupportTable({}, "any")) is g


# ── the pipeline, the report and the environment ───────────────────────────

def _mixed_graph():
    g = Graph("main")
    x, b = g.input("x", [3, 4]), g.input("b", [4])
    scale = g.mul(g.constant(np.float32(2.0)), g.constant(np.float32(0.25)))
    y = g.activation("Gelu", g.mul(g.add(x, b), scale))
    y = g.op("Slice", (y,), axis=1, start=3, len=2, step=-2)
    y = g.op("Clamp", (y,), min=-0.5, max=0.5)
    g.activation("Exp", x)                                      # dead
    g.set_outputs([g.op("Cumsum", (y,), axis=1, exclusive=False)])
    return g


def test_pipeline_output_equals_the_oracle_and_reports_each_path():
    backend = TableBackend(claims(*EW, "ElementwiseRegion", "Gather", "Cumsum"),
                           paths={"Cumsum": "host"}, reasons={"Cumsum": "numpy cumsum"})
    g = _mixed_graph()
    out, report = compile_pipeline(g, backend)
    assert_same_results(g, out)
    assert report.compile_ready
    assert report.path_of("Cumsum") == "host"
    assert report.path_of("Slice") == report.path_of("Clamp") == "rewritten"
    assert report.path_of("ElementwiseRegion") == "native"
    assert {"Slice", "Clamp", "Exp"}.isdisjoint(kinds_of(out))
    text = report.format()
    assert text.startswith('rlx dispatch report — backend "toy", supported_ops claim=11')
    assert "  host:\n    - Cumsum ×1 nodes (numpy cumsum)" in text
    assert "    - Slice ×1 nodes (decomposed into Constant, Gather)" in text
    assert text.endswith("  compile-ready: yes\n")
    assert dispatch_report(g, out, backend).compile_ready


def test_a_kind_claimed_through_its_decomposition_is_decomposed_and_reported():
    """``path="decomposed"``: the backend claims the kind (it shows in its declared table),
    the pipeline rewrites it into natively claimed kinds, and the report says so."""
    backend = TableBackend(claims(*EW, "Clamp"), paths={"Clamp": "decomposed"},
                           reasons={"Clamp": "max then min"})
    g = Graph("t")
    x = g.input("x", [5])
    g.set_outputs([g.clamp(x, min=-1.0, max=1.0)])
    out, report = compile_pipeline(g, backend)
    assert "Clamp" in backend.supported_ops() and "Clamp" not in kinds_of(out)
    assert_same_results(g, out)
    assert report.compile_ready and report.path_of("Clamp") == "rewritten"
    native_only = TableBackend(claims("Input", "Clamp"), paths={"Clamp": "decomposed"})
    with pytest.raises(LegalizeError, match="Binary"):     # its products are not claimed
        compile_pipeline(g, native_only)


def test_lowering_table_claims_kinds_through_their_decompositions():
    from rlx_ref.backends.lowering_table import LoweringTable

    table = LoweringTable("toy", "rlx_ref.backends", ())
    table.decomposed(("Clamp", "Fma"), (F32,), "no kernel yet")
    assert table.supported_ops() == {"Clamp": frozenset({F32}), "Fma": frozenset({F32})}
    assert table.paths() == {"Clamp": "decomposed", "Fma": "decomposed"}
    assert table.path_reasons()["Fma"] == "no kernel yet"


def test_pipeline_options_switch_passes_off():
    backend = TableBackend(claims(*EW, "ElementwiseRegion", "Gather", "Cumsum"))
    g = _mixed_graph()
    opts = CompileOptions(dce=False, constant_folding=False, fusion_opts=FusionOptions(
        enable=False))
    out, _ = compile_pipeline(g, backend, opts)
    assert "ElementwiseRegion" not in kinds_of(out)
    assert kinds_of(out).count("Constant") >= 2 and "Exp" in [
        n.attrs.op for n in out.nodes if n.kind == "Activation"]
    assert_same_results(g, out)
    over, _ = compile_pipeline(g, backend, {"supported_ops": claims(*EW, "Gather", "Cumsum",
                                                                     "Slice", "Clamp")})
    assert "Slice" in kinds_of(over) and "ElementwiseRegion" not in kinds_of(over)


@pytest.fixture
def rlx_env(monkeypatch):
    """Set RLX_* variables for one test (the registry reads the environment live)."""
    for var in ("RLX_DISPATCH_REPORT", "RLX_VERBOSE"):
        monkeypatch.delenv(var, raising=False)

    def set_env(**values):
        for k, v in values.items():
            monkeypatch.setenv(k, v)

    yield set_env
    monkeypatch.undo()


def test_the_report_prints_only_when_asked(rlx_env, capsys):
    backend = TableBackend(claims(*EW, "ElementwiseRegion", "Gather", "Cumsum"))
    rlx_env()
    compile_pipeline(_mixed_graph(), backend)
    assert capsys.readouterr().err == ""
    rlx_env(RLX_DISPATCH_REPORT="1")
    compile_pipeline(_mixed_graph(), backend)
    err = capsys.readouterr().err
    assert err.startswith("rlx dispatch report") and "rlx-ref passes" not in err


def test_verbose_prints_the_report_and_the_pass_log(rlx_env, capsys):
    rlx_env(RLX_VERBOSE="true")
    compile_pipeline(_mixed_graph(), TableBackend(claims(*EW, "Gather", "Cumsum")))
    err = capsys.readouterr().err
    assert "rlx dispatch report" in err and "compile-ready: yes" in err
    assert "[decompose]" in err and "[constant_folding]" in err


def test_the_report_prints_before_a_legalize_failure(rlx_env, capsys):
    rlx_env(RLX_DISPATCH_REPORT="yes")
    with pytest.raises(LegalizeError):
        compile_pipeline(_mixed_graph(), TableBackend(claims(*EW)))
    err = capsys.readouterr().err
    assert "still unsupported after rewrite" in err and "compile will fail" in err
    assert "    - Cumsum ×1 nodes (not claimed)" in err


def test_verify_after_each_pass_names_the_pass(rlx_env):
    @graph_pass("broken_pass")
    def broken(graph):
        bad = graph.copy()
        bad.add_node_unchecked(graph.nodes[0].op, [len(bad.nodes) + 5], graph.nodes[0].shape)
        return bad

    g = Graph("main")
    g.set_outputs([g.input("x", [2])])
    rlx_env(RLX_REF_VERIFY="1")
    with pytest.raises(PassVerifyError, match="after pass `broken_pass`"):
        broken(g)
    rlx_env(RLX_REF_VERIFY="0")
    broken(g)


def test_env_and_options():
    def on(v):
        return flag("RLX_VERBOSE", {} if v is None else {"RLX_VERBOSE": v})

    assert [on(v) for v in ("1", "true", " On ", "2", "")] == [True, True, True, True, False]
    assert not any(on(v) for v in ("0", "false", "OFF", "no", None))
    e = {"RLX_VERBOSE": "1", "RLX_REF_DUMP_KERNELS": "/tmp/k"}
    assert flag("RLX_VERBOSE", e) and get("RLX_REF_DUMP_KERNELS", e) == "/tmp/k"
    assert not flag("RLX_REF_VERIFY", e)
    opts = CompileOptions.coerce({"dce": False, "max_elementwise_steps": 8})
    assert not opts.dce and opts.fusion_opts.max_elementwise_steps == 8
    assert CompileOptions().fusion_opts == FusionOptions(True, 32, 16, 2, False)
    assert CompileOptions().arena_alignment == 64 and CompileOptions().fusion.skip_fusion \
        is False
    with pytest.raises(ValueError, match="max_elementwise_inputs"):
        FusionOptions(max_elementwise_inputs=17)
    with pytest.raises(ValueError, match="power of two"):
        CompileOptions(arena_alignment=48)
