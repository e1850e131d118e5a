"""AutoMixedPrecision: RLX's policies on hand-written graphs, Cast placement and reuse,
bit patterns left alone, f32 outputs, and f32 accumulation of f16 reductions."""
import numpy as np
import pytest

from rlx_ref import DType, Graph, interpret
from rlx_ref.ir.shape import Shape
from rlx_ref.ops._control_bodies import make_body
from rlx_ref.ops.control import IfAttrs
from rlx_ref.ops.random import RngNormalAttrs
from rlx_ref.passes import PassLog, compile_pipeline
from rlx_ref.passes.mixed_precision import (POLICIES, auto_mixed_precision as amp, category,
                                            precision_for)
from rlx_ref.runtime.options import CompileOptions

F32, F16, BF16 = DType.F32, DType.F16, DType.BF16


def mlp():
    """x @ w, relu, sum over the last axis: Compute, Elementwise, Reduction."""
    g = Graph("mlp")
    x, w = g.input("x", [2, 4]), g.param("w", [4, 3])
    g.set_outputs([g.sum(g.activation("Relu", g.matmul(x, w)), [1])])
    return g


def test_policy_table_is_rlx_table():
    assert [precision_for(p, c) for p in POLICIES for c in
            ("Compute", "Reduction", "Elementwise", "DataMovement", "Boundary")] == [
        F32, F32, F32, F32, F32,        # AlwaysF32
        F16, F16, F16, F16, F32,        # AlwaysF16
        F32, F32, F16, F32, F32,        # AutoMixedConservative
        F32, F16, F16, F32, F32,        # AutoMixed
        BF16, BF16, BF16, BF16, F32,    # AutoMixedBf16
        F32, BF16, BF16, F32, F32]      # AutoMixedBf16Safe
    assert [category(k) for k in ("MatMul", "Reduce", "Binary", "Reshape", "Param", "Erf")] \
        == ["Compute", "Reduction", "Elementwise", "DataMovement", "Boundary", "Compute"]
    custom = {"Elementwise": "bf16", "Compute": F16}         # RLX's Custom; unlisted: f32
    assert [precision_for(custom, c) for c in ("Compute", "Elementwise", "Reduction")] == \
        [F16, BF16, F32]
    with pytest.raises(ValueError, match="unknown precision policy"):
        amp(mlp(), "Fastest")


def test_always_f32_is_a_no_op():
    g = mlp()
    assert amp(g, "AlwaysF32") is g


def test_auto_mixed_casts_around_the_f16_region():
    """RLX's case extended: MatMul stays f32, one Cast into the f16 relu + sum, the output
    Cast back to f32."""
    want = Graph("mlp")
    x, w = want.input("x", [2, 4]), want.param("w", [4, 3])
    h = want.cast(want.matmul(x, w), "f16")
    want.set_outputs([want.cast(want.sum(want.activation("Relu", h), [1]), "f32")])
    assert amp(mlp(), "AutoMixed") == want


def test_always_f16_and_conservative():
    want = Graph("mlp")
    x, w = want.input("x", [2, 4]), want.param("w", [4, 3])
    mm = want.matmul(want.cast(x, "f16"), want.cast(w, "f16"))
    want.set_outputs([want.cast(want.sum(want.activation("Relu", mm), [1]), "f32")])
    assert amp(mlp(), "AlwaysF16") == want

    want = Graph("mlp")
    x, w = want.input("x", [2, 4]), want.param("w", [4, 3])
    relu = want.activation("Relu", want.cast(want.matmul(x, w), "f16"))
    want.set_outputs([want.sum(want.cast(relu, "f32"), [1])])     # Reduction back in f32
    assert amp(mlp(), "AutoMixedConservative") == want


def test_one_cast_per_source_and_bit_patterns_untouched():
    """Two users of x share one Cast; the i64 indices of a Gather and the bool of a Where
    are never cast; a Compare keeps its bool result."""
    g = Graph("bits")
    x, idx = g.input("x", [4]), g.input("i", [2], "i64")
    e = g.activation("Exp", x)
    n = g.activation("Neg", x)
    mask = g.compare("Gt", e, n)
    sel = g.op("Where", (mask, e, n))
    g.set_outputs([g.op("Gather", (sel, idx), axis=0)])
    want = Graph("bits")
    x, idx = want.input("x", [4]), want.input("i", [2], "i64")
    xh = want.cast(x, "bf16")
    e, n = want.activation("Exp", xh), want.activation("Neg", xh)
    sel = want.op("Where", (want.compare("Gt", e, n), e, n))
    want.set_outputs([want.cast(want.op("Gather", (sel, idx), axis=0), "f32")])
    assert amp(g, "AutoMixedBf16") == want


def test_f32_only_kinds_and_bodies_stay_f32():
    """RngNormal declares f32 only, so it keeps f32 and its user casts; an If keeps its
    f32 branches (its operand is cast back to f32)."""
    g = Graph("keep")
    x = g.input("x", [2])
    r = g.op("RngNormal", (x,), RngNormalAttrs(0.0, 1.0, 1), shape=Shape((2,), F32))
    s2 = Shape((2,), F32)
    body = make_body("b", [s2], lambda b, c: b.activation("Neg", c), names=["c"])
    p = g.input("p", [1], "bool")
    y = g.activation("Exp", r)
    g.set_outputs([g.op("If", (p, y), IfAttrs(body, body))])
    log = PassLog()
    out = amp(g, "AlwaysF16", log=log)
    kinds = [(n.kind, n.shape.dtype) for n in out.nodes]
    assert kinds == [("Input", F32), ("Cast", F16), ("RngNormal", F32), ("Input", DType.BOOL),
                     ("Cast", F16), ("Activation", F16), ("Cast", F32), ("If", F32)]
    assert any("RngNormal kept in f32" in line for line in log.lines)


def test_f16_sum_accumulates_in_f32():
    """4096 ones summed in f16: an f16 accumulator stalls at 2048 (2049 is not an f16);
    the relabelled Reduce keeps an f32 accumulator and gives 4096 exactly."""
    g = Graph("acc")
    g.set_outputs([g.sum(g.input("x", [4096]), [0])])
    out = amp(g, "AlwaysF16")
    assert [(n.kind, n.shape.dtype) for n in out.nodes] == [
        ("Input", F32), ("Cast", F16), ("Reduce", F16), ("Cast", F32)]
    assert interpret(out, {"x": np.ones(4096, np.float32)})[0] == 4096


def test_pipeline_option_and_builder():
    opts = CompileOptions().with_policy("AutoMixed")
    assert opts.policy == "AutoMixed" and opts.no_policy().policy is None
    out, _ = compile_pipeline(mlp(), None, opts)
    assert out == amp(mlp(), "AutoMixed")
    assert compile_pipeline(mlp(), None)[0] == mlp()      # default: no policy
    with pytest.raises(ValueError, match="policy"):
        CompileOptions(policy="Fastest")
