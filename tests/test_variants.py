"""Kernel variants: declarations, thresholds as options, and which variants a run used."""
import numpy as np
import pytest

from rlx_ref.backends import variants
from rlx_ref.backends.registry import get_backend
from rlx_ref.interpret import interpret
from rlx_ref.ops.opdef import get
from rlx_ref.ops.single import single_op_graph
from rlx_ref.runtime.options import CompileOptions

pytest.importorskip("numba")
NB = get_backend("numba-cpu")
F = np.float32


def _run(kind, attrs, *xs, options=None):
    """(oracle output, backend output, variants the run used)."""
    g = single_op_graph(kind, attrs, xs, None)
    feeds = {f"x{i}": x for i, x in enumerate(xs)}
    exe = NB.compile(g, options)
    got = exe.run(feeds)[0]
    return interpret(g, feeds)[0], got, exe.variants_run()


def test_every_declared_name_is_qualified_and_every_threshold_has_a_floor():
    for backend in variants.backends():
        for name, v in variants.declared(backend).items():
            assert name.startswith(backend + ":") and v.kinds and v.rule
        for t in variants.thresholds(backend).values():
            assert 0 <= t.floor <= t.default


def test_variants_serving_a_kind():
    names = [v.name for v in variants.serving("opencl", "Reduce")]
    assert "opencl:reduce.rows.segmented" in names and "opencl:softmax.rows_cpu" not in names
    assert all("Transpose" in v.kinds for v in variants.serving("numba-cpu", "Transpose"))


def test_a_large_transpose_records_the_tiled_variant():
    x = np.arange(512 * 160, dtype=F).reshape(512, 160)          # 320 KiB >= 256 KiB
    want, got, ran = _run("Transpose", get("Transpose").attrs((1, 0)), x)
    assert got.tobytes() == want.tobytes()
    assert ran == ["numba-cpu:transpose.tiled"]


def test_lowered_thresholds_pick_the_other_path_and_match_the_oracle():
    x = np.arange(6 * 5, dtype=F).reshape(6, 5)
    attrs = get("Transpose").attrs((1, 0))
    assert _run("Transpose", attrs, x)[2] == ["numba-cpu:move.serial"]
    opts = CompileOptions(thresholds={"numba-cpu:move.par_bytes": 1})
    want, got, ran = _run("Transpose", attrs, x, options=opts)
    assert got.tobytes() == want.tobytes() and ran == ["numba-cpu:transpose.tiled"]


def test_the_environment_lowers_thresholds(monkeypatch):
    monkeypatch.setenv(variants.ENV, "numba-cpu:par_elements=1")
    x = np.linspace(-1, 1, 12, dtype=F).reshape(3, 4)
    want, got, ran = _run("Softmax", get("Softmax").attrs(-1), x)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert ran == ["numba-cpu:softmax.rows.par"]


def test_bad_threshold_options_name_what_is_wrong():
    x = np.ones((2, 3), F)
    g = single_op_graph("Transpose", get("Transpose").attrs((1, 0)), (x,), None)
    with pytest.raises(ValueError, match="unknown threshold 'numba-cpu:nope'.*declares"):
        NB.compile(g, CompileOptions(thresholds={"numba-cpu:nope": 3}))
    with pytest.raises(ValueError, match="floor"):
        NB.compile(g, CompileOptions(thresholds={"numba-cpu:move.par_bytes": 0}))
    with pytest.raises(ValueError, match="thresholds must be a dict"):
        CompileOptions(thresholds=[("numba-cpu:par_elements", 1)])
    with pytest.raises(ValueError, match="not name=integer"):
        variants.parse_values("numba-cpu:par_elements")
    assert variants.parse_values("a=2k, b=1m") == {"a": 2048, "b": 1 << 20}


def _opencl():
    be = get_backend("opencl")
    ok, why = be.availability()
    if not ok:
        pytest.skip(why)
    return be


def test_opencl_segmented_row_reduce_under_lowered_thresholds_matches_the_oracle():
    be = _opencl()
    x = np.random.default_rng(0).standard_normal((2, 1000)).astype(F)
    g = single_op_graph("Reduce", get("Reduce").attrs("Sum", (1,), False), (x,), None)
    feeds = {"x0": x}
    plain = be.compile(g)
    plain.run(feeds)
    assert "opencl:reduce.rows.segmented" not in plain.variants_run()
    low = be.compile(g, CompileOptions(thresholds={"opencl:reduce.min_segment_cpu": 16,
                                                   "opencl:reduce.min_segment_gpu": 16}))
    got = low.run(feeds)[0]
    assert "opencl:reduce.rows.segmented" in low.variants_run()
    np.testing.assert_allclose(got, interpret(g, feeds)[0], rtol=1e-5, atol=1e-5)


def test_recording_an_undeclared_variant_fails_loudly():
    with pytest.raises(ValueError, match="'numba-cpu:nope' is not declared"):
        variants.chose("numba-cpu:nope")


def test_every_literal_variant_a_lowering_names_is_declared():
    import pathlib
    import re

    root = pathlib.Path(variants.__file__).parent
    pat = re.compile(r'\b(?:use|use_par|use_dev)\(\s*f?"([a-z0-9_.]+)"|'
                     r'\bpick\([^)]*?,\s*"([a-z0-9_.]+)"\)|_pick\([^)]*?"([a-z0-9_.]+)"\)')
    for backend, pkg in (("numba-cpu", "numba_cpu"), ("opencl", "opencl")):
        known = variants.declared(backend)
        found = set()
        for path in (root / pkg).glob("lower*.py"):
            for m in pat.finditer(path.read_text()):
                found.add(next(g for g in m.groups() if g))
        assert found, backend
        for short in found:
            names = [n for n in known if n == f"{backend}:{short}" or
                     n.startswith(f"{backend}:{short}.") or n.startswith(f"{backend}:{short}_")]
            assert names, f"{backend}:{short} is used by a lowering but not declared"


def test_conformance_records_variants_per_case_and_lowers_tagged_cases():
    from rlx_ref.conformance.cases import build_cases
    from rlx_ref.conformance.ledger import load_ledger
    from rlx_ref.conformance.runner import run_case

    cases = build_cases(["Transpose"])
    lowered = [c for c in cases if variants.LOWERED_TAG in c.tags]
    plain = [c for c in cases if variants.LOWERED_TAG not in c.tags and not c.expect_error]
    assert 0 < len(lowered) <= 6 and plain
    res = run_case(NB, lowered[0], load_ledger())
    assert res.status == "ok" and res.variants
    assert set(res.variants) <= {"numba-cpu:move.par", "numba-cpu:transpose.tiled"}
    res = run_case(NB, plain[0], load_ledger())
    assert res.status == "ok" and res.variants == ["numba-cpu:move.serial"]
    assert res.to_json()["variants"] == ["numba-cpu:move.serial"]


def test_the_full_tier_adds_large_cases_above_the_real_thresholds():
    from rlx_ref.conformance.cases import build_cases

    default = build_cases(["Transpose"])
    full = build_cases(["Transpose"], tier="full")
    large = [c for c in full if "large" in c.tags]
    assert not [c for c in default if "large" in c.tags] and large
    assert all(c.inputs["x0"].nbytes >= variants.thresholds("numba-cpu")[
        "numba-cpu:move.par_bytes"].default for c in large)
    with pytest.raises(ValueError, match="unknown case tier 'huge'"):
        build_cases(["Transpose"], tier="huge")


def test_concurrent_runs_report_the_same_variants():
    from concurrent.futures import ThreadPoolExecutor

    x = np.arange(512 * 160, dtype=F).reshape(512, 160)
    g = single_op_graph("Transpose", get("Transpose").attrs((1, 0)), (x,), None)
    exe = NB.compile(g)
    assert exe.variants_run() == []             # nothing has run yet
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda _: exe.run({"x0": x})[0], range(8)))
    assert all(o.tobytes() == x.T.tobytes() for o in outs)
    assert exe.variants_run() == ["numba-cpu:transpose.tiled"]


@pytest.mark.parametrize("kind", ["Reshape", "LayerNorm2d", "Reduce", "Scan", "Gather"])
def test_every_variant_a_case_runs_declares_a_kind_of_that_case(kind):
    from rlx_ref.conformance.cases import build_cases
    from rlx_ref.conformance.ledger import load_ledger
    from rlx_ref.conformance.runner import run_case

    declared = variants.declared("numba-cpu")
    cases = [c for c in build_cases([kind]) if not c.expect_error]
    picked = [c for c in cases if variants.LOWERED_TAG in c.tags][:3] + cases[:3]
    for case in picked:
        res = run_case(NB, case, load_ledger())
        assert res.status == "ok" and res.variants, (case.id, res.message)
        for name in res.variants:
            assert set(declared[name].kinds) & set(case.kinds), (name, case.kinds)


def test_large_cases_reach_the_large_kernels_at_the_default_thresholds():
    from rlx_ref.conformance._cases_variants import large_cases
    from rlx_ref.conformance.ledger import load_ledger
    from rlx_ref.conformance.runner import run_case

    seen = set()
    for case in large_cases():
        res = run_case(NB, case, load_ledger())
        assert res.status == "ok", (case.id, res.message)
        seen.update(res.variants)
    assert {"numba-cpu:transpose.tiled", "numba-cpu:move.par", "numba-cpu:reduce.chunks_par",
            "numba-cpu:matmul.blas.par", "numba-cpu:ew.par"} <= seen


def test_the_conformance_command_refuses_bad_threshold_settings_up_front(monkeypatch, capsys):
    from rlx_ref.cli import main

    monkeypatch.setenv(variants.ENV, "numba-cpu:move.par_bytes=0")
    assert main(["conformance", "--op", "Transpose", "--list"]) == 2
    assert "floor" in capsys.readouterr().err
    monkeypatch.setenv(variants.ENV, "numba-cpu:move.par_bytes=64")
    assert main(["conformance", "--op", "Transpose", "--list"]) == 0


def test_the_variants_command_lists_rules_and_thresholds_in_force(monkeypatch, capsys):
    from rlx_ref.cli import main

    monkeypatch.setenv(variants.ENV, "opencl:reduce.min_segment_cpu=64")
    assert main(["variants", "--backend", "opencl"]) == 0
    out = capsys.readouterr().out
    assert "opencl:reduce.rows.segmented" in out and "= 64 (default 32768)" in out
    assert main(["variants", "--backend", "nope"]) == 2
