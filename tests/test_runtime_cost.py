"""The cost model and calibration: RLX's estimate_graph_cost on hand-computed graphs, the
calibrated pick, and calibration files that are missing, corrupt, truncated, foreign, of
another schema or unwritable (never trusted: re-measured with a warning), written
atomically. No test here benchmarks a device: numbers are injected or measured by a fake
(one test runs the micro-benchmarks at toy sizes on the oracle, to check their path)."""
import json
import math
import threading
import warnings

import numpy as np
import pytest

import rlx_ref
from rlx_ref import _atomic
from rlx_ref.env_registry import overrides
from rlx_ref.runtime import calibration, device_cost, microbench
from rlx_ref.runtime.calibration import (BadFile, Calibration, CalibrationWarning,
                                         cache_path, device_key, load_or_measure,
                                         parse_file)
from rlx_ref.runtime.cost_model import (BackendCostModel, CalibratedBackendCost,
                                        CalibratedCostModel, CostCalibration,
                                        estimate_graph_cost, node_cost, pick_best_device,
                                        profile_graph_io)
from rlx_ref.runtime.devices import backend_for
from rlx_ref.runtime.policy import DevicePolicy

from _device_backends import Counting, add_graph

NUMBERS = {"sgemm_large_gflops": 100.0, "sgemm_small_gflops": 10.0,
           "dispatch_overhead_ns": 100.0, "roundtrip_overhead_ns": 1000.0,
           "memory_bw_gbps": 2.0}


class Fixed(BackendCostModel):
    """sgemm 10 GFLOP/s, dispatch 100 ns, round trip 1000 ns, 2 bytes/ns."""

    def __init__(self, device="fixed", unified=False):
        self.device, self.unified = device, unified

    def sgemm_gflops(self, m, k, n):
        return 10.0

    def dispatch_overhead_ns(self):
        return 100.0

    def roundtrip_overhead_ns(self):
        return 1000.0

    def memory_bw(self):
        return 2.0

    def unified_memory(self):
        return self.unified


def mm_relu():
    g = rlx_ref.Graph("mmr")
    x, w = g.input("x", [4, 8]), g.param("w", [8, 16])
    g.set_outputs([g.relu(g.matmul(x, w))])
    return g


def test_formula_by_hand():
    g = mm_relu()
    model = Fixed()
    mm, relu = g.nodes[2], g.nodes[3]
    # MatMul: n = 16, m = 64 / 16 = 4, k = 32 / 4 = 8: 2·4·8·16 = 1024 flops at 10 + 1
    assert node_cost(mm, g, model) == pytest.approx(1024 / 11 + 100)
    assert node_cost(relu, g, model) == pytest.approx(64 * 4 / 2 + 100)
    assert node_cost(g.nodes[0], g, model) == 0.0
    io = profile_graph_io(g)
    # MatMul moves 128 + 512 in and 256 out; Relu 256 in and 256 out
    assert (io.kernel_launches, io.sync_points, io.host_output_bytes,
            io.device_traffic_bytes) == (2, 0, 256, 1408)
    assert io.host_readback_bytes(False) == 256 + 1408 // 4
    assert io.host_readback_bytes(True) == 256
    expect = 1000 + (1024 / 11 + 100) + 228 + 1408 / 2 + (256 + 352) / 2
    assert estimate_graph_cost(g, model) == pytest.approx(expect)
    assert estimate_graph_cost(g, Fixed(unified=True)) == pytest.approx(expect - 352 / 2)


def test_formula_metadata_dtypes_and_attention():
    g = rlx_ref.Graph("meta")
    x = g.input("x", [2, 3], "f64")
    r = g.reshape(g.neg(x), [6])
    g.set_outputs([r])
    io = profile_graph_io(g)
    # Reshape is metadata for the I/O profile (RLX): only Neg moves bytes, 8 per f64;
    # the output is the Reshape, so nothing counts as read back
    assert (io.kernel_launches, io.device_traffic_bytes, io.host_output_bytes) == (1, 96, 0)
    # node_cost still charges the Reshape, and at 4 bytes an element whatever the dtype
    assert node_cost(g.nodes[2], g, Fixed()) == pytest.approx(6 * 4 / 2 + 100)
    a = rlx_ref.Graph("att")
    q = a.input("q", [3, 5, 8])                  # batch 3, seq 5, one head of 8
    a.set_outputs([a.attention(q, q, q, num_heads=1, head_dim=8)])
    assert node_cost(a.nodes[1], a, Fixed()) == pytest.approx(3 * 5 * 5 * 8 * 2 / 11 + 100)


def test_small_and_large_sgemm_rates():
    cal = Calibration("reference", "k", **NUMBERS)
    model = CalibratedBackendCost(cal)
    assert model.sgemm_gflops(8, 32, 64) == 10.0            # 16384 < RLX's 32768
    assert model.sgemm_gflops(8, 64, 64) == 100.0           # 32768 is "large", as RLX
    assert model.calibration() == CostCalibration.MEASURED
    g = mm_relu()                                            # 4·8·16 = 512: small
    assert node_cost(g.nodes[2], g, model) == pytest.approx(1024 / 11 + 100)


def test_pick_best_device_leaves_out_unrankable_models():
    class Guess(Fixed):
        def calibration(self):
            return CostCalibration.UNCALIBRATED

        def roundtrip_overhead_ns(self):
            return 0.0                                       # a cheap guess, not evidence

    g = mm_relu()
    assert pick_best_device(g, [Fixed("a"), Guess("b")]) == "a"
    assert pick_best_device(g, [Guess("b"), Guess("c")]) == "b"   # no evidence: lowest


@pytest.fixture
def fresh_calibrations():
    calibration.forget()
    device_cost.reset_cost_model()
    yield
    calibration.forget()
    device_cost.reset_cost_model()


def test_injected_calibrations_pick_the_device(fresh_calibrations):
    g = add_graph()
    pol = DevicePolicy.only(["reference", "broken"])
    with overrides(RLX_FORCE_DEVICE=None, RLX_REF_CALIBRATION="off"):
        assert device_cost.fastest_device_for(g, pol).label == "reference"   # policy order
        calibration.inject("reference", {**NUMBERS, "roundtrip_overhead_ns": 9000.0})
        calibration.inject("broken", NUMBERS)
        assert device_cost.fastest_device_for(g, pol).label == "broken"
        model = device_cost.cost_model()
        assert isinstance(model, CalibratedCostModel)
        assert model.estimate(g, "reference") - model.estimate(g, "broken") == \
            pytest.approx(8000e-9)
        calibration.inject("broken", None)                  # no data: not ranked
        assert model.estimate(g, "broken") is None
        assert device_cost.fastest_device_for(g, pol).label == "reference"


def test_off_never_measures(fresh_calibrations, tmp_path):
    with overrides(RLX_REF_CALIBRATION="off", RLX_REF_CACHE_DIR=str(tmp_path)):
        assert calibration.calibration_for("reference") is None
        assert load_or_measure(backend_for("reference"), measure=_boom) is None
    assert not any(tmp_path.rglob("*.json"))


def _boom(backend):
    raise AssertionError("measured")


class FakeBackend:
    name, device = "fakebe", "fake device 0"


class Measure:
    def __init__(self, numbers=None):
        self.calls, self.numbers = 0, numbers or NUMBERS

    def __call__(self, backend):
        self.calls += 1
        return dict(self.numbers)


@pytest.fixture
def cache(tmp_path):
    with overrides(RLX_REF_CACHE_DIR=str(tmp_path)):
        yield tmp_path


def _path():
    return cache_path(FakeBackend.name, device_key(FakeBackend))


def test_measured_once_then_read_from_the_cache(cache):
    m = Measure()
    cal = load_or_measure(FakeBackend, measure=m, mode="auto")
    assert m.calls == 1 and cal.memory_bw_gbps == 2.0 and cal.backend == "fakebe"
    path = _path()
    assert path.parent == cache / "calibration" and path.name.startswith("fakebe-calib-")
    saved = json.loads(path.read_text())
    assert saved["schema"] == calibration.SCHEMA and saved["device_key"] == device_key(
        FakeBackend) and "fake device 0" in saved["device_key"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = load_or_measure(FakeBackend, measure=m, mode="auto")
    assert m.calls == 1 and again == cal


def _good_text():
    return json.dumps(Calibration("fakebe", device_key(FakeBackend), **NUMBERS).to_json())


@pytest.mark.parametrize("damage,why", [
    (lambda t: "{ this is not json", "is corrupt"),
    (lambda t: "\x00\xff garbage", "is corrupt"),
    (lambda t: t[: len(t) // 2], "is truncated"),
    (lambda t: "", r"is empty \(truncated\)"),
    (lambda t: "[1, 2]", r"a JSON list, not an object"),
    (lambda t: _edit(t, memory_bw_gbps=None), r"incomplete \(truncated\): no field "
                                              "'memory_bw_gbps'"),
    (lambda t: _edit(t, device_key="someone else's GPU"), "belongs to another device"),
    (lambda t: _edit(t, backend="opencl"), "belongs to another device"),
    (lambda t: _edit(t, schema=0), "has schema version 0, expected 1"),
    (lambda t: _edit(t, sgemm_large_gflops=-3.0), "bad value sgemm_large_gflops=-3.0"),
    (lambda t: _edit(t, dispatch_overhead_ns="fast"), "bad value dispatch_overhead_ns"),
    (lambda t: _edit(t, roundtrip_overhead_ns=True), "bad value roundtrip_overhead_ns"),
])
def test_a_bad_file_is_measured_again_with_a_warning(cache, damage, why):
    path = _path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(damage(_good_text()))
    m = Measure({**NUMBERS, "memory_bw_gbps": 7.0})
    with pytest.warns(CalibrationWarning, match=why + ".*; measuring again"):
        cal = load_or_measure(FakeBackend, measure=m, mode="auto")
    assert m.calls == 1 and cal.memory_bw_gbps == 7.0           # never the file's numbers
    assert parse_file(path.read_text(), "fakebe", device_key(FakeBackend)) == cal


def _edit(text, **changes):
    obj = json.loads(text)
    for k, v in changes.items():
        if v is None:
            obj.pop(k)
        else:
            obj[k] = v
    return json.dumps(obj)


def test_a_nan_in_the_file_is_not_trusted(cache):
    path = _path()
    path.parent.mkdir(parents=True)
    path.write_text(_good_text().replace("2.0", "NaN"))
    with pytest.raises(BadFile, match="bad value memory_bw_gbps=nan"):
        parse_file(path.read_text(), "fakebe", device_key(FakeBackend))


def test_cached_mode_reports_and_does_not_measure(cache):
    path = _path()
    path.parent.mkdir(parents=True)
    path.write_text("{")
    with pytest.warns(CalibrationWarning, match=r"not used \(RLX_REF_CALIBRATION=cached\)"):
        assert load_or_measure(FakeBackend, measure=_boom, mode="cached") is None
    assert path.read_text() == "{"


def test_a_failing_measurement_gives_no_data(cache):
    def fails(backend):
        raise RuntimeError("device lost")

    with pytest.warns(CalibrationWarning, match="calibrating fakebe failed.*device lost"):
        assert load_or_measure(FakeBackend, measure=fails, mode="auto") is None
    assert not _path().exists()


def test_an_interrupted_write_keeps_the_old_file_whole(cache, monkeypatch):
    path = _path()
    path.parent.mkdir(parents=True)
    path.write_text("{ damaged")

    def crash(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_atomic.os, "replace", crash)
    with pytest.warns(CalibrationWarning) as record:
        cal = load_or_measure(FakeBackend, measure=Measure(), mode="auto")
    assert cal is not None and "No space left" in str(record[-1].message)
    assert path.read_text() == "{ damaged"                       # not a half-written mix
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left


def test_readers_never_see_a_partial_file(cache):
    path = _path()
    load_or_measure(FakeBackend, measure=Measure(), mode="auto")
    bad, stop = [], threading.Event()

    def writer(i):
        cal = Calibration("fakebe", device_key(FakeBackend),
                          **{**NUMBERS, "memory_bw_gbps": 1.0 + i})
        while not stop.is_set():
            _atomic.write_json(path, cal.to_json(), indent=2)

    def reader():
        for _ in range(300):
            try:
                parse_file(path.read_text(), "fakebe", device_key(FakeBackend))
            except BadFile as e:
                bad.append(str(e))

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    reader()
    stop.set()
    for t in threads:
        t.join()
    assert not bad, bad[0]


def test_device_keys_name_backend_device_and_host():
    key = device_key(backend_for("reference"))
    assert key.startswith("reference; numpy oracle (CPU); ")
    assert device_key(FakeBackend) != key


def test_micro_benchmarks_run_through_the_backends_compile_and_run(monkeypatch):
    monkeypatch.setattr(microbench, "LARGE", (16, 16, 16))
    monkeypatch.setattr(microbench, "SMALL", (2, 4, 8))
    monkeypatch.setattr(microbench, "STREAM", 256)
    monkeypatch.setattr(microbench, "STREAM_SMALL", 64)
    monkeypatch.setattr(microbench, "REPS", 2)
    monkeypatch.setattr(microbench, "PAUSE_S", 0.0)
    monkeypatch.setattr(microbench, "RETRY_PAUSE_S", 0.0)
    Counting.reset()
    numbers = microbench.measure(Counting())
    skew = numbers.pop("skew")
    assert set(numbers) == set(calibration.NUMBERS) and isinstance(skew, list)
    assert all(math.isfinite(v) and v > 0 for v in numbers.values())
    # six probes (the dispatch probe times two graphs in pairs), each graph compiled once
    # (a probe measured again reuses it) and run for a warm-up plus ROUNDS rounds
    assert Counting.compiles == 7 and Counting.runs >= 7 * (1 + microbench.ROUNDS)


def test_calibration_for_measures_once_per_device(fresh_calibrations, cache, monkeypatch):
    calls = []
    monkeypatch.setattr(microbench, "measure", lambda b: calls.append(b.name) or NUMBERS)
    with overrides(RLX_REF_CALIBRATION="auto"):
        threads = [threading.Thread(target=calibration.calibration_for, args=("reference",))
                   for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        cal = calibration.calibration_for("cpu-ref")
    assert calls == ["reference"] and cal.source == "measured"
    assert np.isclose(cal.sgemm_small_gflops, 10.0)
