"""The catalogue of planted faults (``faults.py``): one per bug class real kernels have.

Each entry mutates the real numba-cpu or OpenCL kernel in one place and names the
conformance selection (``ops``/``dtypes``/``tags``) that must catch it, and the kernel
variant it sits in. A fault with a ``gap`` is one the current accuracy contracts cannot
catch (the reason says why); it is reported, counted in the share, and expected missed.
``rlx-ref conformance --power`` runs every entry; ``tests/test_power.py`` asserts each is
caught and that the unfaulted backends pass the same selections.

Each module of this package holds one backend family's ``FAULTS`` (``numba_cpu.py``,
``opencl.py``, ...); ``_patches.py`` holds the Python-level fault factories they share.
"""
from __future__ import annotations

import importlib
import pkgutil

from ..faults import Fault, FaultError


def _collect() -> tuple:
    """Every ``FAULTS`` tuple of this package's modules, in module-name order."""
    out = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            out.extend(importlib.import_module(f"{__name__}.{info.name}").FAULTS)
    return tuple(out)


FAULTS: tuple = _collect()


def by_name(name: str) -> Fault:
    """The catalogued fault called ``name``; FaultError lists the known names."""
    for f in FAULTS:
        if f.name == name:
            return f
    raise FaultError(f"unknown fault {name!r}; known: {', '.join(f.name for f in FAULTS)}")


def select_faults(names=None, backends=None) -> list:
    """Catalogued faults by name (a comma list or list) and backend names."""
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    if isinstance(backends, str):
        backends = [b.strip() for b in backends.split(",") if b.strip()]
    out = [by_name(n) for n in names] if names else list(FAULTS)
    return [f for f in out if not backends or f.backend in backends]


# Declared kernel variants no planted fault sits in yet: the catalogue's own gap, reported
# by --power and kept exact by tests/test_power.py (a variant that gains a fault leaves it).
WITHOUT_FAULT = (
    "numba-cpu:fused.conv_epilogue.par", "numba-cpu:fused.conv_epilogue.serial",
    "numba-cpu:fused.gated.par", "numba-cpu:fused.gated.serial",
    "numba-cpu:fused.residual_rms.par", "numba-cpu:fused.residual_rms.serial",
    "numba-cpu:fused.swiglu.par", "numba-cpu:fused.swiglu.serial",
)
