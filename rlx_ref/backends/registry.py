"""Backends by name: built-ins load lazily; third parties register an entry point in the
group ``rlx_ref.backends`` or are named ``module:object`` (a Backend class or instance)."""
from __future__ import annotations

import importlib

from .base import Backend, BackendUnavailable
from .faults import SEP

BUILTIN = {
    "reference": "rlx_ref.backends.reference:ReferenceBackend",
    "broken": "rlx_ref.backends.broken:BrokenBackend",
    "broken-faults": "rlx_ref.backends.broken:FaultyBrokenBackend",
    "numba-cpu": "rlx_ref.backends.numba_cpu:NumbaCpuBackend",
    "opencl": "rlx_ref.backends.opencl:OpenCLBackend",
    "cuda": "rlx_ref.backends.numba_cuda:NumbaCudaBackend",
}
# Built-ins that take a device after a colon (``opencl:0:1``, ``cuda:1``): the class is
# called with ``device=`` that suffix.
DEVICE_BACKENDS = ("opencl", "cuda")
# Built-ins that take an option after a slash (``opencl/gpu-kernels``,
# ``opencl:0:1/gpu-kernels``): option → keyword arguments of the class.
OPTIONS = {"opencl": {"gpu-kernels": {"kernels": "gpu"}, "cpu-kernels": {"kernels": "cpu"}}}
# Vendor names → a device spec. ``nvidia`` means CUDA where a CUDA GPU is usable and the
# first NVIDIA OpenCL device otherwise (see ``_resolve_alias``).
ALIASES = {"amd": "opencl:amd", "rocm": "opencl:amd", "intel": "opencl:intel",
           "oneapi": "opencl:intel", "apple": "opencl:apple", "nvidia": "cuda"}
ENTRY_POINT_GROUP = "rlx_ref.backends"


def _entry_points() -> dict:
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def _load(spec: str):
    module, _, attr = spec.partition(":")
    try:
        obj = importlib.import_module(module)
    except ImportError as e:
        raise BackendUnavailable(f"cannot import backend module {module!r}: {e}") from None
    for part in attr.split(".") if attr else ():
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise BackendUnavailable(f"module {module!r} has no attribute {attr!r}") from None
    return obj


def _instantiate(obj, spec: str, **kwargs) -> Backend:
    try:
        inst = obj(**kwargs) if isinstance(obj, type) else obj
    except ValueError as e:           # a bad argument (or its environment variable)
        raise BackendUnavailable(f"{spec!r}: {e}") from None
    for attr in ("name", "supported_ops", "compile"):
        if not hasattr(inst, attr):
            raise BackendUnavailable(f"{spec!r} is not a backend: it has no {attr!r}")
    return inst


def backend_names() -> list[str]:
    """Every backend name known here (built-in and entry points)."""
    return sorted(set(BUILTIN) | set(_entry_points()))


def alias_names() -> list[str]:
    """Vendor aliases accepted by ``get_backend`` (not separate backends)."""
    return sorted(ALIASES)


def _with_option(spec: str) -> Backend:
    """``NAME[:DEVICE]/OPTION`` of a built-in that takes options (``OPTIONS``)."""
    base, _, option = spec.partition("/")
    name, _, device = base.partition(":")
    known = OPTIONS[name]
    if option not in known:
        raise BackendUnavailable(
            f"unknown {name} option {option!r} in backend spec {spec!r}; expected "
            f"{name}[:DEVICE]/OPTION with OPTION one of {', '.join(known)}")
    return _instantiate(_load(BUILTIN[name]), spec, device=device or None, **known[option])


def _resolve_alias(spec: str) -> str:
    target = ALIASES[spec]
    if spec == "nvidia":
        try:
            cuda = get_backend("cuda")
            if cuda.availability()[0] and not cuda.emulated:
                return "cuda"
        except BackendUnavailable:
            pass
        return "opencl:nvidia"
    return target


def get_backend(spec: str) -> Backend:
    """A backend by name (``opencl:P:D``, ``cuda:N`` and vendor aliases included), with an
    option (``opencl/gpu-kernels``: ``OPTIONS``), entry-point name, or ``module:object``;
    ``NAME+fault:FAULT`` plants a catalogued fault (``faults.py``)."""
    if SEP in spec:                          # a real backend with a planted fault
        from .faults import FaultError, faulted, split_spec

        base, fault = split_spec(spec)
        try:
            return faulted(get_backend(base), fault)
        except FaultError as e:
            raise BackendUnavailable(str(e)) from None
    if spec in ALIASES:
        return get_backend(_resolve_alias(spec))
    if spec in BUILTIN:
        return _instantiate(_load(BUILTIN[spec]), spec)
    if "/" in spec and spec.partition("/")[0].partition(":")[0] in OPTIONS:
        return _with_option(spec)
    name, _, device = spec.partition(":")
    if name in DEVICE_BACKENDS and device:
        return _instantiate(_load(BUILTIN[name]), spec, device=device)
    eps = _entry_points()
    if spec in eps:
        return _instantiate(eps[spec].load(), spec)
    if ":" in spec:
        return _instantiate(_load(spec), spec)
    raise BackendUnavailable(
        f"unknown backend {spec!r}; known: {', '.join(backend_names())} "
        "(or give module:object)")


def available_backends() -> list[Backend]:
    """Every known backend that is usable here, test-only ones excluded."""
    out = []
    for name in backend_names():
        try:
            b = get_backend(name)
        except BackendUnavailable:
            continue
        if not getattr(b, "test_only", False) and b.availability()[0]:
            out.append(b)
    return out
