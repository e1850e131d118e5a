"""The cost model's ordering on synthetic calibrations (a faster sgemm wins a big MatMul, a
low per-node overhead wins a graph of many tiny nodes, the oracle is ranked only when a
policy names it) and the calibration's defence against load skew (a large probe slower per
unit of work than its small twin is measured again, then bounded, never cached). Numbers
are injected and probe times are synthetic: nothing here is timed."""
import pytest

import rlx_ref
from rlx_ref.env_registry import overrides
from rlx_ref.runtime import calibration, device_cost, microbench
from rlx_ref.runtime.calibration import CalibrationWarning, cache_path, device_key
from rlx_ref.runtime.cost_model import CalibratedCostModel
from rlx_ref.runtime.devices import parse_device, probe_set
from rlx_ref.runtime.microbench import CHAIN, LARGE, SMALL, STREAM, STREAM_SMALL
from rlx_ref.runtime.policy import DevicePolicy

A, B = "_device_backends:Counting", "_device_backends:FailAtRun"
BASE = {"sgemm_large_gflops": 50.0, "sgemm_small_gflops": 5.0,
        "dispatch_overhead_ns": 2000.0, "roundtrip_overhead_ns": 10_000.0,
        "memory_bw_gbps": 20.0}


@pytest.fixture(autouse=True)
def fresh():
    calibration.forget()
    device_cost.reset_cost_model()
    with overrides(RLX_FORCE_DEVICE=None, RLX_REF_CALIBRATION="off"):
        yield
    calibration.forget()
    device_cost.reset_cost_model()


def matmul(n):
    g = rlx_ref.Graph(f"mm{n}")
    g.set_outputs([g.matmul(g.input("a", [n, n]), g.input("b", [n, n]))])
    return g


def tiny_chain(nodes):
    g = rlx_ref.Graph(f"tiny{nodes}")
    y = g.input("x", [4])
    for _ in range(nodes):
        y = g.neg(y)
    g.set_outputs([y])
    return g


def big_add(n):
    g = rlx_ref.Graph("bigadd")
    g.set_outputs([g.add(g.input("x", [n]), g.input("y", [n]))])
    return g


def pick(graph, devices=(A, B), policy=None):
    return device_cost.fastest_device_for(graph, policy or DevicePolicy.only(list(devices)))


def test_ten_times_the_gflops_wins_a_big_matmul():
    calibration.inject(A, {**BASE, "sgemm_large_gflops": 500.0})
    calibration.inject(B, BASE)
    assert pick(matmul(512)).label == A
    calibration.inject(A, BASE)
    calibration.inject(B, {**BASE, "sgemm_large_gflops": 500.0})
    assert pick(matmul(512)).label == B


def test_a_big_matmul_is_not_worth_a_large_round_trip_when_tiny():
    # A's sgemm is 10x B's but each run costs 1 ms more: worth it for 512³, not for 8³
    calibration.inject(A, {**BASE, "sgemm_large_gflops": 500.0,
                           "roundtrip_overhead_ns": 1_010_000.0})
    calibration.inject(B, BASE)
    assert pick(matmul(512)).label == A
    assert pick(matmul(8)).label == B
    model = CalibratedCostModel()
    assert model.estimate(matmul(8), parse_device(A)) > model.estimate(matmul(8),
                                                                       parse_device(B))


def test_per_node_overhead_decides_a_graph_of_tiny_nodes():
    # A: ten times B's bandwidth and sgemm, but 20 µs per node against B's 1 µs
    calibration.inject(A, {**BASE, "dispatch_overhead_ns": 20_000.0, "memory_bw_gbps": 200.0,
                           "sgemm_large_gflops": 500.0, "sgemm_small_gflops": 50.0})
    calibration.inject(B, {**BASE, "dispatch_overhead_ns": 1000.0})
    assert pick(tiny_chain(100)).label == B
    assert pick(big_add(1 << 22)).label == A            # one node moving 48 MiB


def test_a_device_without_calibration_is_not_ranked_over_one_with():
    calibration.inject(A, None)
    calibration.inject(B, {**BASE, "roundtrip_overhead_ns": 1e9})
    assert pick(tiny_chain(3)).label == B


def test_the_oracle_is_ranked_only_when_a_policy_names_it():
    # the oracle's injected numbers beat the CPU backend's on every count
    calibration.inject("reference", {**BASE, "dispatch_overhead_ns": 1.0,
                                     "roundtrip_overhead_ns": 1.0})
    calibration.inject("cpu", BASE)
    g = tiny_chain(10)
    ranked = [d.label for d in device_cost.ranked_candidates(g)]
    assert "reference" not in ranked and "cpu" in ranked
    assert device_cost.fastest_device_for(g).label == "cpu"
    assert pick(g, ("reference", "cpu")).label == "reference"              # allow-list
    assert device_cost.fastest_device_for(
        g, DevicePolicy.all().with_prefer(["cpu-ref"])).label == "reference"  # prefer-list
    others = [d.label for d in probe_set() if d.kind != "reference"]
    alone = DevicePolicy.all().with_deny(others)
    assert device_cost.fastest_device_for(g, alone).label == "reference"   # nothing else


# ── load skew in the calibration probes ─────────────────────────────────────

ONE = 10_000.0


def idle_times():
    """Probe times of a device at 100 GFLOP/s large, 10 small, 1 µs dispatch, 10 µs round
    trip, 50 GB/s over 2^20 and 100 GB/s over 2^14 elements."""
    return {"one": ONE, "chain": (CHAIN - 1) * 1000.0,          # the chain's extra time
            "large": ONE + 2.0 * LARGE[0] * LARGE[1] * LARGE[2] / 100.0,
            "small": ONE + 2.0 * SMALL[0] * SMALL[1] * SMALL[2] / 10.0,
            "stream": ONE + 12.0 * STREAM / 50.0,
            "stream_small": ONE + 12.0 * STREAM_SMALL / 100.0}


def timers(times, later=None):
    """Probe name → timer returning ``times[name]`` first, then ``later[name]`` values."""
    later, calls = later or {}, {}

    def make(name):
        def run():
            n = calls[name] = calls.get(name, 0) + 1
            seq = later.get(name, [])
            return times[name] if n == 1 or not seq else seq[min(n - 2, len(seq) - 1)]
        return run
    return {name: make(name) for name in times}, calls


@pytest.fixture
def quick(monkeypatch):
    monkeypatch.setattr(microbench, "RETRY_PAUSE_S", 0.0)


def test_idle_probe_times_give_the_numbers_by_hand(quick):
    run, calls = timers(idle_times())
    n = microbench.measure(object(), run)
    assert n["skew"] == [] and set(calls.values()) == {1}
    assert n["sgemm_large_gflops"] == pytest.approx(100.0)
    assert n["sgemm_small_gflops"] == pytest.approx(10.0)
    assert n["dispatch_overhead_ns"] == pytest.approx(1000.0)
    assert n["roundtrip_overhead_ns"] == ONE
    assert n["memory_bw_gbps"] == pytest.approx(50.0)


def test_a_stalled_probe_is_measured_again_and_the_fastest_kept(quick):
    t = {**idle_times(), "large": 8e6, "stream": 16e6}      # descheduled threads: 8, 16 ms
    run, calls = timers(t, {"large": [8e6, idle_times()["large"]],
                            "stream": [idle_times()["stream"]]})
    n = microbench.measure(object(), run)
    assert n["skew"] == []
    assert calls["large"] == 3 and calls["stream"] == 2 and calls["one"] == 1
    assert n["sgemm_large_gflops"] == pytest.approx(100.0)
    assert n["memory_bw_gbps"] == pytest.approx(50.0)


def test_a_probe_that_stays_stalled_is_bounded_and_named(quick):
    t = {**idle_times(), "large": 8e6, "stream": 16e6}
    run, calls = timers(t)
    n = microbench.measure(object(), run)
    assert calls["large"] == calls["stream"] == 1 + microbench.RETRIES
    assert n["sgemm_large_gflops"] == pytest.approx(10.0)      # the small probe's rate
    assert n["memory_bw_gbps"] == pytest.approx(100.0 / microbench.SKEW)
    assert len(n["skew"]) == 2 and "sgemm_large_gflops measured" in n["skew"][0]


def test_a_large_matmul_faster_than_a_small_one_is_not_skew(quick):
    # a GPU-like device: slow small kernels (launch-bound), fast large ones
    t = {**idle_times(), "small": ONE + 1e6}
    n = microbench.measure(object(), timers(t)[0])
    assert n["skew"] == [] and n["sgemm_small_gflops"] < 0.1


class FakeBackend:
    name, device = "fakeskew", "fake device 0"


def test_skewed_numbers_are_used_but_never_cached(tmp_path):
    numbers = {**BASE, "skew": ["sgemm_large_gflops measured 4, raised to 5"]}
    with overrides(RLX_REF_CACHE_DIR=str(tmp_path)):
        with pytest.warns(CalibrationWarning, match="busy machine: sgemm_large_gflops "
                                                    "measured 4.*the next one measures"):
            cal = calibration.load_or_measure(FakeBackend, measure=lambda b: numbers,
                                              mode="auto")
        assert cal.sgemm_large_gflops == 50.0
        assert not cache_path(FakeBackend.name, device_key(FakeBackend)).exists()
        clean = {**BASE, "skew": []}
        calibration.load_or_measure(FakeBackend, measure=lambda b: clean, mode="auto")
        assert cache_path(FakeBackend.name, device_key(FakeBackend)).exists()
