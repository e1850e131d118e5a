"""The suite's power: every planted fault in the real kernels is caught by its selection,
and the same selections pass on the unfaulted backends."""
import importlib
import re

import numpy as np
import pytest

from rlx_ref.backends import faults
from rlx_ref.backends.base import BackendUnavailable
from rlx_ref.backends.fault_catalogue import FAULTS, by_name, select_faults
from rlx_ref.backends.registry import get_backend
from rlx_ref.conformance.ledger import load_ledger
from rlx_ref.conformance.power import fault_cases, run_fault, summary

# the bug classes issue 12 names: each needs at least one catalogued fault
BUG_CLASSES = {
    "tiled-transpose stride", "dropped last partial in the segmented reduce",
    "chain step reads the wrong earlier step", "suffix-modulus read for a middle size-1 axis",
    "f32 mean with a large offset", "f16 intermediate rounding skipped", "tail off-by-one",
    "wrong reduction identity", "dropped NaN propagation", "eps placement",
    "mask off-by-one", "tie order", "rounding mode", "saturation", "stride error",
    "permutation error", "polynomial-coefficient drift",
}


def _usable(name: str) -> bool:
    try:
        return get_backend(name).availability()[0]
    except BackendUnavailable:
        return False


# the specs faults run on: the backends, and styles such as ``opencl/gpu-kernels``
SPECS = sorted({"numba-cpu", "opencl"} | {f.run_spec for f in FAULTS})
USABLE = {b: _usable(b) for b in SPECS}


def _need(backend: str):
    if not USABLE[backend]:
        pytest.skip(f"{backend} is not usable here")


@pytest.fixture(scope="module")
def cases():
    from rlx_ref.conformance.cases import build_cases

    kinds = sorted({k for f in FAULTS for k in f.ops.split(",")})
    return build_cases(kinds)


def test_catalogue_covers_every_bug_class_on_both_backends():
    assert BUG_CLASSES <= {f.bug_class for f in FAULTS}
    assert {f.backend for f in FAULTS} == {"numba-cpu", "opencl"}
    names = [f.name for f in FAULTS]
    assert len(names) == len(set(names))
    for f in FAULTS:
        assert (f.edits or f.patches) and f.variant.startswith(f.backend + ":"), f.name


@pytest.mark.parametrize("name", [f.name for f in FAULTS])
def test_planted_fault_is_caught(name, cases):
    fault = by_name(name)
    _need(fault.run_spec)
    sel = fault_cases(fault, cases)
    assert 0 < len(sel) <= fault.limit
    row = run_fault(fault, cases, load_ledger(None))
    if fault.gap:        # a known gap must stay missed until the contract that sees it lands
        assert not row["caught"], f"{name} is caught now: delete its gap ({fault.gap})"
        return
    assert row["caught"], f"{name} passed all {row['cases']} cases of its selection"


@pytest.mark.parametrize("backend", SPECS)
def test_unfaulted_backend_passes_every_selection(backend, cases):
    """The fault is what fails a selection: the real backend (in the style each fault's
    kernels are rendered in) passes each of them."""
    _need(backend)
    picked = {c.id: c for f in FAULTS if f.run_spec == backend for c in fault_cases(f, cases)}
    from rlx_ref.conformance.runner import failing, run_backend

    res = run_backend(get_backend(backend), list(picked.values()), load_ledger(None),
                      progress=False, in_process=True)
    assert not failing(res), [(r["case_id"], r["message"][:120]) for r in failing(res)]
    ran = {r["case_id"]: set(r.get("variants") or ()) for r in res}
    for f in FAULTS:                # each fault sits in a kernel variant its selection runs
        if f.run_spec == backend:
            seen = set().union(*(ran[c.id] for c in fault_cases(f, cases)))
            assert f.variant in seen, f"{f.name}: its selection never runs {f.variant}"


def _anchor_found(old: str, text: str) -> bool:
    return bool(re.search(old[3:], text)) if old.startswith("re:") else old in text


@pytest.mark.parametrize("name", [f.name for f in FAULTS if f.edits])
def test_every_edit_anchor_is_in_the_real_kernels(name, cases):
    """A fault whose anchor text is gone would plant nothing: each edit's text is in the
    kernels the real backend compiles for the fault's selection (or in the C prelude)."""
    from rlx_ref.conformance.runner import compile_options

    fault = by_name(name)
    _need(fault.run_spec)
    backend = get_backend(fault.run_spec)
    text = ""
    if fault.kernel == "prelude":
        from rlx_ref.backends.opencl.cprelude import prelude

        text = prelude(True) + prelude(False)
    missing = [old for old, _ in fault.edits if not _anchor_found(old, text)]
    for case in fault_cases(fault, cases):
        if not missing:
            break
        try:
            exe = backend.compile(case.graph, compile_options(backend, case))
        except Exception:  # noqa: BLE001 - declared-unsupported cases plant nothing
            continue
        text = "\n".join(exe.kernel_sources().values())
        missing = [old for old in missing if not _anchor_found(old, text)]
    assert not missing, f"{name}: no kernel of its selection contains {missing}"


def _declared_variants(backend: str):
    """The kernel variants ``backend`` declares (rlx_ref.backends.variants), or None."""
    try:
        variants = importlib.import_module("rlx_ref.backends.variants")
    except ImportError:
        return None
    if callable(getattr(variants, "declared", None)):
        return set(variants.declared(backend))
    table = getattr(variants, "VARIANTS", None) or getattr(variants, "DECLARED", None)
    return set(table.get(backend, ())) if isinstance(table, dict) else None


@pytest.mark.parametrize("backend", ["numba-cpu", "opencl"])
def test_fault_variants_are_declared_and_the_unreached_ones_listed(backend):
    """Each fault names a declared variant; the declared variants no fault sits in yet are
    exactly ``WITHOUT_FAULT`` (so the list shrinks as faults are added and cannot go stale)."""
    from rlx_ref.backends import variants
    from rlx_ref.backends.fault_catalogue import WITHOUT_FAULT

    declared = set(variants.declared(backend))
    covered = {f.variant for f in FAULTS if f.backend == backend}
    assert covered <= declared, f"faults name undeclared variants: {sorted(covered - declared)}"
    listed = {v for v in WITHOUT_FAULT if v.startswith(backend + ":")}
    assert listed == declared - covered, (
        f"WITHOUT_FAULT is stale: now reached {sorted(listed & covered)}, "
        f"missing {sorted(declared - covered - listed)}")


def test_a_fault_is_active_only_inside_its_context():
    fault = by_name("reduce-max-identity")
    mod = importlib.import_module("rlx_ref.backends.numba_cpu.lower_reduce")
    real = mod._identity
    src = "    for i in range(n):\n"
    tail = by_name("ew-tail-serial")
    assert faults.rewrite("numba-cpu", "ew_x", src) == src
    with faults.active(fault):
        assert mod._identity is not real
        assert mod._identity("Max", __import__("rlx_ref").ir.dtype.DType.F32) == 0
    with faults.active(tail):
        assert faults.rewrite("numba-cpu", "ew_x", src) == "    for i in range(n - 1):\n"
        assert faults.rewrite("numba-cpu", "norm", src) == src     # other kernels untouched
        assert faults.rewrite("opencl", "ew_x", src) == src        # other backends too
        with pytest.raises(faults.FaultError, match="already active"):
            with faults.active(by_name("ew-tail-par")):
                pass
    assert mod._identity is real
    assert faults.rewrite("numba-cpu", "ew_x", src) == src


def test_faulty_kernels_never_reach_the_real_backend():
    """A faulted compile and a real one of the same graph, in one process: separate
    kernels (the edit changes the source hash), and the real one stays right."""
    import rlx_ref

    _need("numba-cpu")
    g = rlx_ref.Graph("t")
    x = g.input("x", [9])
    g.set_outputs([g.sigmoid(x)])
    feed = {"x": np.linspace(-2, 2, 9, dtype=np.float32)}
    want = get_backend("reference").compile(g).run(feed)[0]
    bad = get_backend("numba-cpu+fault:ew-tail-serial").compile(g).run(feed)[0]
    good = get_backend("numba-cpu").compile(g).run(feed)[0]
    np.testing.assert_allclose(good, want, rtol=1e-6)
    np.testing.assert_allclose(bad[:-1], want[:-1], rtol=1e-6)


def test_a_faulted_backend_compiles_lowered_threshold_cases_at_the_real_floors():
    """``lowered-thresholds`` cases reach the large-size variants under a fault too (the
    faulted spec names no thresholds of its own)."""
    from types import SimpleNamespace

    from rlx_ref.backends import variants
    from rlx_ref.conformance.runner import compile_options

    _need("numba-cpu")
    case = SimpleNamespace(tags=(variants.LOWERED_TAG,))
    opts = compile_options(get_backend("numba-cpu+fault:pool-par-tail"), case)
    assert opts.thresholds and opts.thresholds == variants.lowered("numba-cpu")

def test_fault_specs_name_what_is_wrong():
    with pytest.raises(BackendUnavailable, match="unknown fault 'nope'.*ew-tail-serial"):
        get_backend("numba-cpu+fault:nope")
    with pytest.raises(BackendUnavailable, match="planted in numba-cpu, not in opencl"):
        get_backend("opencl+fault:ew-tail-serial")
    b = get_backend("numba-cpu+fault:ew-tail-serial")
    assert b.name == "numba-cpu+fault:ew-tail-serial" and b.test_only
    assert [f.backend for f in select_faults(backends="opencl")] == ["opencl"] * len(
        [f for f in FAULTS if f.backend == "opencl"])


def test_summary_reports_the_share_the_missed_and_the_gaps():
    from rlx_ref.conformance.power import passed

    rows = [{"fault": "a", "caught": True}, {"fault": "b", "caught": False}]
    assert summary(rows) == "power: 1/2 planted faults caught (50%); missed: b"
    assert not passed(rows)
    gap = [{"fault": "a", "caught": True}, {"fault": "g", "caught": False, "gap": "why"}]
    assert summary(gap) == "power: 1/2 planted faults caught (50%); known gaps: g"
    assert passed(gap)
    assert not passed([{"fault": "g", "caught": True, "gap": "why"}])


def test_power_cli(capsys, tmp_path):
    import json

    from rlx_ref.conformance.cli import main

    _need("numba-cpu")
    out_file = tmp_path / "power.json"
    assert main(["--power", "--fault", "round-half-up", "--out", str(out_file)]) == 0
    out = capsys.readouterr().out
    assert "caught  round-half-up" in out and "1/1 planted faults caught (100%)" in out
    (row,) = json.loads(out_file.read_text())["faults"]
    assert row["fault"] == "round-half-up" and row["caught"] and row["failing"]
    assert main(["--power", "--fault", "nope"]) == 2
    assert main(["--fault", "round-half-up"]) == 2
    assert main(["--power", "--backend", "reference"]) == 2


class _SkipsLastElement:
    """A backend that allocates its outputs, then writes all but their last element."""

    name = "skips-last"

    def compile(self, graph, options=None):
        ref = get_backend("reference").compile(graph)
        shapes = [graph.nodes[o].shape for o in graph.outputs]

        class Exe:
            def set_param(self, name, value):
                ref.set_param(name, value)

            def run(self, feeds):
                bufs = [np.empty(s.dims, s.dtype.np) for s in shapes]
                for buf, o in zip(bufs, ref.run(feeds)):
                    buf.reshape(-1)[:-1] = o.reshape(-1)[:-1]
                return bufs
        return Exe()


def test_an_unwritten_output_element_is_caught_even_where_the_allocator_reuses_a_block():
    """The runner leaves freed blocks of each output's size poisoned (0xFF bytes), so an
    element a backend never writes cannot read back the oracle's just-freed answer."""
    from rlx_ref.conformance.cases import build_cases
    from rlx_ref.conformance.runner import run_case

    cases = [c for c in build_cases(["Reduce"]) if c.dtype == "f32"
             and c.graph.nodes[c.graph.outputs[0]].shape.numel in (2, 3, 4)][:4]
    assert cases
    res = [run_case(_SkipsLastElement(), c, load_ledger(None)) for c in cases]
    assert all(r.status != "ok" for r in res), [(r.case_id, r.status) for r in res]


def test_variant_reach_counts_the_declared_variants_with_a_fault():
    from rlx_ref.backends import variants
    from rlx_ref.conformance.power import variant_reach

    declared = len(variants.declared("numba-cpu"))
    have = len({f.variant for f in FAULTS if f.backend == "numba-cpu"})
    assert f"numba-cpu {have}/{declared}" in variant_reach(["numba-cpu"])
