"""The comparator and the accuracy contracts: every rule on hand-made arrays, then a property
test over the registry (the case-dtype oracle meets every contract; a 1% error does not)."""
import dataclasses

import ml_dtypes
import numpy as np
import pytest

from rlx_ref.conformance import accuracy as A
from rlx_ref.conformance.compare import compare, compare_outputs
from rlx_ref.conformance.model import Case
from rlx_ref.interpret import Interpreter
from rlx_ref.ir.dtype import DType
from rlx_ref.ir.graph import Graph, Op
from rlx_ref.ir.shape import Dyn, Shape
from rlx_ref.ops.opdef import all_opdefs, get
from rlx_ref.ops.single import single_op_graph

F16, BF16, F32 = DType.F16, DType.BF16, DType.F32
ULP4 = A.ulp(4)


def arr(values, dt=np.float32):
    return np.array(values, dt)


def check(got, o64, declared=None, acc=ULP4, oc=None):
    got = np.asarray(got)
    declared = declared or Shape(got.shape, DType.of(got))
    return compare(got, np.asarray(o64, np.float64) if np.asarray(o64).dtype.kind == "f"
                   else o64, oc, declared, acc)


# ── hand-made rules ────────────────────────────────────────────────────────

def test_equal_arrays_pass_with_zero_error():
    v = check(arr([1.0, -2.5, 0.0]), [1.0, -2.5, 0.0])
    assert v.status == "ok" and v.max_abs == 0 and v.budget_ratio == 0


def test_nan_positions_must_match_both_ways():
    v = check(arr([1.0, np.nan]), [1.0, 2.0])
    assert v.status == "MISMATCH" and "NaN/inf mismatch at [1]" in v.message
    v = check(arr([1.0, 2.0]), [np.nan, 2.0])
    assert v.status == "MISMATCH" and v.worst_index == [0]
    assert check(arr([np.nan, 2.0]), [np.nan, 2.0]).status == "ok"


def test_inf_sign_must_match():
    v = check(arr([np.inf, 1.0]), [-np.inf, 1.0])
    assert v.status == "MISMATCH" and "got inf, expected -inf" in v.message
    assert check(arr([-np.inf, 1.0]), [-np.inf, 1.0]).status == "ok"


def test_integer_off_by_one_is_a_mismatch():
    o = np.array([[3, 4], [5, 6]], np.int32)
    got = o.copy()
    got[1, 0] += 1
    v = check(got, o, acc=A.ulp(1000))          # the contract cannot loosen integers
    assert v.status == "MISMATCH" and v.worst_index == [1, 0] and v.max_abs == 1
    assert "got 6, expected 5" in v.message
    b = np.array([True, False])
    assert check(b, b).status == "ok"
    assert check(~b, b).status == "MISMATCH"


def test_all_near_zero_output_is_missing():
    v = check(np.zeros(5, np.float32), [0.0, 1.0, 2.0, 0.0, 3.0])
    assert v.status == "MISSING" and "|3|" in v.message and "at [4]" in v.message
    # a tiny oracle is not MISSING, and near-zero output within budget is ok
    assert check(np.zeros(2, np.float32), [0.0, 1e-45]).status == "ok"
    assert check(np.zeros(3, np.int32), np.array([0, 7, 0], np.int32)).status == "MISSING"


def test_tail_zeros_are_a_mismatch_at_the_tail():
    o = np.arange(1, 11, dtype=np.float32)
    got = o.copy()
    got[-3:] = 0
    v = check(got, o)
    assert v.status == "MISMATCH" and v.worst_index[0] >= 7
    assert v.message.startswith("3 of 10 elements over budget")


def test_one_element_just_below_and_just_above_its_budget():
    o = arr([1.5, 3.0, 0.75])
    spacing = np.spacing(np.float32(3.0))              # one f32 ulp at 3.0
    for k, status in ((4, "ok"), (5, "MISMATCH")):     # budget: 4.5 ulp
        got = o.copy()
        got[1] += np.float32(k) * spacing
        v = check(got, o, acc=A.ulp(4.5))
        assert v.status == status, v.message
        assert v.max_ulp == pytest.approx(k) and v.budget_ratio == pytest.approx(k / 4.5)
    assert v.worst_index == [1] and "allowed" in v.message and "ulp(4.5" in v.message


def test_budget_edge_in_float64_exactly():
    o = np.array([1.0, 2.0])
    ulp64 = np.spacing(2.0)
    d = Shape([2], DType.F64)
    assert compare(o + [0, 4 * ulp64], o, None, d, A.ulp(4)).status == "ok"
    v = compare(o + [0, 5 * ulp64], o, None, d, A.ulp(4))
    assert v.status == "MISMATCH" and v.worst_index == [1]
    assert v.budget_ratio == pytest.approx(1.25) and v.max_ulp == pytest.approx(5)


def test_reduction_budget_is_c_eps_k_scale():
    acc = A._resolve(A.reduction(2, 10, "all", ulps=0), None, [])
    o = np.array([4.0, -1.0])
    allowed = 2 * 2.0 ** -23 * 10 * 4.0               # c·eps·K·max|oracle|
    d = Shape([2], F32)
    ok = (o + [0, 0.9 * allowed]).astype(np.float32)
    bad = (o + [0, 1.2 * allowed]).astype(np.float32)
    assert compare(ok, o, None, d, acc).status == "ok"
    assert compare(bad, o, None, d, acc).status == "MISMATCH"


@pytest.mark.parametrize("dt, spacing_at_1", [(F16, 2.0 ** -10), (BF16, 2.0 ** -7)])
def test_ulps_are_measured_in_the_case_dtype(dt, spacing_at_1):
    o = np.array([1.0, 1.5])
    got = (o + [0, 2 * spacing_at_1]).astype(dt.np)     # 2 ulps above, exactly
    v = compare(got, o, None, Shape([2], dt), A.ulp(1, n16=1))
    assert v.status == "MISMATCH" and v.max_ulp == pytest.approx(2.0)
    assert "ulp " + str(dt) in v.message
    v = compare(got, o, None, Shape([2], dt), A.ulp(1, n16=2))
    assert v.status == "ok" and v.budget_ratio == pytest.approx(1.0)


def test_ulp_of_matches_numpy_and_ml_dtypes():
    x = np.array([1.0, 3.0, 1e-3, 6e-5, 0.0, 60000.0])
    for dt in (F16, F32, DType.F64):
        want = np.spacing(np.abs(x).astype(dt.np)).astype(np.float64)
        assert np.array_equal(A.ulp_of(x[:-1], dt)[:4], want[:4])
    bf = np.array([1.0, 3.0, 1e-3], ml_dtypes.bfloat16)
    want = [float(ml_dtypes.finfo(ml_dtypes.bfloat16).eps) * 2.0 ** np.floor(np.log2(v))
            for v in bf.astype(np.float64)]
    assert np.array_equal(A.ulp_of(bf.astype(np.float64), BF16), want)
    assert A.ulp_of(np.array([0.0]), F16)[0] == 2.0 ** -24     # the smallest subnormal


def test_the_oracle_error_fallback_passes_noisy_but_no_worse_results():
    o64 = np.array([1.0, 2.0, 3.0])
    oc = (o64 + [0, 1e-3, 0]).astype(np.float32)       # the oracle itself is 1e-3 off
    d = Shape([3], F32)
    noisy = (o64 + [0, -9e-4, 0]).astype(np.float32)   # as bad, other side: passes
    v = compare(noisy, o64, oc, d, A.ulp(1))
    assert v.status == "ok" and v.budget_ratio <= 1
    assert compare(noisy, o64, None, d, A.ulp(1)).status == "MISMATCH"
    worse = (o64 + [0, 2e-3, 0]).astype(np.float32)
    assert compare(worse, o64, oc, d, A.ulp(1)).status == "MISMATCH"
    # NaN where the case-dtype oracle also overflowed to NaN is no worse than it
    oc_nan = np.array([1.0, np.nan, 3.0], np.float32)
    got_nan = np.array([1.0, np.nan, 3.0], np.float32)
    assert compare(got_nan, o64, oc_nan, d, A.ulp(1)).status == "ok"


def test_declared_shape_and_dtype_are_enforced():
    o = np.array([1.0, 2.0])
    v = compare(np.array([1.0, 2.0], np.float32), o, None, Shape([2], F16), ULP4)
    assert v.status == "MISMATCH" and "dtype" in v.message and "f16" in v.message
    v = compare(np.ones((2, 1), np.float32), o, None, Shape([2], F32), ULP4)
    assert v.status == "MISMATCH" and "shape" in v.message and "[2, 1]" in v.message
    # the oracle may be f64 (float64 mode) or the declared dtype; anything else is a bug
    assert compare(o.astype(np.float32), o.astype(np.float32), None, Shape([2], F32),
                   ULP4).status == "ok"
    v = compare(o.astype(np.float32), o.astype(np.float16), None, Shape([2], F32), ULP4)
    assert v.status == "error" and "oracle64" in v.message
    # dynamic declared dims match any size
    assert compare(o.astype(np.float32), o, None, Shape([Dyn(0)], F32), ULP4).status == "ok"


def test_empty_outputs_compare_ok_when_shapes_match():
    e = np.zeros((0, 3), np.float32)
    assert compare(e, e.astype(np.float64), None, Shape([0, 3], F32), ULP4).status == "ok"
    v = compare(np.zeros((3, 0), np.float32), e.astype(np.float64), None, Shape([0, 3], F32),
                ULP4)
    assert v.status == "MISMATCH"


def test_exact_contracts_and_signed_zeros():
    o = np.array([0.0, 1.0, -0.0])
    d = Shape([3], F32)
    flipped = np.array([-0.0, 1.0, 0.0], np.float32)
    assert compare(flipped, o, None, d, A.exact()).status == "ok"
    v = compare(flipped, o, None, d, A.exact(signed_zeros=True))
    assert v.status == "MISMATCH" and "signed-zero" in v.message
    # exact is against the oracle rounded to the case dtype (Cast f64 -> f16 in f64 mode)
    o = np.array([0.1, 1 / 3])
    assert compare(o.astype(np.float16), o, None, Shape([2], F16), A.exact()).status == "ok"


def test_flushed_subnormal_results_pass_ulp_but_not_exact_contracts():
    sub = np.float32(1e-40)                          # an f32 subnormal
    o, d = np.array([1.0, float(sub)]), Shape([2], F32)
    flushed = np.array([1.0, 0.0], np.float32)
    assert compare(flushed, o, None, d, A.ulp(1)).status == "ok"
    assert compare(flushed, o, None, d, A.exact()).status == "MISMATCH"
    assert compare(flushed, o, None, d, dataclasses.replace(A.ulp(1), ftz=False)).status \
        == "MISMATCH"


def test_complex_outputs_compare_by_modulus():
    o = np.array([1 + 1j, 2 - 3j])
    d = Shape([2], DType.C64)
    assert compare(o.astype(np.complex64), o, None, d, A.ulp(1)).status == "ok"
    bad = (o + [0, 1e-3]).astype(np.complex64)
    assert compare(bad, o, None, d, A.ulp(1)).status == "MISMATCH"


def test_compare_outputs_worst_status_wins_and_names_the_output():
    o = np.array([1.0, 2.0])
    d = [Shape([2], F32)] * 2
    good = o.astype(np.float32)
    v = compare_outputs([good, np.zeros(2, np.float32)], [o, o], None, d, ULP4)
    assert v.status == "MISSING" and v.message.startswith("output 1: ")
    v = compare_outputs([good, good + 1], [o, o], [good, good], d, [ULP4, ULP4])
    assert v.status == "MISMATCH" and v.message.startswith("output 1: ")
    assert compare_outputs([good, good], [o, o], None, d, ULP4).status == "ok"
    v = compare_outputs([good], [o, o], None, d, ULP4)
    assert v.status == "MISMATCH" and "returned 1 outputs" in v.message


# ── contracts, defaults, overrides ────────────────────────────────────────

def shapes(*dims, dt=F32):
    return [Shape(d, dt) for d in dims]


def test_defaults_by_family_and_caps():
    tr = A.accuracy_for(get("Transpose"), get("Transpose").attrs((1, 0)), shapes((2, 3)), F32)
    assert tr.kind == A.EXACT and tr.signed_zeros
    assert A.accuracy_for(get("Constant"), None, [], F32).kind == A.EXACT
    gelu = A.accuracy_for(get("Activation"), get("Activation").attrs("Gelu"), shapes((3,)), F32)
    assert (gelu.kind, gelu.ulps, gelu.floor) == (A.ULP, 20, 16)
    relu = A.accuracy_for(get("Activation"), get("Activation").attrs("Relu"), shapes((3,)), F32)
    assert relu.kind == A.EXACT
    for kind in ("ArgMax", "TopK", "Where", "Cast", "Compare", "Clamp", "CumMax"):
        assert get(kind).accuracy.kind == A.EXACT, kind


def test_reduction_k_comes_from_the_op():
    mm = A.accuracy_for(get("MatMul"), None, shapes((2, 7), (7, 3)), F32)
    assert (mm.kind, mm.k, mm.scale) == (A.REDUCTION, 7, "rss")
    conv = get("Conv")
    a = conv.attrs((3, 3), (1, 1), (0, 0), (1, 1), 2)
    assert A.accuracy_for(conv, a, shapes((1, 4, 8, 8), (6, 2, 3, 3)), F32).k == 18
    red = get("Reduce")
    a = red.attrs("Sum", (0, 2), False)
    assert A.accuracy_for(red, a, shapes((2, 3, 5)), F32).k == 10
    att = get("Attention")
    a = att.attrs(2, 4, None, "Causal", None, None)
    acc = A.accuracy_for(att, a, shapes((1, 3, 8), (1, 5, 8), (1, 5, 8)), F32)
    assert acc.k == 5 * 4 and acc.scale == "abs"
    assert get("MatMul").accuracy.describe() == "reduction(c=2, K=K(attrs), rss, +1 ulp)"
    sm = A.accuracy_for(get("Softmax"), get("Softmax").attrs(-1), shapes((2, 9)), F32)
    assert sm.k == 9 and sm.axes == (-1,) and sm.scale == "row"
    dyn = A.accuracy_for(get("MatMul"), None, [Shape((2, Dyn(0)), F32), Shape((Dyn(0), 3),
                                                                              F32)], F32)
    assert dyn.k == A._DYN_K


def test_every_opdef_resolves_a_contract_for_its_samples():
    rng = np.random.default_rng(0)
    for d in all_opdefs():
        for s in (d.samples(rng) if d.samples else [])[:3]:
            sh = [Shape(np.shape(x), DType.of(np.asarray(x))) for x in s.inputs]
            acc = A.accuracy_for(d, s.attrs, sh, sh[0].dtype if sh else F32)
            assert acc.kind in (A.EXACT, A.ULP, A.REDUCTION), d.kind
            assert acc.describe()


def _one_op_case(kind, attrs, *inputs):
    return _case(get(kind), attrs, inputs, None)


def test_case_accuracy_binds_input_derived_scales():
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((3, 5)), rng.standard_normal((5, 2))
    acc = A.case_accuracy(_one_op_case("MatMul", None, x, w))
    assert np.allclose(acc.scale_array * acc.scale_unit, np.sqrt((x * x) @ (w * w)))
    red = get("Reduce").attrs("Mean", (1,), False)
    acc = A.case_accuracy(_one_op_case("Reduce", red, x))
    assert np.allclose(acc.scale_array * acc.scale_unit, np.sqrt((x * x).sum(1)) / 5)
    sin = A.case_accuracy(_one_op_case("Activation", get("Activation").attrs("Sin"), x))
    assert np.array_equal(sin.inscale, np.abs(x))
    a = np.array([[4.0, 1.0], [2.0, 3.0]])
    solve = A.case_accuracy(_one_op_case("DenseSolve", None, a, np.array([1.0, 2.0])))
    xs = np.linalg.solve(a, [1.0, 2.0])
    assert solve.scale_array == pytest.approx(np.linalg.cond(a, np.inf) * np.abs(xs).max())
    # f64 extremes: the squares would overflow; the unit keeps the budget finite
    big = np.array([[1.7e308, -1.7e308, 1.0]])
    acc = A.case_accuracy(_one_op_case("Reduce", get("Reduce").attrs("Sum", (1,), False), big))
    assert np.isfinite(A.budget(acc, np.array([1.0]), DType.F64)).all()
    # overrides arrive through the same door
    assert A.case_accuracy(_one_op_case("MatMul", None, x, w), {"c": 9}).c == 9


def test_sum_contract_accepts_sequential_sums_and_catches_a_dropped_term():
    sum_all = get("Reduce").attrs("Sum", (0,), False)
    d = Shape([], F32)
    const = np.full(4096, 0.1, np.float32)          # same sign: sequential drift ~ K²·eps
    case = _one_op_case("Reduce", sum_all, const)
    o64 = Interpreter(case.graph, float64=True).run(case.inputs)[0]
    seq = np.add.accumulate(const, dtype=np.float32)[-1]
    assert abs(float(seq) - float(o64)) > 100 * np.spacing(np.float32(409.6))
    assert compare(np.float32(seq), o64, None, d, A.case_accuracy(case)).status == "ok"
    x = np.random.default_rng(5).standard_normal(4096).astype(np.float32)
    case = _one_op_case("Reduce", sum_all, x)
    o64 = Interpreter(case.graph, float64=True).run(case.inputs)[0]
    acc = A.case_accuracy(case)
    seq = np.add.accumulate(x, dtype=np.float32)[-1]
    assert compare(np.float32(seq), o64, None, d, acc).status == "ok"
    dropped = np.float32(o64 - x[np.argsort(np.abs(x))[len(x) // 4]])   # a typical term
    assert compare(dropped, o64, None, d, acc).status == "MISMATCH"


def test_unbound_scales_fall_back_to_the_output():
    acc = A._resolve(A.reduction(1, 1, "rss", ulps=0), None, [])
    b = A.budget(acc, np.array([1.0, -3.0]), DType.F64)
    assert np.allclose(b, 2.0 ** -52 * 3.0)


def test_control_flow_and_regions_compose_their_bodies():
    rng = np.random.default_rng(0)
    scan = next(s for s in get("Scan").samples(rng) if s.attrs.length > 1)
    sh = [Shape(np.shape(x), DType.of(np.asarray(x))) for x in scan.inputs]
    one = A.composite([A.graph_work(scan.attrs.body, F32)], 1)
    acc = A.accuracy_for(get("Scan"), scan.attrs, sh, F32)
    assert acc.kind == A.REDUCTION and acc.k == pytest.approx(one.k * scan.attrs.length)
    reg = get("ElementwiseRegion")
    sample = reg.samples(rng)[0]                      # Add then Relu
    acc = A.accuracy_for(reg, sample.attrs, [], F32)
    assert (acc.kind, acc.ulps, acc.floor) == (A.ULP, 1, 0.5)


def test_overrides_widen_contracts_and_reject_nonsense():
    mm = A.accuracy_for(get("MatMul"), None, shapes((2, 7), (7, 3)), F32)
    wide = A.apply_override(mm, {"c": 8})
    assert wide.c == 8 and "override c=8" in wide.reason
    assert A.apply_override(A.ulp(4), {"ulps": 8}).ulps_16 == 8
    assert A.apply_override(A.exact(), {"ulps": 2}).kind == A.ULP
    assert A.apply_override(A.ulp(4), {}) == A.ulp(4)
    with pytest.raises(ValueError, match="needs a reduction contract"):
        A.apply_override(A.ulp(4), {"c": 4})
    with pytest.raises(ValueError, match="unknown tolerance override"):
        A.apply_override(A.ulp(4), {"rtol": 1e-3})


def test_composite_contract_of_an_f16_mlp():
    for dt in (F16, F32):
        g, feeds = _mlp(dt)
        acc = A.graph_accuracy(g, dt)
        # f16: ~1 eps16 per node; f32: 2·16 (MatMul) + 20 (Gelu) + 2·8 (Softmax) + ulps
        assert acc.kind == A.REDUCTION and acc.work == "case"
        assert acc.k == pytest.approx(3, abs=0.1) if dt is F16 else acc.k > 60
        o64 = Interpreter(g, float64=True).run(feeds)[0]
        oc = Interpreter(g).run(feeds)[0]
        d = g.nodes[g.outputs[0]].shape
        v = compare(oc, o64, None, d, acc)
        assert v.status == "ok" and v.budget_ratio <= 1, v.message
        bad = oc.copy()
        bad.flat[np.argmax(np.abs(o64))] *= 1.02
        assert compare(bad, o64, None, d, acc).status == "MISMATCH"


def _mlp(dt):
    rng = np.random.default_rng(1)
    g = Graph("mlp")
    x = rng.standard_normal((4, 16)).astype(dt.np)
    w = (rng.standard_normal((16, 8)) * 0.3).astype(dt.np)
    ix = g.add_node(Op("Input", get("Input").attrs("x")), [], Shape((4, 16), dt))
    iw = g.add_node(Op("Input", get("Input").attrs("w")), [], Shape((16, 8), dt))
    h = g.add_node(Op("MatMul", None), [ix, iw], Shape((4, 8), dt))
    a = g.add_node(Op("Activation", get("Activation").attrs("Gelu")), [h], Shape((4, 8), dt))
    s = g.add_node(Op("Softmax", get("Softmax").attrs(-1)), [a], Shape((4, 8), dt))
    g.set_outputs([s])
    return g, {"x": x, "w": w}


# ── the property: contracts are neither too tight nor too loose ──────────

_SKIP_INPUTS = ("ind", "cond", "predicate", "mask")


def _variants(d, sample):
    """The sample as given, then with its f32 data inputs in f16 and bf16."""
    yield sample.inputs, sample.out
    names = d.input_names
    if not sample.inputs or not all(
            np.asarray(x).dtype != np.float64 for x in sample.inputs):
        return
    for dt in (F16, BF16):
        ins = []
        for i, x in enumerate(sample.inputs):
            name = names[min(i, len(names) - 1)] if names else ""
            x = np.asarray(x)
            data = x.dtype == np.float32 and not any(k in name.lower() for k in _SKIP_INPUTS)
            ins.append(x.astype(dt.np) if data else x)
        out = sample.out
        if out is not None and out.dtype is F32:
            out = out.with_dtype(dt)
        yield tuple(ins), out


def _case(d, attrs, inputs, out):
    g = single_op_graph(d.kind, attrs, inputs, out)
    feeds = {f"x{i}": np.asarray(x) for i, x in enumerate(inputs)}
    dt = DType.of(np.asarray(inputs[0])) if inputs else g.nodes[-1].shape.dtype
    return Case("t", d.kind, dt.display, (), g, feeds)


def _registry_runs():
    rng = np.random.default_rng(0)
    for d in all_opdefs():
        for k, s in enumerate(d.samples(rng) if d.samples else []):
            for inputs, out in _variants(d, s):
                try:
                    case = _case(d, s.attrs, inputs, out)
                    o64 = Interpreter(case.graph, float64=True).run(case.inputs)[0]
                    oc = Interpreter(case.graph).run(case.inputs)[0]
                except Exception:  # noqa: BLE001 - error samples and invalid variants
                    continue
                yield f"{d.kind}[{k}] {case.dtype} {s.tags}", case, o64, oc


_RUNS = None


def registry_runs():
    global _RUNS
    if _RUNS is None:
        _RUNS = list(_registry_runs())
    return _RUNS


def test_registry_oracle_in_case_dtype_meets_every_contract():
    runs = registry_runs()
    assert len(runs) > 1000
    bad = []
    for name, case, o64, oc in runs:
        d = case.graph.nodes[case.graph.outputs[0]].shape
        v = compare(oc, o64, None, d, A.case_accuracy(case))
        if v.status != "ok" or (v.budget_ratio or 0) > 1:
            bad.append(f"{name}: {v.message}")
    assert not bad, "\n".join(bad[:20])


def test_registry_contracts_catch_a_one_percent_error():
    missed, tried = [], 0
    for name, case, o64, oc in registry_runs():
        d = case.graph.nodes[case.graph.outputs[0]].shape
        if not d.dtype.is_float:
            continue
        o = np.asarray(o64, np.float64)
        with np.errstate(over="ignore"):
            fin = np.isfinite(o) & np.isfinite(o.astype(d.dtype.np).astype(np.float64) * 1.05)
        if not fin.any() or np.abs(o[fin]).max() < 1e-3:
            continue
        i = np.unravel_index(np.argmax(np.where(fin, np.abs(o), -1)), o.shape)
        acc = A.case_accuracy(case)
        step = 0.03 if d.dtype is BF16 else 0.01      # bf16 holds 8 bits: 1% ≈ 1-2 ulp
        for val in (o[i] * (1 + step), 0.0):
            got = oc.copy()
            got[i] = val
            tried += 1
            if compare(got, o64, None, d, acc).status == "ok":
                missed.append(f"{name}: {val} at {list(i)} under {acc.describe()}")
    assert tried > 1000 and not missed, "\n".join(missed[:20])
