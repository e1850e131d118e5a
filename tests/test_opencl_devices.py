"""OpenCL device handling that needs no working device: vector widths per device, the
kernels rendered for an AVX2-class CPU, the health probe's failure path and the default
device choice (faked devices), and the unavailable backend's one-line reason."""
import re
from types import SimpleNamespace

import pytest

from rlx_ref.backends.opencl import (
    _reduce_fold,
    _reduce_norm,
    _reduce_scan,
    _reduce_select,
    _reduce_softmax,
    devices,
    probe,
)
from rlx_ref.backends.opencl._reduce_c import FLOATS, INTS, vec_width
from rlx_ref.backends.opencl.devices import DeviceError, DeviceInfo
from rlx_ref.ir.dtype import DType


def _info(vector_bytes: int, index=(0, 0), driver="OpenCL 3.0 PoCL 3.0-rc2  Linux, "
          "Release, RELOC, LLVM 14.0.6, SLEEF, DISTRO, POCL_DEBUG") -> DeviceInfo:
    return DeviceInfo(name="pthread-AMD EPYC 7763", platform="Portable Computing Language",
                      index=index, is_cpu=True, fp64=True, fp16=False, max_work_group=4096,
                      compute_units=8, local_mem=1 << 20, version="OpenCL 3.0 PoCL HSTR: "
                      "pthread-x86_64-unknown-linux-gnu-znver3", vector_bytes=vector_bytes,
                      driver=driver)


AVX2, AVX512 = _info(32), _info(64)
WIDE_64 = re.compile(r"\b(?:double|long|ulong)(?:8|16)\b")


def every_kernel(dev):
    """(label, source) of every reduction-family kernel template, every dtype and op."""
    for op in ("Sum", "Mean", "Prod", "Max", "Min"):
        for dt in FLOATS + INTS:
            for wide in (False, True):
                defs = _reduce_fold.fold_defs(op, dt, dt, dev, wide)
                for k in _reduce_fold._TEMPLATES:
                    yield (f"Reduce {op} {dt} {k}{' wide' if wide else ''}",
                           _reduce_fold.source(k, defs, 64)[1])
    for kind in ("Cumsum", "CumProd", "CumMax"):
        for dt in FLOATS + INTS:
            for wide in (False, True):
                defs = _reduce_scan.scan_defs(kind, dt, wide, dev)
                for k in _reduce_scan._TEMPLATES:
                    yield f"{kind} {dt} {k}", _reduce_scan.source(k, defs, 64)[1]
    for dt in FLOATS + INTS:
        for odt in (dt, DType.I64):
            for largest in (True, False):
                defs = _reduce_select.select_defs(dt, odt, dev, largest)
                for k in ("lines", "rows_cpu", "rows_gpu", "topk"):
                    yield f"Arg {dt} {k}", _reduce_select.source(k, defs, 64, k=3)[1]
    for dt in FLOATS:
        for k in _reduce_softmax._TEMPLATES:
            yield f"Softmax {dt} {k}", _reduce_softmax.source(k, dt, dev, 64)[1]
        for dts in ([dt] * 3, [dt] * 5, [dt, DType.F64, DType.F64]):
            for rms, wide in ((False, False), (True, False), (False, True), (True, True)):
                defs = _reduce_norm.norm_defs(dts, dev, rms, wide)
                for k in _reduce_norm._TEMPLATES:
                    yield (f"Norm {dts} {k}{' wide' if wide else ''}",
                           _reduce_norm.source(k, defs, 64)[1])


def test_avx2_cpus_get_no_8_wide_64_bit_vectors():
    bad = [label for label, src in every_kernel(AVX2) if WIDE_64.search(src)]
    assert not bad, bad[:5]
    srcs = dict(every_kernel(AVX2))
    assert "double4" in srcs["Reduce Sum f64 rows_cpu"]
    assert "long4" in srcs["Cumsum i32 cols_cpu"] or "ulong4" in srcs["Cumsum i32 cols_cpu"]
    assert "long4" in srcs["Arg i32 rows_cpu"]
    assert "float8" in srcs["Softmax f32 rows_cpu"]     # 32-bit lanes stay 8 wide
    assert "double4" in srcs[f"Norm {[DType.F32] * 3} rows_cpu wide"]   # f64 statistics
    assert "double4" in srcs["Reduce Sum f32 rows_cpu wide"]


def test_avx512_cpus_keep_8_wide_vectors():
    srcs = dict(every_kernel(AVX512))
    for label in ("Reduce Sum f64 rows_cpu", "Softmax f64 rows_cpu", "Arg f64 rows_cpu",
                  "Cumsum f64 cols_cpu"):
        assert "double8" in srcs[label], label
    assert vec_width(AVX512, "long") == 8 and vec_width(AVX2, "long") == 4
    assert vec_width(AVX2, "float") == 8


def test_every_rendered_kernel_has_its_lanes_expanded():
    for label, src in every_kernel(AVX2):
        assert "@" not in src, label


def _dev(version, widths=(16, 16, 8, 8)):
    f, i, lg, d = widths
    return SimpleNamespace(version=version, native_vector_width_float=f,
                           native_vector_width_int=i, native_vector_width_long=lg,
                           native_vector_width_double=d)


def test_vector_bytes_follow_the_llvm_target_cpu():
    zen3 = "OpenCL 3.0 PoCL HSTR: pthread-x86_64-unknown-linux-gnu-znver3"
    skx = "OpenCL 3.0 PoCL HSTR: pthread-x86_64-pc-linux-gnu-skylake-avx512"
    assert devices.llvm_target_cpu(zen3) == "znver3"
    assert devices.llvm_target_cpu(skx) == "skylake-avx512"
    assert devices.llvm_target_cpu("OpenCL 3.0 CUDA") is None
    # PoCL reports 64-byte vectors on every x86 target; the target CPU decides
    assert devices.vector_bytes(_dev(zen3), True) == 32
    assert devices.vector_bytes(_dev(skx), True) == 64
    assert devices.vector_bytes(_dev(zen3.replace("znver3", "znver4")), True) == 64
    # other drivers: what the device reports
    assert devices.vector_bytes(_dev("OpenCL 3.0 (Build 0)", (8, 8, 4, 4)), True) == 32


def test_probe_failure_names_device_driver_compiler_message_and_fix(monkeypatch):
    def broken(info, context, queue):
        raise RuntimeError("clBuildProgram failed: BUILD_PROGRAM_FAILURE - clBuildProgram "
                           "failed: BUILD_PROGRAM_FAILURE\n\nBuild on <pyopencl.Device>:\n\n"
                           "error: unknown target CPU 'generic'\nnote: valid target CPU "
                           "values are: nocona, core2")
    monkeypatch.setattr(probe, "run_probe", broken)
    monkeypatch.setattr(probe, "_RESULTS", {})
    why = probe.probe_failure(AVX2, None, None)
    assert why == "error: unknown target CPU 'generic'"
    msg = probe.unusable_message(AVX2, why)
    assert "\n" not in msg
    for part in ("pthread-AMD EPYC 7763", "opencl:0:0", "PoCL 3.0-rc2, LLVM 14.0.6",
                 "unknown target CPU 'generic'", "does not know this CPU",
                 "apt-get install pocl-opencl-icd", "PYOPENCL_CTX"):
        assert part in msg, part


def test_probe_runs_once_per_device(monkeypatch):
    calls = []
    monkeypatch.setattr(probe, "run_probe", lambda info, c, q: calls.append(info.index))
    monkeypatch.setattr(probe, "_RESULTS", {})
    for _ in range(3):
        assert probe.probe_failure(AVX2, None, None) == ""
    assert calls == [(0, 0)]


@pytest.fixture
def fake_devices(monkeypatch):
    """Two fake devices, 0:0 and 1:0; the probe fails on the indices in the returned set."""
    failing = set()
    entries = {(0, 0): (_info(32, (0, 0)), "ctx0", "q0"),
               (1, 0): (_info(64, (1, 0)), "ctx1", "q1")}

    def run(info, context, queue):
        if info.index in failing:
            raise RuntimeError("error: unknown target CPU 'generic'")
    monkeypatch.setattr(probe, "run_probe", run)
    monkeypatch.setattr(probe, "_RESULTS", {})
    monkeypatch.delenv("PYOPENCL_CTX", raising=False)
    monkeypatch.setattr(devices, "candidates", lambda spec: (
        [(int(spec[0]), 0, f"d{spec[0]}")] if spec and spec != "pocl"
        else [(0, 0, "d0"), (1, 0, "d1")]))
    monkeypatch.setattr(devices, "_open", lambda p, d, dev: entries[(p, d)])
    return failing


def test_default_choice_skips_a_device_that_fails_the_probe(fake_devices):
    assert devices.context_for(None)[1] == "ctx0"
    probe.forget()
    fake_devices.add((0, 0))
    assert devices.context_for(None)[1] == "ctx1"
    assert devices.context_for("pocl")[1] == "ctx1"     # a vendor: its first healthy device
    with pytest.raises(DeviceError, match="opencl:0:0.*unknown target CPU"):
        devices.context_for("0")         # named: no substitute
    fake_devices.add((1, 0))
    probe.forget()
    with pytest.raises(DeviceError, match="opencl:0:0.*does not know this CPU"):
        devices.context_for(None)


def test_backend_is_unavailable_with_the_one_line_reason(fake_devices):
    from rlx_ref.backends.base import BackendUnavailable
    from rlx_ref.backends.opencl.backend import OpenCLBackend
    from rlx_ref.ir.graph import Graph

    fake_devices.update({(0, 0), (1, 0)})
    b = OpenCLBackend()
    ok, why = b.availability()
    assert not ok and "\n" not in why
    assert why.startswith("OpenCL device pthread-AMD EPYC 7763") and "Fix:" in why
    assert "unavailable" in b.device
    g = Graph("g")
    g.set_outputs([g.relu(g.input("x", [2]))])
    with pytest.raises(BackendUnavailable, match="unknown target CPU 'generic'"):
        b.compile(g)


def test_concurrent_first_uses_probe_once(monkeypatch):
    import threading
    import time

    calls = []

    def slow(info, context, queue):
        calls.append(info.index)
        time.sleep(0.05)
    monkeypatch.setattr(probe, "run_probe", slow)
    monkeypatch.setattr(probe, "_RESULTS", {})
    out = []
    threads = [threading.Thread(target=lambda: out.append(probe.probe_failure(AVX2, 0, 0)))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [(0, 0)] and out == [""] * 8


def test_pip_pocl_alone_is_usable_or_says_why(tmp_path):
    """The fresh-machine path: only the PoCL pyopencl[pocl] brings (system drivers hidden)."""
    import os
    import subprocess
    import sys

    pytest.importorskip("pyopencl")
    code = ("from rlx_ref.backends.registry import get_backend\n"
            "ok, why = get_backend('opencl').availability()\n"
            "print('OK' if ok else 'NO ' + why)\n")
    env = {**os.environ, "OCL_ICD_VENDORS": str(tmp_path), "RLX_REF_CACHE_DIR": str(tmp_path)}
    env.pop("PYOPENCL_CTX", None)
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    line = run.stdout.strip().splitlines()[-1]
    assert line == "OK" or line.startswith("NO "), line
    if "cannot build" in line:          # a PoCL that lists the CPU but cannot compile for it
        assert "Fix:" in line and "pocl-opencl-icd" in line
