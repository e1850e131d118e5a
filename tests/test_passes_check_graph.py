"""check_graph (shape, dispatch, missed fusions, numeric lint), the static lint, and
RLX_DEBUG_NANS on the oracle; each graph's findings are written out by hand."""
import json

import numpy as np
import pytest

from rlx_ref import Graph, interpret
from rlx_ref.env_registry import EnvError, overrides
from rlx_ref.ir.shape import Shape
from rlx_ref.ir.dtype import DType
from rlx_ref.nan_check import FIX_HINTS, NanCheckError
from rlx_ref.passes import compile_pipeline
from rlx_ref.passes.check_graph import check_graph
from rlx_ref.passes.numeric_lint import FOLDED, LITERAL, lint_numerics
from rlx_ref.runtime.options import CompileOptions

from test_passes import TableBackend, claims

EW = ("Input", "Param", "Constant", "Activation", "Binary", "Compare", "Where", "Cast")


def test_lint_flags_only_provable_non_finite_values():
    """RLX's four cases: 1/0 folds to +inf; a NaN literal and its constant user; x/0 with x
    an Input is not provable; 2/4 is clean."""
    g = Graph("t")
    one, zero = g.constant(np.float32([1])), g.constant(np.float32([0]))
    d = g.div(one, zero)                                               # %2
    x = g.input("x", [1])
    g.div(x, zero)                                                     # %4: runtime
    nan = g.constant(np.float32([np.nan]))                             # %5
    g.add(nan, one)                                                    # %6
    g.div(g.constant(np.float32([2])), g.constant(np.float32([4])))  # %9: clean
    g.set_outputs([d])
    got = [(f.node, f.kind, f.reason, f.fix) for f in lint_numerics(g)]
    assert got == [(2, "+inf", FOLDED, FIX_HINTS["Div"]),
                   (5, "NaN", LITERAL, FIX_HINTS["Constant"]),
                   (6, "NaN", FOLDED, None)]
    assert str(lint_numerics(g)[0]) == f"%2 +inf \"%2\": {FOLDED}\n  fix: {FIX_HINTS['Div']}"


def _graph_with_everything():
    """Exp → Neg → Mul (an elementwise chain), a Cumsum (the toy backend has none) and
    log(-1) of a constant."""
    g = Graph("m")
    x = g.input("x", [4])
    chain = g.mul(g.activation("Neg", g.activation("Exp", x)), x)      # %1 %2 %3
    c = g.op("Cumsum", (chain,), axis=0, exclusive=False)              # %4
    bad = g.activation("Log", g.constant(np.float32([-1])))            # %5 %6
    g.set_outputs([c, bad])
    return g


def test_check_graph_against_a_backend():
    report = check_graph(_graph_with_everything(), TableBackend(claims(*EW), name="toy"))
    assert report.codes() == ["unsupported-op", "missed-fusion", "numeric"]
    unsupported, missed, numeric = report.diagnostics
    assert (unsupported.severity, unsupported.node, unsupported.backend) == ("error", 4, "toy")
    assert unsupported.message == "Cumsum ([4] f32) in @m cannot run"
    assert (missed.severity, missed.node) == ("warning", 3)
    assert missed.message.startswith("3 elementwise ops (%1, %2, %3) could run as one")
    assert (numeric.severity, numeric.node, numeric.message) == ("warning", 6, f"NaN: {FOLDED}")
    assert numeric.hint == FIX_HINTS["Log"]
    assert report.errors() == 1 and report.warnings() == 2 and report.has_errors()
    text = report.render()
    assert text.splitlines()[0] == "rlx check — graph \"m\" (7 nodes)"
    assert "error[unsupported-op] on toy: Cumsum ([4] f32) in @m cannot run\n  --> %4" in text
    assert json.loads(report.to_json())["nodes"] == 7


def test_claimed_regions_leave_no_missed_fusion_and_decompositions_are_notes():
    g = Graph("m")
    x = g.input("x", [4])
    g.set_outputs([g.op("Clamp", (g.activation("Neg", g.activation("Exp", x)),),
                        min=0.0, max=1.0)])
    backend = TableBackend(claims(*EW, "ElementwiseRegion"), name="fused")
    report = check_graph(g, backend)
    assert [(d.severity, d.code) for d in report.diagnostics] == [("note", "decomposed")]
    assert report.diagnostics[0].message.startswith("Clamp runs as other kinds: decomposed")
    assert not report.has_errors()


def test_shape_errors_stop_the_other_axes():
    g = Graph("bad")
    x = g.input("x", [2])
    g.add_node_unchecked(g.nodes[x].op.__class__("Activation", g.nodes[x].op.attrs),
                         [x], Shape((2,), DType.F32))
    g.set_outputs([1])
    report = check_graph(g, TableBackend(claims("Input")))
    assert report.codes() and set(report.codes()) == {"shape"}
    assert report.diagnostics[0].node == 1


def test_clean_graph_has_no_findings():
    g = Graph("ok")
    g.set_outputs([g.add(g.input("a", [2]), g.input("b", [2]))])
    report = check_graph(g, "reference")
    assert report.diagnostics == [] and "no findings." in report.render()


def _nan_graph():
    """log(x) then * 2: log(-1) is the culprit, the Mul only propagates."""
    g = Graph("n")
    x = g.input("x", [3])
    lg = g.activation("Log", x)
    g.set_outputs([g.mul(lg, g.constant(np.float32([2, 2, 2])))])
    return g


def test_debug_nans_names_the_first_culprit(capfd):
    feeds = {"x": np.float32([1, -1, 2])}
    with overrides(RLX_DEBUG_NANS="1"):
        out = interpret(_nan_graph(), feeds)[0]
    assert np.isnan(out[1])
    err = capfd.readouterr().err
    assert err == ("rlx-ref nan-check [reference]: NaN at index 1 of %1 Log \"%1\" in @n\n"
                   "  → inputs finite, this op produced it\n"
                   f"  fix: {FIX_HINTS['Log']}\n")


def test_debug_nans_propagation_and_abort(capfd):
    """A NaN fed in is reported at its first user, as propagated from the Input."""
    with overrides(RLX_DEBUG_NANS="warn"):
        interpret(_nan_graph(), {"x": np.float32([np.nan, 1, 1])})
    assert capfd.readouterr().err == (
        "rlx-ref nan-check [reference]: NaN at index 0 of %1 Log \"%1\" in @n\n"
        "  → propagated: input %0 was already non-finite (look upstream)\n")
    with overrides(RLX_DEBUG_NANS="abort"), pytest.raises(Exception) as info:
        interpret(_nan_graph(), {"x": np.float32([1, 1, -1])})
    assert isinstance(info.value.__cause__, NanCheckError)
    assert info.value.__cause__.report.node == 1 and info.value.__cause__.report.index == 2
    with overrides(RLX_DEBUG_NANS="0"):
        interpret(_nan_graph(), {"x": np.float32([-1, 1, 1])})
    assert capfd.readouterr().err == ""
    with overrides(RLX_DEBUG_NANS="sometimes"), pytest.raises(EnvError, match="RLX_DEBUG_NANS"):
        interpret(_nan_graph(), {"x": np.float32([1, 1, 1])})


def test_debug_nans_reports_once_inside_a_scan_body(capfd):
    """carry / x_t with x_1 = 0: the body's Div makes the inf at step 1; the later steps
    and the Scan node itself are not reported again."""
    from rlx_ref.ops._control_bodies import make_body
    from rlx_ref.ops.control import ScanAttrs

    s1 = Shape((1,), DType.F32)
    body = make_body("body", [s1, s1], lambda b, c, x: b.div(c, x), names=["c", "x"])
    g = Graph("s")
    init, xs = g.input("init", [1]), g.input("xs", [3, 1])
    g.set_outputs([g.op("Scan", (init, xs), ScanAttrs(body, 3, num_xs=1))])
    with overrides(RLX_DEBUG_NANS="1"):
        interpret(g, {"init": np.float32([1]), "xs": np.float32([[1], [0], [2]])})
    assert capfd.readouterr().err == (
        "rlx-ref nan-check [reference]: +inf at index 0 of %2 Div \"%2\" in @body\n"
        "  → inputs finite, this op produced it\n"
        f"  fix: {FIX_HINTS['Div']}\n")


def test_debug_nans_through_a_session(capfd):
    """Session("reference") runs the oracle, so the localizer names the node there too."""
    from rlx_ref import Session

    exe = Session("reference").compile(_nan_graph())
    with overrides(RLX_DEBUG_NANS="1"):
        exe.run({"x": np.float32([1, 1, 0])})
    err = capfd.readouterr().err
    assert "nan-check [reference]: -inf at index 2 of %" in err and " Log " in err


def test_pipeline_prints_the_lint(capfd):
    """The lint reads the compiled graph (as RLX's): DCE left x, the -1 and the Log."""
    g = _graph_with_everything()
    g.set_outputs([g.outputs[1]])
    compile_pipeline(g, None, CompileOptions(constant_folding=False).with_lint_numerics())
    assert capfd.readouterr().err == f"rlx numeric-lint: %2 NaN \"%2\": {FOLDED}\n" \
                                     f"  fix: {FIX_HINTS['Log']}\n"
    with overrides(RLX_LINT_NUMERICS="1"):
        compile_pipeline(g, None, {"constant_folding": False})
    assert "rlx numeric-lint: %2 NaN" in capfd.readouterr().err
