"""The Cython core and its pure-Python twin: same names, identical results."""
import os
import subprocess
import sys

import numpy as np
import pytest

from rlx_ref import hotpaths
from rlx_ref.env_registry import flag
from rlx_ref.interpret import Interpreter
from rlx_ref.ops.opdef import all_opdefs
from rlx_ref.ops.single import single_op_graph

try:
    COMPILED = hotpaths.load(False)
except ImportError:
    COMPILED = None
PURE = hotpaths.load(True)
TWINS = [pytest.param(PURE, id="pure")] + [
    pytest.param(COMPILED, id="compiled",
                 marks=pytest.mark.skipif(COMPILED is None, reason="_core not built"))]


def test_compiled_core_present_when_required():
    if flag("RLX_REF_REQUIRE_CORE"):
        assert COMPILED is not None and COMPILED.BUILT


def test_same_public_names():
    names = {"BUILT", "StepFailure", "last_uses", "run_steps", "broadcast_shape",
             "scalar_bytes"}
    assert names <= set(dir(PURE))
    if COMPILED is not None:
        assert names <= set(dir(COMPILED))


@pytest.mark.parametrize("core", TWINS)
def test_last_uses(core):
    frees = core.last_uses(4, [(), (0,), (0, 1), (2, 1)], {3})
    assert [sorted(f) for f in frees] == [[], [], [0], [1, 2]]


@pytest.mark.parametrize("core", TWINS)
def test_broadcast_shape(core):
    assert core.broadcast_shape((3, 1), (4,)) == (3, 4)
    assert core.broadcast_shape((), (2,)) == (2,)
    with pytest.raises(ValueError, match="dim 1 is 3 vs 4"):
        core.broadcast_shape((2, 3), (4,))


@pytest.mark.parametrize("core", TWINS)
def test_scalar_bytes(core):
    assert core.scalar_bytes(1.5, "f32") == np.float32(1.5).tobytes()
    assert core.scalar_bytes(-2, "i16") == np.int16(-2).tobytes()
    with pytest.raises(Exception):
        core.scalar_bytes(300, "i8")


@pytest.mark.parametrize("core", TWINS)
def test_run_steps_releases_and_reports_failing_step(core):
    env = [None] * 3
    fns = [lambda: 2, lambda a: a + 1, lambda a, b: a * b]
    core.run_steps(fns, [(), (0,), (0, 1)], [0, 1, 2], [[], [], [0, 1]], env)
    assert env == [None, None, 6]
    with pytest.raises(core.StepFailure) as e:
        core.run_steps([lambda: 1, lambda a: 1 / 0], [(), (0,)], [0, 1], [[], []], [None] * 2)
    assert e.value.index == 1 and isinstance(e.value.__cause__, ZeroDivisionError)


@pytest.mark.skipif(COMPILED is None, reason="_core not built")
def test_twins_give_identical_oracle_results_on_every_sample():
    for d in all_opdefs():
        if d.kind in ("Input", "Param"):
            continue
        for s in d.samples(np.random.default_rng(1))[:4]:
            g = single_op_graph(d.kind, s.attrs, s.inputs, s.out)
            feeds = {f"x{i}": a for i, a in enumerate(s.inputs)}
            a = Interpreter(g, core=PURE).run(feeds)
            b = Interpreter(g, core=COMPILED).run(feeds)
            for x, y in zip(a, b):
                assert x.dtype == y.dtype
                np.testing.assert_array_equal(x, y)


def test_env_var_forces_pure_python():
    code = "import rlx_ref.hotpaths as h; print(h.COMPILED, h.core.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "RLX_REF_PURE_PYTHON": "1"}, check=True)
    assert out.stdout.split() == ["False", "rlx_ref._core_py"]
