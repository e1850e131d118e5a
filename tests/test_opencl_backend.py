"""The OpenCL backend core: devices, declared table, planning, errors, sources, dumps."""
import os
import subprocess
import sys

import numpy as np
import pytest

import rlx_ref
from rlx_ref.backends.registry import get_backend
from rlx_ref.ir.dtype import DType

cl = pytest.importorskip("pyopencl")
OCL = get_backend("opencl")
if not OCL.availability()[0]:
    pytest.skip(f"no OpenCL device: {OCL.availability()[1]}", allow_module_level=True)


def _chain():
    g = rlx_ref.Graph("chain")
    x = g.input("x", [4, 8])
    b = g.param("b", [8])
    h = g.gelu(g.add(x, b))
    g.set_outputs([g.mul(h, g.sigmoid(h)), g.lt_(h, x)])
    return g


def test_runs_a_graph_and_matches_the_oracle():
    g = _chain()
    x = np.linspace(-3, 3, 32, dtype=np.float32).reshape(4, 8)
    b = np.arange(8, dtype=np.float32) / 8
    exe = OCL.compile(g)
    exe.set_param("b", b)
    got = exe.run({"x": x})
    want = rlx_ref.interpret(g, {"x": x}, {"b": b})
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(got[1], want[1])
    srcs = exe.kernel_sources()
    assert srcs and all("__kernel void" in s for s in srcs.values())


def test_session_device_strings():
    from rlx_ref.backends.opencl.devices import DeviceError, find_device

    p, d, _ = find_device("0:0")
    assert (p, d) == (0, 0)
    p, d = OCL._device()[0].index      # the default device: one that passed the probe
    assert get_backend(f"opencl:{p}:{d}").availability()[0]
    with pytest.raises(DeviceError, match="expected P:D"):
        find_device("not-a-device")
    with pytest.raises(DeviceError, match="no OpenCL device 99:0"):
        find_device("99:0")
    bad = get_backend("opencl:99:0")
    ok, why = bad.availability()
    assert not ok and "99:0" in why
    with pytest.raises(Exception, match="99:0"):
        bad.compile(_chain())


def test_vendor_aliases_resolve_to_opencl_specs():
    from rlx_ref.backends.registry import ALIASES

    assert ALIASES["rocm"] == ALIASES["amd"] == "opencl:amd"
    assert ALIASES["oneapi"] == ALIASES["intel"] == "opencl:intel"
    b = get_backend("intel")          # PoCL is not an Intel platform: unavailable, says why
    ok, why = b.availability()
    assert ok or "vendor 'intel'" in why


def test_declared_f64_follows_the_device():
    info = OCL._device()[0]
    table = OCL.supported_ops()
    assert (DType.F64 in table["Binary"]) == info.fp64
    assert DType.F16 in table["Activation"]


def test_outputs_are_fresh_and_runs_repeat():
    g = rlx_ref.Graph("o")
    x = g.input("x", [3])
    g.set_outputs([g.neg(x), x])
    exe = OCL.compile(g)
    a = exe.run({"x": np.ones(3, np.float32)})
    b = exe.run({"x": np.full(3, 2, np.float32)})
    assert a[0].tolist() == [-1, -1, -1] and b[0].tolist() == [-2, -2, -2]
    assert a[1].tolist() == [1, 1, 1]


def test_intermediates_reuse_buffers_by_liveness():
    from rlx_ref.runtime.options import CompileOptions, FusionOptions

    g = rlx_ref.Graph("chain")
    x = g.input("x", [64])
    y = x
    for _ in range(6):
        y = g.exp(g.neg(y))
    g.set_outputs([y])
    # without the memory plan (its arena: tests/test_opencl_arena.py)
    opts = CompileOptions(fusion_opts=FusionOptions(enable=False), memory_plan=False)
    exe = OCL.compile(g, opts)
    plan = exe._plans[()]
    bufs = {id(plan.env[n.id].buf) for n, _ in plan.steps}
    assert len(bufs) <= 3          # 12 steps, ping-pong over a couple of buffers
    xv = np.linspace(-1, 1, 64, dtype=np.float32)
    np.testing.assert_allclose(exe.run({"x": xv})[0], rlx_ref.interpret(g, {"x": xv})[0],
                               rtol=1e-5)


def test_integer_division_by_zero_names_the_node():
    g = rlx_ref.Graph("idiv")
    a = g.input("a", [4], "i32")
    b = g.input("b", [4], "i32")
    g.set_outputs([g.binary("Div", a, b)])
    exe = OCL.compile(g)
    ok = exe.run({"a": np.array([7, -7, 9, 1], np.int32),
                  "b": np.array([2, 2, -3, 1], np.int32)})
    assert ok[0].tolist() == [3, -3, -3, 1]
    with pytest.raises(RuntimeError, match=r"at %2 .*division or modulo by zero"):
        exe.run({"a": np.ones(4, np.int32), "b": np.array([1, 0, 1, 1], np.int32)})
    # the error word is cleared: the next good run succeeds
    assert exe.run({"a": np.ones(4, np.int32), "b": np.ones(4, np.int32)})[0].tolist() == \
        [1, 1, 1, 1]


def test_host_path_is_declared_with_a_reason():
    paths, reasons = OCL.paths(), OCL.path_reasons()
    for kind, path in paths.items():
        if path != "native":
            assert reasons.get(kind), f"{kind} is {path} without a reason"
    assert paths["ElementwiseRegion"] == "native"


def test_dump_kernels_and_binary_cache_in_a_second_process(tmp_path):
    code = ("import numpy as np, rlx_ref\n"
            "g = rlx_ref.Graph('d'); x = g.input('x', [5])\n"
            "g.set_outputs([g.tanh(g.mul(x, x))])\n"
            "e = rlx_ref.Session(device='opencl').compile(g)\n"
            "y = e.run({'x': np.arange(5, dtype=np.float32)})[0]\n"
            "print(y.astype(float).round(4).tolist())\n")
    env = dict(os.environ, RLX_REF_DUMP_KERNELS=str(tmp_path / "dump"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(np.tanh(np.arange(5.0) ** 2).round(4).tolist())
    dumped = list((tmp_path / "dump").glob("opencl_*.cl"))
    assert dumped and "__kernel void" in dumped[0].read_text()


def test_zero_size_tensors_launch_nothing():
    g = rlx_ref.Graph("z")
    x = g.input("x", [0, 3])
    g.set_outputs([g.exp(x)])
    out = OCL.compile(g).run({"x": np.zeros((0, 3), np.float32)})
    assert out[0].shape == (0, 3)


def test_rerun_repeats_the_last_run_on_device():
    exe = OCL.compile(_chain())
    exe.set_param("b", np.ones(8, np.float32))
    with pytest.raises(RuntimeError, match="needs exactly one earlier run"):
        exe.rerun()
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    first = exe.run({"x": x})
    exe.rerun()                       # the same inputs, still on the device
    plan = exe._plans[()]
    np.testing.assert_array_equal(plan.env[plan.outputs[0]].get(plan.rt.queue), first[0])
