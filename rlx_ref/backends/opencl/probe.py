"""The device health probe: a tiny program (float, and double where the device claims
fp64) built and run once per device per process before the device is used.

A driver can list a device it cannot compile for: the PoCL that ``pyopencl[pocl]``
brings (3.0-rc2, LLVM 14) fails every build on CPUs its LLVM does not know ("unknown
target CPU 'generic'"). Without the probe every conformance case would fail on its own;
with it the backend is unavailable with one line that names the device, the driver, the
compiler's message and the fix. The result is cached per device; a lock makes concurrent
first uses build it once.
"""
from __future__ import annotations

import threading

import numpy as np

_SOURCE = """
__kernel void rlx_probe_f(__global float* out, __global const float* x) {
    size_t i = get_global_id(0);
    out[i] = sqrt(x[i]) * 2.0f + 1.0f;
}
#ifdef RLX_PROBE_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
__kernel void rlx_probe_d(__global double* out, __global const double* x) {
    size_t i = get_global_id(0);
    double4 v = vload4(0, x + 4 * i);
    vstore4(sqrt(v) * 2.0 + 1.0, 0, out + 4 * i);
}
#endif
"""
_INPUT = np.array([0.0, 1.0, 4.0, 9.0, 16.0, 25.0, 36.0, 49.0])
_WANT = np.sqrt(_INPUT) * 2 + 1

_RESULTS: dict = {}          # device index -> "" (healthy) or why not
_LOCK = threading.Lock()

FIX = ("install an OpenCL driver that can, e.g. on Debian/Ubuntu `apt-get install "
       "pocl-opencl-icd` (a PoCL whose LLVM knows current CPUs) or the vendor's driver, and "
       "pick its device "
       "with PYOPENCL_CTX=P:D or the backend spec opencl:P:D (indices as `clinfo -l` lists)")


def _compiler_message(err: Exception) -> str:
    """The line of a build failure that says what went wrong (the log's first error)."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower() and "build_program_failure" not in
              ln.lower()]
    text = (errors or lines or [type(err).__name__])[0]
    return text if len(text) <= 240 else text[:237] + "..."


def run_probe(info, context, queue) -> None:
    """Build and run the probe program on the device; raise if it fails or is wrong."""
    import pyopencl as cl

    options = ["-DRLX_PROBE_FP64"] if info.fp64 else []
    prog = cl.Program(context, _SOURCE).build(options=options)
    mf = cl.mem_flags
    checks = [("rlx_probe_f", np.float32, 8)] + ([("rlx_probe_d", np.float64, 2)]
                                                 if info.fp64 else [])
    for name, dt, items in checks:
        x = _INPUT.astype(dt)
        out = np.zeros_like(x)
        xb = cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
        ob = cl.Buffer(context, mf.WRITE_ONLY, out.nbytes)
        getattr(prog, name)(queue, (items,), None, ob, xb)
        cl.enqueue_copy(queue, out, ob)
        queue.finish()
        if not np.allclose(out, _WANT, rtol=1e-5):
            raise ValueError(f"probe kernel {name} computed {out.tolist()}, expected "
                             f"{_WANT.tolist()}")


def probe_failure(info, context, queue) -> str:
    """"" when the device passed the probe (run once per device), else why it failed."""
    with _LOCK:
        if info.index not in _RESULTS:
            try:
                run_probe(info, context, queue)
                _RESULTS[info.index] = ""
            except Exception as e:  # noqa: BLE001 - any driver failure makes it unusable
                _RESULTS[info.index] = _compiler_message(e)
        return _RESULTS[info.index]


def unusable_message(info, why: str) -> str:
    """One line: which device, which driver, what the compiler said, and the fix."""
    hint = ""
    if "unknown target cpu" in why.lower():
        hint = " (this PoCL's LLVM does not know this CPU)"
    driver = f" [{info.driver_summary}]" if info.driver else ""
    return (f"OpenCL device {info.label}{driver} cannot build and run a test kernel: "
            f"{why}{hint}. Fix: {FIX}")


def forget() -> None:
    """Drop the cached results (tests that fake a failing device)."""
    with _LOCK:
        _RESULTS.clear()
