"""Compile every kernel a graph would launch to PTX, without a GPU.

Lowering only renders kernels and records each launch's (kernel, argument types), so the
check lowers the graph exactly as ``compile`` does and hands each distinct pair to
``numba.cuda.compile_ptx`` for a target compute capability. That proves the kernels type
and lower for that GPU. Identical pairs compile once per process.
"""
from __future__ import annotations

import time
from contextlib import contextmanager

_DONE: dict = {}


@contextmanager
def target_cc(cc):
    """Device functions compile for the current GPU's compute capability, which a machine
    without a GPU cannot report; for the check, the current device is one of ``cc``."""
    from numba.cuda import dispatcher

    class _Target:
        compute_capability = tuple(cc)

    saved = dispatcher.get_current_device
    dispatcher.get_current_device = lambda: _Target
    try:
        yield
    finally:
        dispatcher.get_current_device = saved


class PtxError(RuntimeError):
    """A kernel failed to compile to PTX; the message names the kernel and its types."""


def launches_of(backend, graph, options=None) -> list:
    """Every Launch the compiled ``graph`` makes (bodies included), rendered, not run."""
    from ...passes import compile_pipeline
    from .executable import Plan

    lowered, _ = compile_pipeline(graph, backend, options)
    return Plan(lowered, None, options).launches()


def compile_launches(launches, cc=(9, 0)) -> dict:
    """PTX for each distinct launch; ``{"kernels": compiled now, "cached": seen before}``."""
    from .device import import_cuda

    cuda = import_cuda()
    done = cached = 0
    with target_cc(cc):
        for ln in launches:
            done, cached = _compile_one(cuda, ln, cc, done, cached)
    return {"kernels": done, "cached": cached}


def _compile_one(cuda, ln, cc, done: int, cached: int) -> tuple[int, int]:
    key = ln.key() + (tuple(cc),)
    if key in _DONE:
        return done, cached + 1
    t0 = time.perf_counter()
    try:
        ptx, _ = cuda.compile_ptx(ln.kernel.pyfunc, ln.argtypes, cc=tuple(cc))
    except Exception as e:
        raise PtxError(f"kernel {ln.kernel.name}{tuple(str(t) for t in ln.argtypes)} "
                       f"does not compile for cc {cc}: {e}") from e
    _DONE[key] = (len(ptx), time.perf_counter() - t0)
    return done + 1, cached


def ptx_check(backend, graph, cc=(9, 0), options=None) -> dict:
    return compile_launches(launches_of(backend, graph, options), cc)
