"""Accumulation promises: backends declare where they accumulate in f64, conformance holds
them to the tighter bound, and moving a real kernel's accumulator to f32 fails it."""
import dataclasses

import numpy as np
import pytest

from rlx_ref._readers import FileInputError
from rlx_ref.backends.lowering_table import Accumulation, LoweringTable
from rlx_ref.backends.numba_cpu import _reduce_norm as numba_norm
from rlx_ref.backends.numba_cpu import lower_reduce as numba_reduce
from rlx_ref.backends.registry import get_backend
from rlx_ref.conformance import accuracy as A
from rlx_ref.conformance.ledger import Ledger
from rlx_ref.conformance.model import MISMATCH, OK, Case
from rlx_ref.conformance.runner import run_case
from rlx_ref.ir.dtype import DType
from rlx_ref.ops.opdef import get
from rlx_ref.ops.single import single_op_graph

F32 = DType.F32
K = 4096


def _case(kind, attrs, x, name, *more):
    g = single_op_graph(kind, attrs, [x, *more], None)
    feeds = {f"x{i}": v for i, v in enumerate([x, *more])}
    return Case(name, kind, DType.of(x).display, ("accumulation",), g, feeds)


def _offset(shape, seed=0):
    """1e4 + N(0, 1): a same-sign sum whose low digits an f32 accumulator loses."""
    return (1e4 + np.random.default_rng(seed).standard_normal(shape)).astype(np.float32)


def _cancelling(shape, axis, seed=1):
    """Terms of size 1e4 whose pairs cancel along ``axis``, plus N(0, 1): a small sum of
    large terms, where an f32 accumulator's error dwarfs the result's ulp."""
    rng = np.random.default_rng(seed)
    half = list(shape)
    half[axis] //= 2
    big = 1e4 * rng.standard_normal(half)
    terms = np.concatenate([big, -big], axis=axis)
    terms = np.take(terms, rng.permutation(shape[axis]), axis=axis)
    return (terms + rng.standard_normal(shape)).astype(np.float32)


def _cases(kinds):
    """(kind, case) for rows (reduced axis innermost) and columns (a middle axis)."""
    out = []
    for axis, shape in ((1, (3, K)), (0, (K, 8))):
        for data, x in (("offset", _offset(shape)), ("cancel", _cancelling(shape, axis))):
            name = f"{data}-axis{axis}"
            if "Reduce" in kinds:
                for op in ("Sum", "Mean"):
                    attrs = get("Reduce").attrs(op, (axis,), False)
                    out.append(_case("Reduce", attrs, x, f"Reduce-{op}-{name}"))
            if "Cumsum" in kinds:
                attrs = get("Cumsum").attrs(axis, False)
                out.append(_case("Cumsum", attrs, x, f"Cumsum-{name}"))
    return out


def _norm_cases():
    """LayerNorm over the last axis (blocks) and a middle one (columns), RmsNorm and
    GroupNorm, each on a 1e4 + N(0, 1) input; gamma and beta N(0, 1)."""
    rng = np.random.default_rng(2)
    out = []
    for kind, shape, attrs, c in (
            ("LayerNorm", (6, 512), get("LayerNorm").attrs(-1, 1e-5), 512),
            ("LayerNorm", (4, 512, 3), get("LayerNorm").attrs(1, 1e-5), 512),
            ("RmsNorm", (6, 512), get("RmsNorm").attrs(-1, 1e-5), 512),
            ("GroupNorm", (2, 8, 128), get("GroupNorm").attrs(2, 1e-5), 8)):
        g, b = (rng.standard_normal(c).astype(np.float32) for _ in "gb")
        out.append(_case(kind, attrs, _offset(shape, 3), f"{kind}-{len(shape)}d", g, b))
    return out


class _NoPromises:
    """A backend seen without its promises: what the generic contracts say."""

    def __init__(self, backend):
        self._b, self.name = backend, backend.name

    def compile(self, graph, options=None):
        return self._b.compile(graph, options)


def _statuses(backend, cases):
    return {c.id: run_case(backend, c, Ledger([])) for c in cases}


# ── the declaration ────────────────────────────────────────────────────────

def test_numba_cpu_declares_f64_sums_and_scans():
    promises = get_backend("numba-cpu").accumulation()
    red = next(p for p in promises if p.kind == "Reduce")
    assert set(red.ops) == {"Sum", "Mean"} and red.in_ == "f64"
    assert red.covers("Reduce", "Sum", F32) and red.covers("Reduce", "Mean", DType.BF16)
    assert not red.covers("Reduce", "Max", F32) and not red.covers("Reduce", "Sum", DType.F64)
    assert any(p.covers("Cumsum", None, DType.F16) for p in promises)
    desc = get_backend("numba-cpu").describe()["accumulation"]
    assert {"kind": "Reduce", "ops": ["Sum", "Mean"], "in": "f64",
            "dtypes": ["bf16", "f16", "f32"],
            "text": "Reduce Sum/Mean accumulates in f64"} in desc


def test_a_promise_names_a_known_accumulator_and_condition():
    table = LoweringTable("t", "rlx_ref", ())
    with pytest.raises(ValueError, match="accumulates in 'f128'.*expected one of"):
        table.accumulates("Reduce", (F32,), "f128")
    table.accumulates("Cumsum", (F32,), when="on-mars")(lambda: None)
    with pytest.raises(ValueError, match=r"promised for \['Cumsum'\], which it does not"):
        table.accumulation()
    backend = get_backend("numba-cpu")
    with pytest.raises(ValueError, match="unknown accumulation condition 'on-mars'"):
        backend.promise_holds("on-mars")


# ── the model ──────────────────────────────────────────────────────────────

def test_promised_budget_is_one_ulp_plus_the_f64_sum_error():
    x = _offset((1, K))
    case = _case("Reduce", get("Reduce").attrs("Sum", (1,), False), x, "sum")
    generic = A.case_accuracy(case)
    promise = Accumulation("Reduce", frozenset({F32}), "f64", ("Sum",))
    tight = A.case_accuracy(case, None, [promise])
    assert tight.accum is DType.F64 and "accumulates in f64" in tight.describe()
    o64 = np.asarray([x.astype(np.float64).sum()])
    rss = np.sqrt((x.astype(np.float64) ** 2).sum())
    want = A.ulp_of(o64, F32) + 2 * A.eps(DType.F64) * K * max(rss, o64[0])
    assert np.allclose(A.budget(tight, o64, F32), want, rtol=1e-12)
    loose = A.budget(generic, o64, F32)
    assert loose[0] > 1000 * A.budget(tight, o64, F32)[0]
    # a ledger override still widens it; f64 cases and uncovered ops keep the generic one
    assert A.case_accuracy(case, {"c": 8}, [promise]).c == 8
    f64 = _case("Reduce", get("Reduce").attrs("Sum", (1,), False), x.astype(np.float64), "d")
    assert A.case_accuracy(f64, None, [promise]).accum is None
    mx = _case("Reduce", get("Reduce").attrs("Max", (1,), False), x, "max")
    assert A.case_accuracy(mx, None, [promise]) == A.case_accuracy(mx)
    assert A.promised(A.ulp(4), promise, F32) == A.ulp(4)


# ── the proof: the real kernels pass, an f32 accumulator fails ─────────────

def _check_promise_catches_f32(backend, cases, narrow, may_pass=()):
    """Every case passes the promised contract on the real kernel; with ``narrow()``
    applied (the accumulator moved to f32) every one but ``may_pass`` fails it."""
    real = _statuses(backend, cases)
    bad = {i: (r.status, r.message) for i, r in real.items() if r.status != OK}
    assert not bad, bad
    assert all("accumulates in f64" in r.contract for r in real.values())
    narrow()
    moved = _statuses(backend, cases)
    passed = [i for i, r in moved.items() if r.status != MISMATCH and i not in may_pass]
    assert not passed, f"an f32 accumulator still passes {passed}"
    return moved


# A row sum in f32 over many independent vector chains (numba-cpu's, OpenCL's) of same-sign
# terms is within an ulp of its result: no bound that allows the final rounding can tell
# it from f64 there; the cancelling rows and every other layout show it.
_LANE_ROWS = ("Reduce-Sum-offset-axis1", "Reduce-Mean-offset-axis1")


def test_numba_cpu_f32_accumulator_fails_the_promise(monkeypatch):
    backend = get_backend("numba-cpu")
    cases = _cases(("Reduce", "Cumsum"))
    moved = _check_promise_catches_f32(
        backend, cases, lambda: monkeypatch.setitem(numba_reduce.ACC, "float", np.float32),
        _LANE_ROWS)
    # the generic contracts alone let the f32 accumulators through
    generic = _statuses(_NoPromises(backend), cases)
    assert all(r.status == OK for r in generic.values()), {
        i: r.message for i, r in generic.items() if r.status != OK}
    assert all("accumulates" not in r.contract for r in generic.values())
    assert all(r.budget_ratio > 1 for i, r in moved.items() if i not in _LANE_ROWS)


def test_numba_cpu_f32_norm_statistics_fail_the_promise(monkeypatch):
    backend = get_backend("numba-cpu")
    _check_promise_catches_f32(backend, _norm_cases(),
                               lambda: monkeypatch.setattr(numba_norm, "ACC", "np.float32"))


def _opencl():
    pytest.importorskip("pyopencl")
    cl = get_backend("opencl")
    if not cl.availability()[0]:
        pytest.skip(f"no OpenCL device: {cl.availability()[1]}")
    return cl


def test_opencl_f32_sum_and_scan_accumulators_fail_the_promise(monkeypatch):
    from rlx_ref.backends.opencl import _reduce_fold, _reduce_scan

    cl = _opencl()
    if not any(p.kind == "Cumsum" for p in cl.accumulation()):
        pytest.skip(f"{cl.device}: no fp64 CPU-style kernels, so no promise to check")

    def narrow():
        monkeypatch.setattr(_reduce_scan, "WIDE", "float")
        monkeypatch.setattr(_reduce_fold, "WIDE", "float")
    moved = _check_promise_catches_f32(cl, _cases(("Reduce", "Cumsum")), narrow, _LANE_ROWS)
    generic = _statuses(_NoPromises(cl), _cases(("Reduce", "Cumsum")))
    assert all(r.status == OK for r in generic.values()), {
        i: r.message for i, r in generic.items() if r.status != OK}
    assert all(r.budget_ratio > 1 for i, r in moved.items() if i not in _LANE_ROWS)


def test_opencl_f32_norm_statistics_fail_the_promise(monkeypatch):
    from rlx_ref.backends.opencl import _reduce_norm

    cl = _opencl()
    if not any(p.kind == "LayerNorm" for p in cl.accumulation()):
        pytest.skip(f"{cl.device}: no fp64 CPU-style norms, so no promise to check")
    _check_promise_catches_f32(cl, _norm_cases(),
                               lambda: monkeypatch.setattr(_reduce_norm, "WIDE", "float"))


def test_opencl_promises_follow_the_device(monkeypatch):
    from rlx_ref.backends.opencl import _reduce_c

    cl = _opencl()
    monkeypatch.setattr(_reduce_c, "gpu_style", lambda device: True)
    assert not cl.accumulation()        # work-group kernels run in float
    fp64 = bool(cl._device()[0].fp64)
    monkeypatch.setattr(_reduce_c, "gpu_style", lambda device: False)
    kinds = {p.kind for p in cl.accumulation()}
    assert kinds == ({"Reduce", "Cumsum", "LayerNorm", "RmsNorm", "GroupNorm", "LayerNorm2d"}
                     if fp64 else set())


def test_results_record_the_contract():
    case = _cases(("Cumsum",))[0]
    r = run_case(get_backend("numba-cpu"), case, Ledger([]))
    d = r.to_json()
    assert "accumulates in f64" in d["contract"]
    assert dataclasses.replace(r, contract="").to_json()["contract"] == ""


def test_report_shows_the_kinds_held_to_an_accumulation_contract(tmp_path):
    from rlx_ref.conformance import report
    from rlx_ref.conformance.runner import results_document, write_results

    backend = get_backend("numba-cpu")
    results = [run_case(backend, c, Ledger([])).to_json() for c in _cases(("Cumsum",))[:2]]
    path = tmp_path / "results.json"
    write_results(results_document([backend], results, machine="m"), path)
    rep = report.render_json(report.load_results(path))
    held = {a["kind"]: a for a in rep["accumulation"]}
    assert held["Cumsum"] == {"column": "numba-cpu", "kind": "Cumsum", "cases": 2, "ok": 2,
                              "promise": "Cumsum accumulates in f64"}
    assert held["Reduce"]["cases"] == 0            # declared, no cases in this file
    page = report.render_markdown(report.load_results(path))
    assert "## Accumulation contracts" in page
    assert "| **numba-cpu** | `Cumsum` | Cumsum accumulates in f64 | 2 | 2/2 |" in page
    bad = results_document([backend], results, machine="m")
    bad["backends"]["numba-cpu"]["accumulation"] = ["Cumsum"]
    write_results(bad, path)
    with pytest.raises(FileInputError, match="accumulation is not a list of promises"):
        report.load_results(path)


def test_a_promise_drops_the_case_dtype_fallback():
    from rlx_ref.conformance.compare import compare
    from rlx_ref.ir.shape import Shape

    x = _offset((K,))
    o64 = np.asarray([x.astype(np.float64).sum()])
    seq = np.float32(0)
    for v in x:                      # a sequential f32 sum: the case-dtype oracle's kind
        seq = np.float32(seq + v)
    got = oc = np.asarray([seq], np.float32)
    assert abs(float(seq) - o64[0]) > 2 * A.ulp_of(o64, F32)[0]
    tight = A.reduction(2, K, "all", ulps=1.0)
    promise = Accumulation("Reduce", frozenset({F32}), "f64", ("Sum",))
    tight = A.promised(tight, promise, F32)
    d = Shape((1,), F32)
    # one ulp alone would fail it too; the case-dtype oracle's own error is what lets it pass
    one_ulp = A.reduction(0, K, "all", ulps=1.0)
    assert compare(got, o64, oc, d, one_ulp).ok
    assert not compare(got, o64, None, d, one_ulp).ok
    v = compare(got, o64, oc, d, tight)
    assert v.status == MISMATCH and "accumulates in f64" in v.message
