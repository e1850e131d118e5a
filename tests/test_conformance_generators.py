"""The generated case families produce what they claim: chains to the region caps with every
operand pattern, fused graphs cut at the caps, middle-axis broadcasts at every rank and
position, offset and cancelling rows, sizes around every backend boundary, and a per-step
exact contract that rejects a 16-bit chain computed in f32 across steps."""
import numpy as np
import pytest

from rlx_ref.conformance import accuracy as A
from rlx_ref.conformance._cases_bcast import BASES, bcast_specs
from rlx_ref.conformance._cases_bounds import boundaries, boundary_sizes, boundary_specs
from rlx_ref.conformance._cases_chains import PATTERNS, _roles, chain_patterns, chain_specs
from rlx_ref.conformance._cases_fused import fused_cases
from rlx_ref.conformance._cases_offset import DTYPES, offset_specs, variance_cases
from rlx_ref.conformance._cases_values import LENGTHS
from rlx_ref.conformance.cases import build_cases, oracle_accepts, spec_case
from rlx_ref.conformance.compare import compare
from rlx_ref.interpret import interpret
from rlx_ref.ir.dtype import DType
from rlx_ref.ir.shape import Shape
from rlx_ref.ops.region import MAX_INPUTS, MAX_STEPS, encode_region, step_op
from rlx_ref.passes.fuse_elementwise import fuse_elementwise

GENERATED_TAGS = ("chain", "bcast", "offset", "cancel", "fp16-exact", "boundary")


@pytest.fixture(scope="module")
def chains():
    return chain_specs(0)


def _reads(chain):
    return [(k, src, i) for k, st in enumerate(chain) for src, i in step_op(st)[2]]


# ── ElementwiseRegion chains ─────────────────────────────────────────────────

def test_chains_span_three_steps_to_the_caps(chains):
    steps = {len(s.attrs.chain) for s in chains}
    assert min(steps) == 3 and MAX_STEPS in steps and {8, 16, 24, 31} <= steps
    caps = [s for s in chains if "caps" in s.tags]
    assert caps and all(len(s.attrs.chain) == MAX_STEPS and s.attrs.num_inputs == MAX_INPUTS
                        for s in caps)
    assert all(oracle_accepts(spec_case(s, 0)) for s in chains)
    ints = [s for s in chains if s.inputs[0].dtype == np.int32]
    assert any(len(s.attrs.chain) == MAX_STEPS for s in ints)


def test_every_chain_reads_every_input_and_feeds_every_step(chains):
    for s in chains:
        reads = _reads(s.attrs.chain)
        assert {i for _, src, i in reads if src == "Input"} == set(range(s.attrs.num_inputs))
        read_steps = {i for _, src, i in reads if src == "Step"}
        assert read_steps == set(range(len(s.attrs.chain) - 1))   # no dead step


def test_every_operand_pattern_is_present(chains):
    seen = set()
    for s in chains:
        if "reads-first" in s.tags:
            continue
        pats = chain_patterns(s.attrs.chain, _roles(s.attrs.num_inputs))
        seen |= pats
        if len(s.attrs.chain) >= 8:
            assert pats == set(PATTERNS), (s.source, pats)
    assert seen == set(PATTERNS)


def test_a_chain_reads_the_first_step_again(chains):
    s = next(s for s in chains if "reads-first" in s.tags)
    assert any(src == "Step" and i == 0 and k >= 2 for k, src, i in _reads(s.attrs.chain))


def test_chain_generation_is_deterministic():
    a, b = chain_specs(3), chain_specs(3)
    assert [spec_case(x, 3).id for x in a] == [spec_case(x, 3).id for x in b]
    assert [spec_case(x, 3).id for x in a] != [spec_case(x, 0).id for x in chain_specs(0)]


def test_sixteen_bit_chains_are_exact_per_step(chains):
    low = [s for s in chains if "fp16-exact" in s.tags]
    assert {s.inputs[0].dtype for s in low} == {DType.F16.np, DType.BF16.np}
    assert all(s.accuracy.kind == A.EXACT and s.accuracy.per_step for s in low)
    assert any(len(s.attrs.chain) == MAX_STEPS for s in low)


def _f32_across_steps(spec) -> np.ndarray:
    """The chain evaluated in f32 and rounded once at the end (what a kernel that keeps
    16-bit intermediates in f32 computes)."""
    wide = [np.asarray(x).astype(np.float32) for x in spec.inputs]
    attrs = encode_region(spec.attrs.chain, [Shape(x.shape, DType.F32) for x in wide])
    case = spec_case(type(spec)("ElementwiseRegion", attrs, tuple(wide)), 0)
    return interpret(case.graph, case.inputs)[0].astype(spec.inputs[0].dtype)


def test_per_step_contract_rejects_f32_across_steps(chains):
    caught = 0
    for s in (s for s in chains if "fp16-exact" in s.tags):
        case = spec_case(s, 0)
        oc = interpret(case.graph, case.inputs)[0]
        o64 = interpret(case.graph, case.inputs, float64=True)[0]
        declared = case.graph.nodes[case.graph.outputs[0]].shape
        assert compare(oc, o64, oc, declared, s.accuracy).status == "ok"
        v = compare(_f32_across_steps(s), o64, oc, declared, s.accuracy)
        caught += v.status == "MISMATCH"
    assert caught >= 4          # most 16-bit chains round differently across their steps


def test_per_step_contract_allows_nothing_beside_the_case_oracle():
    declared = Shape((3,), DType.F16)
    o64 = np.array([1.0, 2.0, 3.0], np.float64)
    oc = o64.astype(np.float16)
    oc[2] = np.nextafter(np.float16(3.0), np.float16(4.0))  # the steps' roundings add up
    got = o64.astype(np.float16)                # rounded once at the end: the f64 answer
    assert compare(got, o64, oc, declared, A.exact()).status == "ok"
    assert compare(got, o64, oc, declared, A.exact(per_step=True)).status == "MISMATCH"


# ── graphs the fusion pass fuses ─────────────────────────────────────────────

def _regions(case):
    g = fuse_elementwise(case.graph)
    return [(len(n.attrs.chain), n.attrs.num_inputs) for n in g.nodes
            if n.kind == "ElementwiseRegion"]


def test_fused_chains_reach_and_pass_the_caps():
    cs = {c.op: c for c in fused_cases(0)}
    assert _regions(cs[f"multi:chain-{MAX_STEPS}"]) == [(MAX_STEPS, 12)]
    assert _regions(cs[f"multi:chain-{MAX_STEPS + 1}"])[0][0] == MAX_STEPS
    assert [n for n, _ in _regions(cs["multi:chain-40"])] == [MAX_STEPS, 8]
    assert _regions(cs[f"multi:chain-inputs-{MAX_INPUTS}"]) == [(24, MAX_INPUTS)]
    cut = _regions(cs[f"multi:chain-inputs-{MAX_INPUTS + 1}"])
    assert cut[0][1] == MAX_INPUTS and sum(n for n, _ in cut) < 24
    assert cs["multi:chain-f16-32"].accuracy.per_step
    for c in fused_cases(0):
        assert oracle_accepts(c)


def test_middle_axis_broadcasts_stay_out_of_regions_and_run():
    cases = [c for c in fused_cases(0) if c.op.startswith("multi:bcast-chain-")]
    assert {len(c.inputs["x"].shape) for c in cases} == {3, 4, 5}
    for c in cases:
        assert len(_regions(c)) == 2        # the broadcasting Add splits the run
        assert oracle_accepts(c)


# ── broadcasts ───────────────────────────────────────────────────────────────

def test_a_size_one_axis_in_every_position_of_every_rank():
    specs = bcast_specs("Binary", 0)
    for rank, dims in BASES.items():
        for p in range(rank):
            one = dims[:p] + (1,) + dims[p + 1:]
            hits = [s for s in specs if one in (s.inputs[0].shape, s.inputs[1].shape)
                    and np.broadcast_shapes(s.inputs[0].shape, s.inputs[1].shape) == dims]
            assert {s.attrs.op for s in hits} >= {"Add", "Sub", "Mul", "Div", "Max"}
    shapes = {x.shape for s in specs for x in s.inputs}
    assert (2, 1, 3, 1, 5) in shapes and (3, 1, 4) in shapes
    assert sum("middle-axis" in s.tags for s in specs) > 100
    for kind in ("Compare", "Where", "Fma"):
        assert all(oracle_accepts(spec_case(s, 0)) for s in bcast_specs(kind, 0))


# ── offsets and cancellation ─────────────────────────────────────────────────

@pytest.mark.parametrize("kind", ["LayerNorm", "RmsNorm", "GroupNorm", "Softmax", "Reduce"])
def test_offset_and_cancel_rows_in_every_float_dtype(kind):
    specs = offset_specs(kind, 0)
    for dt in DTYPES:
        mine = [s for s in specs if s.inputs[0].dtype == dt.np]
        offs = [s for s in mine if "offset" in s.tags]
        assert offs and all(np.mean(s.inputs[0].astype(np.float64)) > 9e3 for s in offs)
        x = offs[0].inputs[0].astype(np.float64)
        assert np.std(x) > 0                     # the spread survived rounding
        cancels = [s for s in mine if "cancel" in s.tags]
        assert bool(cancels) == (kind != "Softmax")
        for s in cancels:
            x = s.inputs[0].astype(np.float64).reshape(-1, s.inputs[0].shape[-1])
            assert (np.abs(x.sum(axis=1)) < 1e-3 * np.abs(x).sum(axis=1)).all()
    assert all(oracle_accepts(spec_case(s, 0)) for s in specs)


def test_variance_graphs_cover_every_dtype():
    cs = variance_cases(0)
    assert {c.dtype for c in cs} == {d.display for d in DTYPES}
    assert all(oracle_accepts(c) for c in cs)


# ── boundary sizes ───────────────────────────────────────────────────────────

def test_boundary_sizes_surround_every_backend_constant():
    from rlx_ref.backends.numba_cpu import _reduce_fold
    from rlx_ref.backends.opencl import launch

    b = boundaries()
    assert b["numba-lanes"] == _reduce_fold.LANES and b["opencl-local"] == launch.LOCAL_1D
    covered = set(boundary_sizes()) | set(LENGTHS)
    for v in b.values():
        assert {v - 1, v, v + 1} <= covered | {0}
    assert not set(boundary_sizes()) & set(LENGTHS)


@pytest.mark.parametrize("kind", ["Reduce", "Softmax", "LayerNorm", "RmsNorm", "Cumsum",
                                  "ArgMax", "Activation", "Binary", "ElementwiseRegion"])
def test_every_family_gets_every_boundary_size(kind):
    specs = boundary_specs(kind, 0)
    lengths = {int(t[4:]) for s in specs for t in s.tags if t.startswith("len-")}
    assert lengths == set(boundary_sizes())


def test_transposes_around_the_tile():
    t = boundaries()["transpose-tile"]
    shapes = {s.inputs[0].shape for s in boundary_specs("Transpose", 0)}
    assert {(t - 1, t + 1), (t, t - 1), (t + 1, 2 * t + 1)} <= shapes


# ── in the suite ─────────────────────────────────────────────────────────────

def test_generated_cases_are_in_the_suite_within_budget():
    cases = build_cases()
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids))
    mine = [c for c in cases if set(c.tags) & set(GENERATED_TAGS)]
    assert 500 <= len(mine) <= 1500
    for tag in GENERATED_TAGS:
        assert any(tag in c.tags for c in mine), tag
    exact16 = [c for c in cases if "fp16-exact" in c.tags]
    assert exact16 and all(c.accuracy.per_step for c in exact16)


def test_a_repro_keeps_the_per_step_contract(tmp_path, chains):
    from rlx_ref.conformance.model import CaseResult
    from rlx_ref.conformance.repro import load_case, write_repro

    case = spec_case(next(s for s in chains if "fp16-exact" in s.tags), 0)
    res = CaseResult(case.id, case.op, case.dtype, case.tags, "opencl", "MISMATCH", "seen")
    back, _ = load_case(write_repro(tmp_path, "opencl", case, res))
    assert back.id == case.id and back.accuracy == case.accuracy
    assert back.accuracy.per_step


def test_cases_filter_by_tag():
    from rlx_ref.conformance.cases import filter_cases

    cases = build_cases(["ElementwiseRegion", "multi:*"])
    picked = filter_cases(cases, tags="fp16-exact,caps")
    assert picked and all({"fp16-exact", "caps"} & set(c.tags) for c in picked)
    assert any(c.op.startswith("multi:") for c in picked)
    assert filter_cases(cases, tags=["no-such-tag"]) == []
