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
    "numba-cpu:arg.cols.par", "numba-cpu:arg.cols.serial", "numba-cpu:arg.rows.par",
    "numba-cpu:batchnorm.par", "numba-cpu:batchnorm.serial",
    "numba-cpu:concat.par", "numba-cpu:concat.serial",
    "numba-cpu:ew.read.mod", "numba-cpu:ew.read.scalar", "numba-cpu:ew.read.up2",
    "numba-cpu:gather.elements.par", "numba-cpu:gather.elements.serial",
    "numba-cpu:gather.nd.par", "numba-cpu:gather.nd.serial", "numba-cpu:gather.pieces",
    "numba-cpu:gather.rows.par", "numba-cpu:gather.rows.serial",
    "numba-cpu:loop.compiled", "numba-cpu:loop.host",
    "numba-cpu:norm.blocks.par", "numba-cpu:norm.cols.par",
    "numba-cpu:norm.cols.serial",
    "numba-cpu:reduce.cols.par", "numba-cpu:rope.par", "numba-cpu:rope.serial",
    "numba-cpu:scan.cols.par", "numba-cpu:scan.cols.serial", "numba-cpu:scan.rows.par",
    "numba-cpu:scan.rows.serial", "numba-cpu:scatter.par", "numba-cpu:scatter.serial",
    "numba-cpu:softmax.cols.par", "numba-cpu:softmax.cols.serial", "numba-cpu:softmax.rows.par",
    "numba-cpu:topk.buffer", "numba-cpu:topk.par", "numba-cpu:topk.serial",
    "numba-cpu:topk.sort", "numba-cpu:trilu.par", "numba-cpu:trilu.serial", "opencl:arg.lines",
    "opencl:arg.rows_gpu", "opencl:attention.cpu", "opencl:attention.gpu", "opencl:batchnorm",
    "opencl:conv.images.chunked", "opencl:conv.images.whole", "opencl:ew.read.mod",
    "opencl:ew.read.scalar", "opencl:ew.read.up2", "opencl:host.reference", "opencl:loop.host",
    "opencl:matmul.direct", "opencl:matmul.gemm_cpu", "opencl:matmul.gemm_gpu",
    "opencl:matmul.skinny", "opencl:move.map", "opencl:move.tiled_gpu", "opencl:norm.cols_gpu",
    "opencl:norm.rows_gpu", "opencl:reduce.cols_cpu", "opencl:reduce.cols_gpu",
    "opencl:reduce.rows_cpu", "opencl:reduce.rows_gpu", "opencl:reduce.strided",
    "opencl:scan.cols_cpu", "opencl:scan.lines", "opencl:scan.rows_gpu",
    "opencl:softmax.cols_cpu", "opencl:softmax.cols_gpu", "opencl:softmax.rows_cpu",
    "opencl:softmax.rows_gpu", "opencl:topk.private", "opencl:topk.scratch",
)
