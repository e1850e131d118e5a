"""Conformance cases: the counter-based RNG (pinned bits), case building, ids, edge coverage,
dtype expansion, non-contiguous feeds and the multi-op cases."""
import fnmatch
import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest

from rlx_ref.conformance._cases_edges import edge_kinds
from rlx_ref.conformance._cases_values import LENGTHS, SPECIAL_CLASSES
from rlx_ref.conformance.cases import (
    array_bytes,
    build_cases,
    case_by_id,
    dtype_variants,
    filter_cases,
    is_index_input,
    sample_specs,
)
from rlx_ref.conformance.multi import multi_op_cases
from rlx_ref.conformance.rng import CounterRNG
from rlx_ref.interpret import interpret
from rlx_ref.ir.verify import verify
from rlx_ref.ops.elementwise import ACTIVATIONS, BINARIES
from rlx_ref.ops.opdef import all_opdefs, get
from rlx_ref.ops.reduction import REDUCE_OPS

# Oracle defects the cases expose, id -> what is wrong. A listed case that starts passing
# fails the test below, so this table cannot go stale: delete the line when it does.
KNOWN_ORACLE_FAILURES: dict = {}

# Kinds whose registry samples still compute inputs with libm (np.cos/np.sin), so their ids
# follow numpy's SIMD code path; checked strictly below, delete an entry once fixed.
KNOWN_PLATFORM_DEPENDENT: dict = {
    "GaussianSplatRasterize": "its samples are GaussianSplatPrepare's outputs, computed with "
                              "np.exp / np.power (numpy's SIMD libm)",
}


@pytest.fixture(scope="module")
def cases():
    return build_cases()


def _input_hash(arr) -> str:
    return hashlib.sha256(array_bytes(np.asarray(arr))).hexdigest()[:16]


# ── CounterRNG ───────────────────────────────────────────────────────────────

def test_rng_words_and_floats_are_pinned():
    # Literals: these bits must be the same on every platform and numpy version.
    assert CounterRNG(0).words(4).tolist() == [
        3439515062021556735, 13637783842256281466, 5225716215508554744, 9252916579427210640]
    assert CounterRNG(2024, "Binary").words(3).tolist() == [
        12802808891535347834, 6659823506897432196, 15531354345971339187]
    r = CounterRNG(7, "pins")
    assert [float(v).hex() for v in r.random(3)] == [
        "0x1.23b7c6181d130p-4", "0x1.7d99e92b0f110p-5", "0x1.da9023e44d228p-3"]
    assert r.standard_normal(3).tolist() == [
        0.6763241549488157, 0.9647492310032248, 0.7174352081492543]
    assert r.integers(0, 100, 4).tolist() == [45, 36, 14, 96]
    assert r.permutation(5).tolist() == [2, 1, 0, 4, 3]
    assert r.uniform(-2, 3) == 1.4152989676343037


def test_rng_counter_continues_and_repeats():
    a, b = CounterRNG(3, "s"), CounterRNG(3, "s")
    np.testing.assert_array_equal(np.concatenate([a.words(3), a.words(2)]), b.words(5))
    assert a.counter == 5
    np.testing.assert_array_equal(CounterRNG(3, "s").standard_normal((4, 5)),
                                  CounterRNG(3, "s").standard_normal((4, 5)))


def test_rng_streams_and_seeds_are_independent():
    base = CounterRNG(0, "a").random(20000)
    for other in (CounterRNG(0, "b"), CounterRNG(1, "a"), CounterRNG(0, "a ")):
        x = other.random(20000)
        assert not np.array_equal(x, base)
        assert abs(np.corrcoef(x, base)[0, 1]) < 0.03
    assert abs(np.corrcoef(base[:-1], base[1:])[0, 1]) < 0.03     # no serial correlation


def test_rng_distributions_and_shapes():
    r = CounterRNG(11, "dist")
    u = r.random(50000)
    assert u.dtype == np.float64 and u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.005
    u32 = r.random(1000, dtype=np.float32)
    assert u32.dtype == np.float32 and np.all(u32 * 2**24 == np.round(u32 * 2**24))
    z = r.standard_normal(50000)
    assert abs(z.mean()) < 0.02 and abs(z.var() - 1) < 0.03 and np.abs(z).max() <= 6
    assert abs(np.mean(np.abs(z) > 1.96) - 0.05) < 0.01            # normal-like tails
    w = r.uniform(-3, 5, (40, 50))
    assert w.shape == (40, 50) and w.min() >= -3 and w.max() < 5
    i = r.integers(-4, 4, 8000)
    assert i.min() == -4 and i.max() == 3 and np.all(np.bincount(i + 4) > 850)
    assert sorted(r.permutation(9).tolist()) == list(range(9))
    assert isinstance(r.random(), float) and isinstance(r.standard_normal(), float)
    assert r.standard_normal(()).shape == () and r.random(0).shape == (0,)
    assert r.integers(5).dtype == np.int64 and 0 <= r.integers(5) < 5


# ── building, running, ids ───────────────────────────────────────────────────

def test_case_count_and_unique_ids(cases):
    # the CI budget: the default suite runs on reference and numba-cpu inside .ci/run's 45
    # minutes (8,637 cases with the 174-kind vocabulary); new cases must fit under this bound
    assert 2000 <= len(cases) <= 9000
    assert len({c.id for c in cases}) == len(cases)
    for c in cases:
        assert c.id.startswith(f"{c.op}.{c.dtype}.") and len(c.id.rsplit(".", 1)[1]) == 12


def test_every_case_verifies_and_runs_on_the_oracle(cases):
    failed = {}
    for c in cases:
        assert verify(c.graph) == [], c.id
        if c.expect_error:              # error cases: the oracle must raise (test_errors)
            continue
        try:
            out = interpret(c.graph, c.feeds(), c.params)
            out64 = interpret(c.graph, c.inputs, c.params, float64=True)
        except Exception as e:  # noqa: BLE001  (collected, then checked against the table)
            failed[c.id] = str(e).splitlines()[0]
            continue
        assert [o.shape for o in out] == [o.shape for o in out64], c.id
    unexpected = {k: v for k, v in failed.items() if k not in KNOWN_ORACLE_FAILURES}
    assert not unexpected, f"oracle failed on {len(unexpected)} cases: {unexpected}"
    fixed = set(KNOWN_ORACLE_FAILURES) - set(failed)
    assert not fixed, f"now passing, delete from KNOWN_ORACLE_FAILURES: {sorted(fixed)}"


def test_ids_and_input_hashes_are_pinned(cases):
    # If a registry sample, the text form or the RNG changes, these ids change: that is the
    # point (ids are content hashes). Update the literals only for an intended change.
    by_id = {c.id: c for c in cases}
    add = next(c for c in cases if c.op == "Binary" and c.source == "samples[0]")
    assert add.graph.nodes[-1].attrs.op == "Add" and add.id == "Binary.f32.8197444d333c"
    assert {k: _input_hash(v) for k, v in add.inputs.items()} == {
        "x0": "5af70727f428feb5", "x1": "55839cae1d3b7c0b"}
    relu = by_id["Activation.f32.63c55e4663d8"]
    assert relu.graph.nodes[-1].attrs.op == "Relu" and "len-257" in relu.tags
    assert _input_hash(relu.inputs["x0"]) == "f1079fc0491e710a"
    ties = by_id["ArgMax.f32.732059e704da"]
    assert {"ties", "len-1025"} <= set(ties.tags)
    assert _input_hash(ties.inputs["x0"]) == "8c42517d964e050a"
    mlp = by_id["multi:mlp.f32.cc43f55bb75c"]
    assert _input_hash(mlp.inputs["x"]) == "8b60ccdf66d6ee99"
    assert _input_hash(mlp.params["w1"]) == "49032cab1347f097"


def test_ids_are_stable_across_builds_and_change_with_content(cases):
    again = build_cases(["Binary", "multi:*"])
    assert [c.id for c in again] == [c.id for c in cases if c.op in
                                     ("Binary",) or c.op.startswith("multi:")]
    other = {c.id for c in build_cases(["Clamp"], seed=1)}
    assert not other & {c.id for c in cases if c.op == "Clamp"}


def _simd_targets() -> list:
    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    except ImportError:
        return []
    return [t for t in __cpu_dispatch__ if __cpu_features__.get(t)]


def test_ids_do_not_depend_on_the_cpu_code_path(cases):
    # Another machine, simulated: the same build with numpy's SIMD kernels switched off.
    targets = _simd_targets()
    if not targets:
        pytest.skip("numpy reports no dispatchable SIMD targets to switch off")
    env = dict(os.environ, NPY_DISABLE_CPU_FEATURES=" ".join(targets))
    code = ("from rlx_ref.conformance.cases import build_cases\n"
            "print('\\n'.join(c.id for c in build_cases()))")
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True)
    other = run.stdout.split()
    assert len(other) == len(cases)
    moved = {a.split(".")[0] for a, b in zip((c.id for c in cases), other) if a != b}
    assert moved == set(KNOWN_PLATFORM_DEPENDENT), (
        f"ids that follow the CPU code path: {sorted(moved)}; expected exactly "
        f"{sorted(KNOWN_PLATFORM_DEPENDENT)} (update the table when a kind is fixed)")


def test_filters_and_lookup(cases):
    assert {c.op for c in build_cases("Cum*,TopK")} == {"Cumsum", "CumProd", "CumMax", "TopK",
                                                        "CumsumBackward"}
    assert {c.dtype for c in build_cases(["Softmax"], dtypes=["f16"])} == {"f16"}
    assert all(c.op.startswith("multi:") for c in build_cases(["multi:*"]))
    picked = filter_cases(cases, "Reduce", ["bf16"])
    assert picked and all(c.op == "Reduce" and c.dtype == "bf16" for c in picked)
    one = cases[123]
    assert filter_cases(cases, case_id=one.id[:-3]) == [one]
    assert case_by_id(one.id, cases) is one
    assert case_by_id(one.id).id == one.id                # rebuilt from the id's op
    with pytest.raises(KeyError, match="no conformance case"):
        case_by_id("Binary.f32.000000000000", cases)


# ── what the cases cover ─────────────────────────────────────────────────────

EDGE_TAGS = ("tail", "block±1", "multi-workgroup", "±0", "subnormal", "inf", "nan",
             "extremes", "domain-edge", "ties", "broadcast", "size-1", "0-d", "empty",
             "non-contiguous") + tuple(f"len-{n}" for n in LENGTHS)


def test_every_edge_tag_is_covered(cases):
    seen = {t for c in cases for t in c.tags}
    assert not set(EDGE_TAGS) - seen


def _subop(c):
    a = c.graph.nodes[-1].attrs
    return getattr(a, "op", None)


@pytest.mark.parametrize("kind", sorted(edge_kinds()))
def test_each_kernel_kind_gets_tiling_specials_and_strides(cases, kind):
    mine = [c for c in cases if c.op == kind]
    subs = {"Activation": ACTIVATIONS, "Binary": BINARIES, "Reduce": REDUCE_OPS}.get(kind)
    for sub in subs or [None]:
        tags = {t for c in mine if sub is None or _subop(c) == sub for t in c.tags}
        need = {f"len-{n}" for n in LENGTHS} | set(SPECIAL_CLASSES) | {"non-contiguous"}
        assert not need - tags, (kind, sub, sorted(need - tags))


def test_domain_edges_and_ties_where_they_matter(cases):
    def has(op, sub, tag):
        return any(c.op == op and _subop(c) == sub and tag in c.tags for c in cases)
    for op in ("Log", "Sqrt", "Rsqrt", "Recip"):
        assert has("Activation", op, "domain-edge")
    log0 = next(c for c in cases if c.op == "Activation" and _subop(c) == "Log"
            and "domain-edge" in c.tags and c.dtype == "f32").inputs["x0"]
    assert 0.0 in log0 and np.signbit(log0[log0 == 0]).any()
    for kind in ("ArgMax", "ArgMin", "TopK"):
        assert any(c.op == kind and "ties" in c.tags for c in cases)


def test_dtype_expansion_never_casts_index_inputs():
    checked = 0
    for d in all_opdefs():
        idx = [i for i in range(8) if is_index_input(d, i)]
        for spec in sample_specs(d, 0):
            for v in dtype_variants(d, spec):
                for i in idx:
                    if i < len(spec.inputs):
                        assert np.asarray(v.inputs[i]).dtype == np.asarray(spec.inputs[i]).dtype
                        checked += 1
    assert checked > 20      # Gather, GatherElements, GatherNd and Scatter* were expanded


def test_dtype_expansion_emits_listed_float_dtypes(cases):
    gather = {c.dtype for c in cases if c.op == "Gather"}
    assert {"f32", "f64", "f16", "bf16"} <= gather
    for c in cases:
        if c.op == "Gather" and c.dtype in ("f16", "bf16"):
            assert c.inputs["x1"].dtype in (np.float32, np.int32, np.int64)   # not cast
        if c.op == "Where":
            assert c.dtype == str(c.graph.nodes[1].shape.dtype)   # on_true, not cond


def test_noncontiguous_feeds_are_equal_valued_strided_views(cases):
    nc = [c for c in cases if c.noncontiguous]
    assert len(nc) > 50 and all("non-contiguous" in c.tags for c in nc)
    for c in nc:
        feeds = c.feeds()
        for name in c.noncontiguous:
            arr, fed = c.inputs[name], feeds[name]
            assert arr.ndim >= 1 and arr.size > 1, c.id
            assert not fed.flags.c_contiguous and fed.strides[-1] == 2 * arr.itemsize
            np.testing.assert_array_equal(fed, arr)


# ── multi-op cases ───────────────────────────────────────────────────────────

def test_multi_op_cases_cover_models_and_control_flow():
    ms = {c.op: c for c in multi_op_cases()}
    named = {f"multi:{n}" for n in (
        "mlp", "attention-block", "conv-groupnorm", "conv-batchnorm", "if-then", "if-else",
        "while-count", "scan-rnn", "scan-rnn-trajectory")}
    generated = ("multi:chain-", "multi:bcast-chain-", "multi:variance", "multi:grad-")
    assert named <= set(ms)
    assert all(op in named or op.startswith(generated) for op in ms)
    kinds = {k for c in ms.values() for k in c.kinds}
    assert {"MatMul", "Softmax", "Attention", "LayerNorm", "Conv", "GroupNorm",
            "BatchNormInference", "Pool", "If", "While", "Scan"} <= kinds
    assert ms["multi:mlp"].params and not ms["multi:attention-block"].params
    x, y = (ms["multi:if-then"].inputs[k] for k in ("x", "y"))
    then = interpret(ms["multi:if-then"].graph, ms["multi:if-then"].inputs)[0]
    np.testing.assert_allclose(then, np.tanh(x * y) + y + x, rtol=1e-6)
    x, y = (ms["multi:if-else"].inputs[k] for k in ("x", "y"))
    other = interpret(ms["multi:if-else"].graph, ms["multi:if-else"].inputs)[0]
    np.testing.assert_allclose(other, x * y * y - 1 + x, rtol=1e-6)
    traj = interpret(ms["multi:scan-rnn-trajectory"].graph,
                     ms["multi:scan-rnn-trajectory"].inputs)[0]
    last = interpret(ms["multi:scan-rnn"].graph, ms["multi:scan-rnn"].inputs)[0]
    assert traj.shape == (6, 1, 4)
    np.testing.assert_array_equal(traj[-1], last)


def test_while_case_counts_to_five():
    c = next(c for c in multi_op_cases() if c.op == "multi:while-count")
    acc = c.inputs["x"].astype(np.float64) ** 2
    for _ in range(5):
        acc = acc * 0.5 + 1
    out = interpret(c.graph, c.inputs, float64=True)[0]
    np.testing.assert_allclose(out, acc + c.inputs["x"], rtol=1e-12)


def test_kinds_filter_matches_globs():
    kinds = [d.kind for d in all_opdefs()]
    assert fnmatch.filter(kinds, "Scatter*")
    assert {c.op for c in build_cases(["Scatter*"])} == set(fnmatch.filter(kinds, "Scatter*"))
    assert get("Gather").input_names[1] == "indices"
