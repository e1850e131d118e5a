"""Which OpenCL device a spec names, and what that device can do.

Specs: ``""``/``None`` (``PYOPENCL_CTX`` when set, else the first GPU, else the first
device), ``P:D`` (platform and device index), ``P`` (first device of platform P) and
vendor names (``amd``, ``intel``, ``apple``, ``nvidia``, ``pocl``: the first device whose
platform name or vendor contains it). Contexts and queues are made once per device.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass

VENDOR_WORDS = {"amd": ("amd", "advanced micro devices"), "intel": ("intel",),
                "apple": ("apple",), "nvidia": ("nvidia",),
                "pocl": ("portable computing language", "pocl")}


class DeviceError(RuntimeError):
    """The spec names no usable OpenCL device; the message lists what exists."""


@dataclass(frozen=True)
class DeviceInfo:
    """What kernel rendering and the declared op table depend on."""

    name: str
    platform: str
    index: tuple            # (platform index, device index)
    is_cpu: bool
    fp64: bool
    fp16: bool
    max_work_group: int
    compute_units: int
    local_mem: int
    version: str

    @property
    def label(self) -> str:
        return f"{self.name} ({self.platform}, opencl:{self.index[0]}:{self.index[1]})"


def _cl():
    import pyopencl as cl

    return cl


def _all_devices() -> list:
    cl = _cl()
    out = []
    for p_i, plat in enumerate(cl.get_platforms()):
        try:
            devs = plat.get_devices()
        except cl.Error:
            continue
        out.extend((p_i, d_i, plat, dev) for d_i, dev in enumerate(devs))
    return out


def _listing(devs) -> str:
    return "; ".join(f"{p}:{d} {dev.name.strip()} [{plat.name.strip()}]"
                     for p, d, plat, dev in devs) or "no OpenCL devices"


def find_device(spec: str | None):
    """(platform index, device index, pyopencl Device) for ``spec``."""
    devs = _all_devices()
    if not devs:
        raise DeviceError("no OpenCL platform or device is installed (for a CPU device: "
                          "pip install 'pyopencl[pocl]')")
    spec = (spec or "").strip().lower()
    if not spec:
        spec = os.environ.get("PYOPENCL_CTX", "").strip()
        if not spec:
            gpus = [d for d in devs if d[3].type & _cl().device_type.GPU]
            return (gpus or devs)[0][:2] + ((gpus or devs)[0][3],)
    if spec in VENDOR_WORDS:
        words = VENDOR_WORDS[spec]
        for p, d, plat, dev in devs:
            hay = f"{plat.name} {plat.vendor}".lower()     # the driver's vendor, not the
            # chip's: PoCL on an AMD CPU is not an "amd" device
            if any(w in hay for w in words):
                return p, d, dev
        raise DeviceError(f"no OpenCL device from vendor {spec!r}; devices: {_listing(devs)}")
    parts = spec.split(":")
    try:
        p = int(parts[0])
        d = int(parts[1]) if len(parts) > 1 and parts[1] != "" else 0
    except ValueError:
        raise DeviceError(f"bad OpenCL device spec {spec!r}: expected P:D (indices), P, or "
                          f"one of {', '.join(VENDOR_WORDS)}") from None
    for pp, dd, _plat, dev in devs:
        if (pp, dd) == (p, d):
            return p, d, dev
    raise DeviceError(f"no OpenCL device {p}:{d}; devices: {_listing(devs)}")


def describe(p: int, d: int, dev) -> DeviceInfo:
    cl = _cl()
    ext = dev.extensions.split()
    return DeviceInfo(
        name=dev.name.strip(), platform=dev.platform.name.strip(), index=(p, d),
        is_cpu=bool(dev.type & cl.device_type.CPU),
        fp64="cl_khr_fp64" in ext or dev.double_fp_config != 0,
        fp16="cl_khr_fp16" in ext, max_work_group=int(dev.max_work_group_size),
        compute_units=int(dev.max_compute_units), local_mem=int(dev.local_mem_size),
        version=dev.version.strip())


_CONTEXTS: dict = {}
_CONTEXTS_LOCK = threading.Lock()    # one context per device, also when threads compile


def context_for(spec: str | None):
    """(DeviceInfo, Context, in-order CommandQueue) for ``spec``, made once per device."""
    p, d, dev = find_device(spec)
    key = (p, d)
    with _CONTEXTS_LOCK:
        if key not in _CONTEXTS:
            cl = _cl()
            ctx = cl.Context([dev])
            _CONTEXTS[key] = (describe(p, d, dev), ctx, cl.CommandQueue(ctx))
        return _CONTEXTS[key]
