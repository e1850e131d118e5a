"""Test backends for the device and fallback tests, named as ``module:object`` devices
(``_device_backends:FailAtCompile``): one that fails to compile, one whose executables fail
at run time, and one that counts its compiles and runs."""
import threading

import numpy as np

import rlx_ref
from rlx_ref.backends.reference import ReferenceBackend, ReferenceExecutable

F = np.float32
COMPILE_ERROR = "planted compile failure: the code generator crashed"
RUN_ERROR = "planted run failure: the device lost its context"


def add_graph(n: int = 4) -> rlx_ref.Graph:
    """``x + w`` (Input x, Param w), shape [n] f32."""
    g = rlx_ref.Graph("addw")
    x, w = g.input("x", [n]), g.param("w", [n])
    g.set_outputs([g.add(x, w)])
    return g


def cumsum_graph(n: int = 4) -> rlx_ref.Graph:
    """``cumsum(x + w)``: the ``broken`` backend claims Cumsum but its kernel raises."""
    g = rlx_ref.Graph("cumw")
    x, w = g.input("x", [n]), g.param("w", [n])
    g.set_outputs([g.cumsum(g.add(x, w), 0)])
    return g


class FailAtCompile(ReferenceBackend):
    """Claims every kind, then fails every compile."""

    name = "fail-compile"
    test_only = True

    def compile(self, graph, options=None):
        raise RuntimeError(COMPILE_ERROR)


class _FailingExecutable(ReferenceExecutable):
    def _execute(self, inputs, params, bindings):
        raise RuntimeError(RUN_ERROR)


class FailAtRun(ReferenceBackend):
    """Compiles, but every run fails."""

    name = "fail-run"
    test_only = True

    def compile(self, graph, options=None):
        return _FailingExecutable(graph)


class Counting(ReferenceBackend):
    """The oracle, counting compiles and runs (class-wide, under a lock)."""

    name = "counting"
    test_only = True
    lock = threading.Lock()
    compiles = 0
    runs = 0

    @classmethod
    def reset(cls):
        with cls.lock:
            cls.compiles = cls.runs = 0

    def compile(self, graph, options=None):
        with Counting.lock:
            Counting.compiles += 1
        exe = super().compile(graph, options)
        run = exe.run

        def counted(inputs):
            with Counting.lock:
                Counting.runs += 1
            return run(inputs)

        exe.run = counted
        return exe
