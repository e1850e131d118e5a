"""Fallback chains and the multi-device runners: run_with_fallback, GraphDevices (lazy
per-device compile, params mirrored, run_try / run_chain, warm_all, benchmark, many
threads), FlexibleSession and DeviceRouter, with backends made to fail at compile or run."""
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from rlx_ref.env_registry import overrides
from rlx_ref.runtime.fallback import DeviceFallbackError, run_with_fallback
from rlx_ref.runtime.flexible import DeviceRouter, FlexibleSession
from rlx_ref.runtime.graph_devices import GraphDevices, GraphDevicesError
from rlx_ref.runtime.policy import DevicePolicy, DeviceResolveError

from _device_backends import (COMPILE_ERROR, RUN_ERROR, Counting, add_graph, cumsum_graph)

ROOT = Path(__file__).resolve().parents[1]
F = np.float32
FAIL_COMPILE, FAIL_RUN = "_device_backends:FailAtCompile", "_device_backends:FailAtRun"
COUNTING = "_device_backends:Counting"
X = np.arange(4, dtype=F)
W = np.array([0.5, -1.0, 2.0, 0.25], F)


def _policy(*names):
    return DevicePolicy.only(list(names))


def test_run_with_fallback_keeps_going_and_lists_every_attempt():
    g = add_graph()
    pol = _policy("reference", "broken")
    seen = []

    def run(dev):
        seen.append(dev.label)
        if dev.label == "broken":
            raise RuntimeError("first device down")
        return 42

    dev, value = run_with_fallback(g, pol, ["cuda:5", "broken", "reference"], run)
    assert (dev.label, value, seen) == ("reference", 42, ["broken", "reference"])
    with pytest.raises(DeviceFallbackError) as info:
        run_with_fallback(g, pol, ["broken", "cpu", "reference"],
                          lambda d: (_ for _ in ()).throw(ValueError(f"{d} failed\nline 2")))
    assert str(info.value) == ("all backends failed:\n"
                               "  broken: broken failed\n    line 2\n"
                               "  cpu: not viable for this graph under policy\n"
                               "  reference: reference failed\n    line 2")
    err = info.value
    assert [d.label for d, _ in err.attempts] == ["broken", "cpu", "reference"]
    assert isinstance(err.errors[0], ValueError) and err.errors[1] is None
    with pytest.raises(DeviceFallbackError, match="^all backends failed:\n  cpu: empty "
                                                  "fallback chain$"):
        run_with_fallback(g, pol, [], lambda d: 1)


def test_a_chain_falls_back_past_compile_and_run_failures(capsys):
    g = cumsum_graph()
    names = (FAIL_COMPILE, FAIL_RUN, "broken", "reference")
    gd = GraphDevices(g, _policy(*names))
    gd.set_param("w", W)
    assert gd.devices() == ["reference", FAIL_COMPILE, FAIL_RUN, "broken"]
    label, outs = gd.run_try([FAIL_COMPILE, FAIL_RUN, "broken", "cuda:9", "reference"],
                             {"x": X})
    assert label == "reference"
    np.testing.assert_allclose(outs[0], np.cumsum(X + W))
    assert [lbl for lbl, _ in gd.last_skipped] == [FAIL_COMPILE, FAIL_RUN, "broken", "cuda:9"]
    assert gd.last_skipped[0][1] == COMPILE_ERROR and gd.last_skipped[1][1] == RUN_ERROR
    with overrides(RLX_VERBOSE="1"):
        gd.run_try(["broken", "reference"], {"x": X})
    err = capsys.readouterr().err
    assert "rlx-ref: ran on reference after the chain skipped broken: " in err
    with pytest.raises(DeviceFallbackError) as info:
        gd.run_try([FAIL_COMPILE, FAIL_RUN, "broken", "cpu"], {"x": X})
    text = str(info.value)
    assert text.startswith("all backends failed:\n")
    assert f"  {FAIL_COMPILE}: {COMPILE_ERROR}\n" in text
    assert f"  {FAIL_RUN}: {RUN_ERROR}\n" in text
    assert "  broken: " in text and "kernel launch failed (planted defect)" in text
    assert text.endswith("  cpu: not viable for this graph under policy")
    # a failed compile is not cached: the next call tries again, and fails again
    with pytest.raises(RuntimeError, match=COMPILE_ERROR):
        gd.run(FAIL_COMPILE, {"x": X})
    assert FAIL_COMPILE not in gd.compiled() and FAIL_RUN in gd.compiled()


def test_run_chain_reads_the_chain_variable():
    gd = GraphDevices(cumsum_graph(), _policy("broken", "reference"))
    gd.set_param("w", W)
    with overrides(RLX_DEVICE_CHAIN="broken,reference"):
        label, outs = gd.run_chain({"x": X})
    assert label == "reference"
    np.testing.assert_allclose(outs[0], np.cumsum(X + W))
    with overrides(RLX_DEVICE_CHAIN="broken"):
        with pytest.raises(DeviceFallbackError, match="^all backends failed:\n  broken: "):
            gd.run_chain({"x": X})
    with overrides(RLX_DEVICE_CHAIN=None, RLX_DEVICE=None, RLX_FORCE_DEVICE=None):
        assert gd.run_chain({"x": X})[0] == "reference"        # resolved: the cheapest
        with pytest.raises(DeviceFallbackError, match="^all backends failed:\n  broken: "):
            gd.run_chain({"x": X}, device="broken")             # a hint is tried alone
    gd2 = GraphDevices(cumsum_graph(), _policy("reference").with_deny(["reference"]))
    with overrides(RLX_DEVICE_CHAIN=None):
        with pytest.raises(DeviceFallbackError, match="cpu: no backend can lower this graph"):
            gd2.run_chain({"x": X})


def test_params_are_mirrored_to_every_executable():
    Counting.reset()
    gd = GraphDevices(add_graph(), _policy("reference", "broken", COUNTING))
    gd.set_param("w", W)                          # before anything is compiled
    for dev in ("reference", "broken"):
        np.testing.assert_array_equal(gd.run(dev, {"x": X})[0], X + W)
    w2 = np.array([1, 2, 3, 4], F)
    gd.set_param("w", w2)                         # reaches both compiled executables
    for dev in ("reference", "broken", COUNTING):   # ...and the one compiled after
        np.testing.assert_array_equal(gd.run(dev, {"x": X})[0], X + w2)
    gd.set_param_typed("w", np.full(4, 3, F).tobytes(), "f32")
    assert {tuple(gd.run(d, {"x": X})[0]) for d in gd.devices()} == {tuple(X + 3)}
    assert Counting.compiles == 1 and sorted(gd.compiled()) == sorted(gd.devices())
    with pytest.raises(Exception, match="no param 'v'"):
        gd.set_param("v", W)
    with pytest.raises(GraphDevicesError, match="device cuda:9 is not available"):
        gd.run("cuda:9", {"x": X})
    with pytest.raises(GraphDevicesError, match="device cpu cannot lower this graph under "
                                                "the active policy"):
        gd.run("cpu", {"x": X})


def test_many_threads_compile_each_device_once_and_never_tear_params():
    Counting.reset()
    gd = GraphDevices(add_graph(), _policy("reference", COUNTING))
    gd.set_param("w", np.zeros(4, F))
    errors, start = [], threading.Barrier(8)
    allowed = {0.0, 1.0, 2.0}

    def worker(i):
        try:
            start.wait()
            for k in range(30):
                if i == 0 and k % 10 == 0:
                    gd.set_param("w", np.full(4, k // 10, F))
                out = gd.run((COUNTING, "reference")[i % 2], {"x": X})[0] - X
                assert len(set(out.tolist())) == 1 and out[0] in allowed, out
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert Counting.compiles == 1 and Counting.runs == 4 * 30
    np.testing.assert_array_equal(gd.run("reference", {"x": X})[0], X + 2)
    np.testing.assert_array_equal(gd.run(COUNTING, {"x": X})[0], X + 2)


def test_warm_all_benchmark_and_the_benchmark_pick():
    Counting.reset()
    pol = _policy("reference", COUNTING).with_benchmark_pick(3)
    gd = GraphDevices(add_graph(), pol)
    gd.set_param("w", W)
    assert gd.warm_all() == ["reference", COUNTING] and Counting.compiles == 1
    results = gd.benchmark({"x": X}, 4)
    assert sorted(r.label for r in results) == sorted(["reference", COUNTING])
    assert [r.median_exec_ns for r in results] == sorted(r.median_exec_ns for r in results)
    assert all(r.compile_ns >= 0 and r.median_exec_ns > 0 for r in results)
    assert Counting.runs == 4 and Counting.compiles == 1
    assert gd.fastest() == "reference"
    winner = gd.resolve_with_inputs({"x": X})
    runs = Counting.runs
    assert runs == 4 + 3                                     # one benchmark of 3 runs
    assert gd.resolve_with_inputs({"x": X}) == winner and Counting.runs == runs   # cached
    np.testing.assert_array_equal(gd.run_resolved_with_inputs({"x": X})[0], X + W)
    assert gd.resolve_with_inputs({"x": X}, "reference").label == "reference"
    gd.invalidate_cache()
    assert gd.compiled() == []


def test_flexible_session_and_the_router():
    fs = FlexibleSession(_policy("reference", "broken"))
    exe = fs.compile_resolved(add_graph(), "broken")
    assert exe.device == "reference"                   # broken runs the oracle's executable
    with overrides(RLX_DEVICE=None, RLX_FORCE_DEVICE=None):
        assert fs.compile_resolved(add_graph()).graph.name == "addw"
    with pytest.raises(DeviceResolveError, match="hint requested cpu"):
        fs.compile_resolved(add_graph(), "cpu")
    Counting.reset()
    probe = {"hot": False}
    router = DeviceRouter(add_graph(), _policy(COUNTING, "reference"),
                          throttle_probe=lambda: probe["hot"])
    assert Counting.compiles == 1 and router.devices() == ["reference", COUNTING]
    router.set_param("w", W)
    label, outs = router.run({"x": X}, device=COUNTING)
    assert label == COUNTING
    np.testing.assert_array_equal(outs[0], X + W)
    np.testing.assert_array_equal(router.run_on("reference", {"x": X})[0], X + W)
    with overrides(RLX_DEVICE_CHAIN=f"{FAIL_RUN},{COUNTING}"):
        assert router.run_chain({"x": X})[0] == COUNTING     # FailAtRun: not in the policy
    probe["hot"] = True
    router.run({"x": X})
    assert router.rewarms == 1 and Counting.compiles == 2     # re-warmed
    router.with_rebench_on_throttle(False)
    np.testing.assert_array_equal(router.run_on(COUNTING, {"x": X})[0], X + W)  # params kept
    assert router.rewarms == 1 and Counting.compiles == 2     # no re-warm when off


def test_a_chain_from_a_shell_falls_back():
    code = ("import numpy as np\n"
            "from rlx_ref.runtime.graph_devices import GraphDevices\n"
            "from _device_backends import cumsum_graph\n"
            "gd = GraphDevices.from_env(cumsum_graph())\n"
            "gd.set_param('w', np.ones(4, np.float32))\n"
            "label, outs = gd.run_chain({'x': np.arange(4, dtype=np.float32)})\n"
            "print(label, outs[0].tolist())\n")
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}",
           "RLX_DEVICES": f"{FAIL_COMPILE},broken,reference", "RLX_DEVICE": "",
           "RLX_DEVICE_CHAIN": f"{FAIL_COMPILE},broken,reference"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["reference", "[1.0,", "3.0,", "6.0,", "10.0]"]
    env["RLX_DEVICE_CHAIN"] = f"{FAIL_COMPILE},broken"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=600)
    assert out.returncode == 1
    assert (f"all backends failed:\n  {FAIL_COMPILE}: {COMPILE_ERROR}\n  broken: "
            in out.stderr), out.stderr
