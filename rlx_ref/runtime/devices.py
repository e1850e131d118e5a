"""Devices by name (RLX's ``parse_device`` / ``device_label`` / ``is_available``) over
rlx_ref's backends.

A ``Device`` is an RLX label plus the backend spec it runs on (``rlx_ref.backends.registry``):

| you write                                   | label        | backend                  |
|---------------------------------------------|--------------|--------------------------|
| ``cpu``, ``numba-cpu``                      | ``cpu``      | ``numba-cpu``            |
| ``cpu-ref``, ``reference``                  | ``reference``| ``reference`` (oracle)   |
| ``gpu``, ``wgpu``                           | ``gpu``      | the first GPU (below)    |
| ``cuda``, ``nvidia``, ``cuda:N``            | ``cuda[:N]`` | ``cuda[:N]``             |
| ``opencl``, ``opencl:P``, ``opencl:P:D``    | ``opencl[:P:D]`` | ``opencl[:P:D]``     |
| ``rocm``, ``amd``, ``hip``                  | ``rocm``     | ``opencl:amd``           |
| ``oneapi``, ``intel``, ``sycl``, ``level-zero`` | ``oneapi`` | ``opencl:intel``       |
| ``metal``, ``apple``, ``mtl``               | ``metal``    | ``opencl:apple``         |

``gpu`` is a real CUDA GPU when numba sees one (not the simulator), else the first
OpenCL device of GPU type. Any other backend name the registry knows (``broken``, entry
points) and ``module:object`` specs are devices too, labelled by their spec. Names are
matched case-insensitively, as RLX.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

KINDS = {"cpu": "numba-cpu", "reference": "reference", "gpu": "", "cuda": "cuda",
         "opencl": "opencl", "rocm": "opencl:amd", "oneapi": "opencl:intel",
         "metal": "opencl:apple"}
ALIASES = {"numba-cpu": "cpu", "cpu-ref": "reference", "wgpu": "gpu", "nvidia": "cuda",
           "amd": "rocm", "hip": "rocm", "intel": "oneapi", "sycl": "oneapi",
           "levelzero": "oneapi", "level-zero": "oneapi", "l0": "oneapi", "apple": "metal",
           "mtl": "metal"}
# RLX devices with no rlx_ref backend: named in the error, so an RLX config says why
RLX_ONLY = ("mlx", "ane", "coreml", "neural-engine", "vulkan", "vk", "opengl", "gl",
            "directx", "dx12", "d3d12", "webgpu", "tpu", "hexagon", "htp", "qnn", "xdna")
VALID = ("cpu", "cpu-ref", "reference", "gpu", "cuda[:N]", "opencl[:P:D]", "rocm", "amd",
         "oneapi", "intel", "metal", "apple", "nvidia", "numba-cpu")
# The probe set and placeholder platform order (RLX's DEVICE_PRIORITY, fastest first)
PRIORITY = ("cuda", "rocm", "oneapi", "metal", "gpu", "opencl", "cpu", "reference")


class DeviceParseError(ValueError):
    """A device name that names nothing (RLX's ``ParseDeviceError``); ``input`` is the text."""

    def __init__(self, text: str, message: str):
        super().__init__(message)
        self.input, self.message = text, message


@dataclass(frozen=True)
class Device:
    """An RLX device label and the rlx_ref backend spec it runs on ("" for ``gpu``: the
    first GPU, found when first used)."""

    label: str
    spec: str

    @property
    def kind(self) -> str:
        """``cuda`` for ``cuda:1``, ``opencl`` for ``opencl:0:1``."""
        head = self.label.partition(":")[0]
        return head if head in KINDS else self.label

    def __str__(self) -> str:
        return self.label


def _known_backends() -> list:
    from ..backends.registry import backend_names

    return backend_names()


def _indexed(kind: str, rest: str, text: str) -> Device:
    parts = rest.split(":")
    ok = all(p.isdigit() for p in parts) and len(parts) <= (1 if kind == "cuda" else 2)
    if not ok:
        form = "cuda:N (a GPU number)" if kind == "cuda" else "opencl:P:D (platform, device)"
        raise DeviceParseError(text, f"bad device '{text.strip()}': expected {form}")
    if kind == "opencl" and len(parts) == 1:
        parts.append("0")
    label = f"{kind}:{':'.join(str(int(p)) for p in parts)}"
    return Device(label, label)


_PARSED: dict = {}            # text -> Device: a run names its device on every call


def parse_device(text) -> Device:
    """``text`` (or a Device) as a Device; ``DeviceParseError`` lists the valid names."""
    if isinstance(text, Device):
        return text
    dev = _PARSED.get(text)
    if dev is None:
        dev = _parse(text)
        with _LOCK:
            _PARSED[text] = dev
    return dev


def _parse(text) -> Device:
    raw = str(text).strip()
    key = raw.lower()
    if not key:
        raise DeviceParseError(str(text), "empty device name")
    key = ALIASES.get(key, key)
    if key in KINDS:
        return Device(key, KINDS[key])
    head, sep, rest = key.partition(":")
    if sep and head in ("cuda", "opencl", "nvidia"):
        return _indexed("cuda" if head == "nvidia" else head, rest, str(text))
    if key in _known_backends():
        return Device(key, key)
    if sep and head not in KINDS and raw.partition(":")[2] and "+" not in raw:
        return _plugin(raw)
    extra = (f"; RLX's {key} backend has no rlx_ref counterpart" if key in RLX_ONLY else "")
    names = ", ".join(VALID + tuple(n for n in _known_backends() if n not in KINDS.values()))
    raise DeviceParseError(str(text), f"unknown device '{key}' (try: {names}, or "
                                      f"module:object){extra}")


def _plugin(spec: str) -> Device:
    """A ``module:object`` backend, checked to import."""
    from ..backends.base import BackendUnavailable
    from ..backends.registry import get_backend

    try:
        get_backend(spec)
    except BackendUnavailable as e:
        raise DeviceParseError(spec, f"unknown device '{spec}': {e}") from None
    return Device(spec, spec)


def parse_device_list(text) -> list:
    """Comma/semicolon/space-separated names (``RLX_DEVICES=cpu,opencl``), deduplicated in
    order; a list or tuple of names is accepted too. Empty is an error, as in RLX."""
    parts = text if isinstance(text, (list, tuple)) else \
        str(text).replace(";", ",").replace(" ", ",").split(",")
    out = []
    for part in parts:
        if isinstance(part, str) and not part.strip():
            continue
        dev = parse_device(part)
        if dev not in out:
            out.append(dev)
    if not out:
        raise DeviceParseError(str(text), "device list is empty")
    return out


def device_label(device) -> str:
    """The stable label of ``device`` (``cpu``, ``cuda:1``, ``rocm``, ...)."""
    return parse_device(device).label


# ── backends behind devices (made once per label; probing a driver is slow) ────

_LOCK = threading.Lock()
_BACKENDS: dict = {}          # label -> (Backend | None, why not)
_KEYS: dict = {}              # label -> backend_key


def _gpu_spec() -> tuple:
    """(spec, "") of the first GPU, or ("", why there is none)."""
    from ..backends.base import BackendUnavailable
    from ..backends.registry import get_backend

    whys = []
    try:
        cuda = get_backend("cuda")
        ok, why = cuda.availability()
        if ok and not cuda.emulated:
            return "cuda:0", ""
        whys.append(f"cuda: {why or 'only the CUDA simulator'}")
    except BackendUnavailable as e:
        whys.append(f"cuda: {e}")
    try:
        from ..backends.opencl.devices import default_candidates

        for p, d, dev in default_candidates():
            if dev.type & 4:                     # CL_DEVICE_TYPE_GPU
                return f"opencl:{p}:{d}", ""
        whys.append("opencl: no OpenCL GPU device")
    except Exception as e:  # noqa: BLE001 - no pyopencl, no platform: say which
        whys.append(f"opencl: {type(e).__name__}: {e}")
    return "", "no GPU device (" + "; ".join(whys) + ")"


def _make_backend(device: Device) -> tuple:
    from ..backends.base import BackendUnavailable
    from ..backends.registry import get_backend

    spec = device.spec
    if device.label == "gpu":
        spec, why = _gpu_spec()
        if not spec:
            return None, why
    try:
        return get_backend(spec), ""
    except BackendUnavailable as e:
        return None, str(e)


def backend_for(device):
    """The Backend ``device`` runs on (one object per label), or None when there is none."""
    return _entry(parse_device(device))[0]


def _entry(device: Device) -> tuple:
    entry = _BACKENDS.get(device.label)
    if entry is None:
        with _LOCK:
            entry = _BACKENDS.get(device.label)
            if entry is None:
                entry = _BACKENDS[device.label] = _make_backend(device)
    return entry


def clear_backends() -> None:
    """Forget the backends and parsed names so far (after the environment changed)."""
    with _LOCK:
        _BACKENDS.clear()
        _KEYS.clear()
        _PARSED.clear()


def availability(device) -> tuple:
    """(True, "") when ``device`` can run here, else (False, why not)."""
    backend, why = _entry(parse_device(device))
    if backend is None:
        return False, why
    return backend.availability()


def is_available(device) -> bool:
    """Whether ``device`` has a usable backend here (unknown names raise, as pyrlx)."""
    return availability(device)[0]


def probe_set() -> list:
    """Every device rlx_ref knows, in platform order, plus entry-point backends."""
    from ..backends.registry import BUILTIN

    extra = [n for n in _known_backends() if n not in BUILTIN]
    return [parse_device(k) for k in PRIORITY + tuple(extra)]


def available_devices() -> list:
    """Every device usable here, in platform order (RLX's ``available_devices``)."""
    return [d for d in probe_set() if is_available(d)]


def emulated(device) -> bool:
    """Whether ``device`` stands in for hardware (PoCL on a CPU, the CUDA simulator)."""
    backend = backend_for(device)
    return bool(backend is not None and backend.availability()[0] and backend.emulated)


def priority(device) -> float:
    """Placeholder platform rank (lower is preferred): ``PRIORITY`` order, with an
    emulated device just before the oracle, since it runs on the host CPU anyway."""
    dev = parse_device(device)
    rank = PRIORITY.index(dev.kind) if dev.kind in PRIORITY else len(PRIORITY)
    if emulated(dev):
        return PRIORITY.index("reference") - 0.5
    return float(rank)


def backend_key(device):
    """What identifies the backend ``device`` runs on: ``gpu`` and ``cuda`` on one GPU
    share a key, so an executable is compiled once for both."""
    label = device.label if isinstance(device, Device) else parse_device(device).label
    key = _KEYS.get(label)
    if key is None:
        backend = backend_for(label)
        key = ("none", label) if backend is None else (
            type(backend).__name__, backend.name, str(backend.device),
            getattr(backend, "index", None), getattr(backend, "kernels", None))
        with _LOCK:
            _KEYS[label] = key
    return key
