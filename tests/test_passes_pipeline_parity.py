"""The new passes inside ``compile_pipeline``: where they run, the options that drive
them (RLX's builder methods) and the defaults that keep today's behaviour."""
import numpy as np
import pytest

from rlx_ref import DType, Graph, interpret
from rlx_ref.ir.shape import Shape
from rlx_ref.ops._control_bodies import make_body
from rlx_ref.ops.control import IfAttrs, ScanAttrs
from rlx_ref.passes import PASSES, PassLog, compile_pipeline
from rlx_ref.runtime.options import CompileOptions

from test_passes import TableBackend, claims

F32 = DType.F32
S2 = Shape((2,), F32)
BASIC = ("Input", "Constant", "Activation", "Binary", "Where", "Expand", "Narrow",
         "Reshape", "Concat", "Cast", "Compare")


def test_pass_order_is_rlx_order():
    assert PASSES[:3] == ("param_bindings", "lower_control_flow", "unroll_scans")
    assert PASSES.index("decompose") < PASSES.index("common_subexpression_elimination") \
        < PASSES.index("legalize")


def _if_graph():
    then_b = make_body("th", [S2], lambda b, c: b.activation("Relu", c), names=["c"])
    else_b = make_body("el", [S2], lambda b, c: b.activation("Exp", c), names=["c"])
    g = Graph("main")
    x, p = g.input("x", [2]), g.input("p", [1], "bool")
    g.set_outputs([g.op("If", (p, x), IfAttrs(then_b, else_b))])
    return g


def test_backend_without_if_compiles_the_lowered_graph():
    g = _if_graph()
    out, report = compile_pipeline(g, TableBackend(claims(*BASIC)))
    assert {n.kind for n in out.nodes} == {"Input", "Activation", "Expand", "Where"}
    feeds = {"x": np.float32([-2, 3]), "p": np.array([False])}
    np.testing.assert_allclose(interpret(out, feeds)[0], np.exp(np.float32([-2, 3])))
    # a backend that claims If keeps it (today's behaviour); True lowers it anyway
    kept, _ = compile_pipeline(g, TableBackend(claims(*BASIC, "If")))
    assert "If" in {n.kind for n in kept.nodes}
    forced, _ = compile_pipeline(g, TableBackend(claims(*BASIC, "If")),
                                 CompileOptions().with_lower_control_flow(True))
    assert "If" not in {n.kind for n in forced.nodes}


def _scan_graph(length):
    body = make_body("body", [S2, S2], lambda b, c, x: b.add(c, x), names=["c", "x"])
    g = Graph("main")
    init, xs = g.input("init", [2]), g.input("xs", [length, 2])
    g.set_outputs([g.op("Scan", (init, xs), ScanAttrs(body, length, num_xs=1))])
    return g


def test_scan_unroll_follows_the_option_on_a_backend_with_scan():
    g = _scan_graph(4)
    backend = TableBackend(claims(*BASIC, "Scan"))
    kept, _ = compile_pipeline(g, backend)           # default 0: Scan stays
    assert "Scan" in {n.kind for n in kept.nodes}
    opts = CompileOptions().with_scan_unroll_max_length(64)
    out, _ = compile_pipeline(g, backend, opts)
    assert "Scan" not in {n.kind for n in out.nodes}
    assert compile_pipeline(g, backend, opts.with_scan_unroll_max_length(3))[0] == kept
    small = opts.with_scan_unroll_max_length(0).with_scan_unroll_budget(12)    # 4 × 3
    assert "Scan" not in {n.kind for n in compile_pipeline(g, backend, small)[0].nodes}


def test_backend_without_scan_gets_it_unrolled():
    g = _scan_graph(4)
    out, _ = compile_pipeline(g, TableBackend(claims(*BASIC)))
    feeds = {"init": np.float32([1, 1]), "xs": np.ones((4, 2), np.float32)}
    np.testing.assert_array_equal(interpret(out, feeds)[0], np.float32([5, 5]))


def test_cse_runs_in_the_pipeline_and_can_be_turned_off():
    g = Graph("main")
    x = g.input("x", [3])
    g.set_outputs([g.add(g.activation("Exp", x), g.activation("Exp", x))])
    log = PassLog()
    out, _ = compile_pipeline(g, TableBackend(claims(*BASIC)), log=log)
    assert [n.kind for n in out.nodes] == ["Input", "Activation", "Binary"]
    assert any(line.startswith("[common_subexpression_elimination]") for line in log.lines)
    off, _ = compile_pipeline(g, TableBackend(claims(*BASIC)), CompileOptions().with_cse(False))
    assert off == g


def test_builder_methods_return_copies():
    base = CompileOptions()
    o = (base.with_dce(False).with_constant_folding(False).with_verbose(True)
         .with_arena_alignment(128).with_supported_ops(["Binary"]).with_cse(False))
    assert (o.dce, o.constant_folding, o.verbose, o.arena_alignment, o.cse) == \
        (False, False, True, 128, False)
    assert o.supported_ops == ["Binary"] and base == CompileOptions()
    with pytest.raises(ValueError, match="lower_control_flow"):
        base.with_lower_control_flow("sometimes")
    with pytest.raises(ValueError, match="scan_unroll_budget"):
        base.with_scan_unroll_budget(-1)
