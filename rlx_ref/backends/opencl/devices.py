"""Which OpenCL device a spec names, and what that device can do.

Specs: ``""``/``None`` (``PYOPENCL_CTX`` when set, else the GPUs, then the other
devices), ``P:D`` (platform and device index), ``P`` (first device of platform P) and
vendor names (``amd``, ``intel``, ``apple``, ``nvidia``, ``pocl``: the devices whose
platform name or vendor contains it). Contexts and queues are made once per device, and
every device is probed (``probe.py``) before its first use: of several candidates the
first that passes is used, and one that cannot build and run a tiny program is refused
with the compiler's message and the fix, not left to fail kernel by kernel.
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass

from ...env_registry import get, lookup, raw

VENDOR_WORDS = {"amd": ("amd", "advanced micro devices"), "intel": ("intel",),
                "apple": ("apple",), "nvidia": ("nvidia",),
                "pocl": ("portable computing language", "pocl")}


KERNELS_ENV = "RLX_REF_OPENCL_KERNELS"
KERNEL_STYLES = lookup(KERNELS_ENV).choices     # auto, gpu, cpu (the registry's)


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
    vector_bytes: int = 64  # the widest native vector register (CPU kernels' vectors)
    driver: str = ""        # the platform's version string (PoCL and LLVM versions)
    kernels: str = "auto"   # kernel style: "auto" (by device type), or "gpu"/"cpu" forced

    @property
    def label(self) -> str:
        forced = f", {self.kernels.upper()}-style kernels forced" if self.kernels != "auto" \
            else ""
        return f"{self.name} ({self.platform}, opencl:{self.index[0]}:{self.index[1]}{forced})"

    @property
    def driver_summary(self) -> str:
        """``PoCL 3.0-rc2, LLVM 14.0.6`` where the platform says so, else its version."""
        parts = re.findall(r"\b(?:PoCL|LLVM) [\w.+-]+", self.driver)
        return ", ".join(parts) or " ".join(self.driver.split())


def kernel_style(value: str | None) -> str:
    """``value`` checked as a kernel style; None reads ``RLX_REF_OPENCL_KERNELS`` (unset:
    auto). ValueError names the expected values."""
    where = "kernels"
    if value is None:
        value, where = (raw(KERNELS_ENV) or "").strip() or "auto", KERNELS_ENV
    style = str(value).strip().lower()
    if style not in KERNEL_STYLES:
        raise ValueError(f"bad OpenCL kernel style {value!r} ({where}): expected one of "
                         f"{', '.join(KERNEL_STYLES)} (auto: GPU-style kernels on GPUs "
                         "and Oclgrind, CPU-style on CPUs)")
    return style


def _cl():
    from .pocl_cache import own_pocl_cache

    own_pocl_cache()            # before the first call into PoCL, which reads it once
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


def default_candidates() -> list:
    """(platform index, device index, Device) in default order: GPUs first."""
    devs = _all_devices()
    gpus = [d for d in devs if d[3].type & _cl().device_type.GPU]
    return [d[:2] + (d[3],) for d in gpus + [d for d in devs if d not in gpus]]


def candidates(spec: str | None) -> list:
    """The devices ``spec`` may mean, preferred first: (platform, device index, Device)."""
    devs = _all_devices()
    if not devs:
        raise DeviceError("no OpenCL platform or device is installed (for a CPU device: "
                          "pip install 'pyopencl[pocl]')")
    spec = (spec or "").strip().lower()
    if not spec:
        spec = (get("PYOPENCL_CTX") or "").strip()
        if not spec:
            return default_candidates()
    if spec in VENDOR_WORDS:
        words = VENDOR_WORDS[spec]
        # the driver's vendor, not the chip's: PoCL on an AMD CPU is not an "amd" device
        found = [(p, d, dev) for p, d, plat, dev in devs
                 if any(w in f"{plat.name} {plat.vendor}".lower() for w in words)]
        if not found:
            raise DeviceError(f"no OpenCL device from vendor {spec!r}; devices: "
                              f"{_listing(devs)}")
        return found
    parts = spec.split(":")
    try:
        p = int(parts[0])
        d = int(parts[1]) if len(parts) > 1 and parts[1] != "" else 0
    except ValueError:
        raise DeviceError(f"bad OpenCL device spec {spec!r}: expected P:D (indices), P, or "
                          f"one of {', '.join(VENDOR_WORDS)}") from None
    for pp, dd, _plat, dev in devs:
        if (pp, dd) == (p, d):
            return [(p, d, dev)]
    raise DeviceError(f"no OpenCL device {p}:{d}; devices: {_listing(devs)}")


def find_device(spec: str | None):
    """(platform index, device index, pyopencl Device) for ``spec`` (the first choice)."""
    return candidates(spec)[0]


# LLVM CPU names with AVX-512 (PoCL's CPU devices name their LLVM target in the HSTR)
_AVX512_CPUS = {"skylake-avx512", "cascadelake", "cooperlake", "cannonlake", "icelake-client",
                "icelake-server", "tigerlake", "rocketlake", "sapphirerapids", "graniterapids",
                "graniterapids-d", "emeraldrapids", "knl", "knm", "znver4", "znver5",
                "x86-64-v4"}


def llvm_target_cpu(version: str) -> str | None:
    """The LLVM CPU a PoCL CPU device compiles for, from its version string's HSTR."""
    m = re.search(r"HSTR:\s*\S*?-(?:linux|darwin|freebsd|windows)[\w.]*-(?:gnu\w*-|musl\w*-)?"
                  r"(\S+)", version)
    return m.group(1) if m else None


def vector_bytes(dev, fp64: bool) -> int:
    """Bytes of the device's widest native vector register."""
    reported = max(4 * dev.native_vector_width_float, 4 * dev.native_vector_width_int,
                   8 * dev.native_vector_width_long,
                   8 * dev.native_vector_width_double if fp64 else 0)
    target = llvm_target_cpu(dev.version.strip())
    if target and "x86" in dev.version:
        # PoCL reports 64-byte vectors whatever its LLVM targets; what LLVM emits (and can
        # select) follows the target CPU: AVX-512 or not
        avx512 = target in _AVX512_CPUS or "avx512" in target
        return min(reported, 64 if avx512 else 32)
    return reported


def describe(p: int, d: int, dev) -> DeviceInfo:
    cl = _cl()
    ext = dev.extensions.split()
    fp64 = "cl_khr_fp64" in ext or dev.double_fp_config != 0
    return DeviceInfo(
        name=dev.name.strip(), platform=dev.platform.name.strip(), index=(p, d),
        is_cpu=bool(dev.type & cl.device_type.CPU), fp64=fp64,
        fp16="cl_khr_fp16" in ext, max_work_group=int(dev.max_work_group_size),
        compute_units=int(dev.max_compute_units), local_mem=int(dev.local_mem_size),
        version=dev.version.strip(), vector_bytes=vector_bytes(dev, fp64),
        driver=dev.platform.version.strip())


_CONTEXTS: dict = {}
_LOCK = threading.Lock()


def _open(p: int, d: int, dev):
    """(DeviceInfo, Context, in-order CommandQueue) of one device, made once."""
    with _LOCK:
        if (p, d) not in _CONTEXTS:
            cl = _cl()
            ctx = cl.Context([dev])
            _CONTEXTS[(p, d)] = (describe(p, d, dev), ctx, cl.CommandQueue(ctx))
        return _CONTEXTS[(p, d)]


def context_for(spec: str | None):
    """(DeviceInfo, Context, in-order CommandQueue) for ``spec``, made once per device:
    the first of its candidates that passes the health probe; when none does,
    ``DeviceError`` says why the first failed and what fixes it."""
    from .probe import probe_failure, unusable_message

    first = None
    for p, d, dev in candidates(spec):
        entry = _open(p, d, dev)
        why = probe_failure(*entry)
        if not why:
            return entry
        first = first or unusable_message(entry[0], why)
    raise DeviceError(first)
