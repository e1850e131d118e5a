"""Executables under threads: one compiled graph run from 4 threads at once gives every
run its own correct outputs on every backend; outputs alias nothing; params are copied at
set_param, and a set_param beside runs never tears one. The graph and checks are in
``_thread_cases.py`` (the CUDA simulator runs them in a child process)."""
import json
import os
import subprocess
import sys
import threading
import uuid

import numpy as np
import pytest

import _thread_cases as cases
import rlx_ref
from rlx_ref.backends.registry import get_backend
from rlx_ref.ir.shape import Dyn

HERE = os.path.dirname(os.path.abspath(__file__))


def _backend(name: str):
    if name == "numba-cpu":
        pytest.importorskip("numba")
    if name == "opencl":
        pytest.importorskip("pyopencl")
    b = get_backend(name)
    ok, why = b.availability()
    if not ok:
        pytest.skip(f"{name} is unavailable here: {why}")
    return b


IN_PROCESS = ["reference", "numba-cpu", "opencl"]


@pytest.fixture(params=IN_PROCESS)
def compiled(request):
    g = cases.graph()
    return _backend(request.param).compile(g), g


def test_four_threads_get_their_own_correct_outputs(compiled):
    exe, g = compiled
    # the oracle's runs are short, so its races are rare per run: it gets more runs
    got = cases.hammer(exe, g, threads=4, runs=200 if exe.device == "reference" else 60)
    assert got["errors"] == [], got
    assert got["wrong"] == 0, f"{got['wrong']} of {got['runs']} runs were wrong"


def test_outputs_are_fresh_and_params_are_copied(compiled):
    exe, g = compiled
    assert cases.aliasing(exe, g) == []


def test_set_param_beside_runs_never_tears_one(compiled):
    exe, g = compiled
    got = cases.param_swaps(exe, g, runs=40)
    assert got["errors"] == [] and got["torn"] == 0, got


def test_the_loop_driver_is_exercised():
    """numba-cpu runs the graph's Scan as a compiled loop, whose arrays are per plan."""
    _backend("numba-cpu")
    exe = rlx_ref.Session("numba-cpu").compile(cases.graph())
    assert [note for _, kind, note in exe.step_notes() if kind == "Scan"] == ["compiled loop"]


@pytest.mark.parametrize("name", ["numba-cpu", "opencl"])
def test_one_thread_reuses_one_plan(name):
    """Sequential runs plan nothing new (the speed of planned buffers is kept); runs at
    once got plans of their own, which the pool keeps for the next burst."""
    exe = _backend(name).compile(cases.graph())
    for k, v in cases.params().items():
        exe.set_param(k, v)
    for i in range(5):
        exe.run(cases.feeds(i))
    assert len(exe._pool._idle[()]) == 1
    cases.hammer(exe, cases.graph(), threads=4, runs=10)
    assert 1 <= len(exe._pool._idle[()]) <= 4


def test_dynamic_dims_plan_per_binding_under_threads():
    """Runs with different bound sizes at once each plan and run their own binding."""
    _backend("numba-cpu")
    g = rlx_ref.Graph("dyn")
    x = g.input("x", [Dyn(0), 3])
    g.set_outputs([g.tanh(g.mul(x, x))])
    exe = rlx_ref.Session("numba-cpu").compile(g)
    bad = []

    def work(n):
        for i in range(20):
            xv = np.full((n, 3), i / 20, np.float32)
            if not np.allclose(exe.run({"x": xv})[0], np.tanh(xv * xv), atol=1e-6):
                bad.append(n)
    pool = [threading.Thread(target=work, args=(n,)) for n in (1, 2, 3, 2)]
    with cases.busy_switching():
        for th in pool:
            th.start()
        for th in pool:
            th.join()
    assert bad == []
    assert sorted(exe._plans) == [((0, 1),), ((0, 2),), ((0, 3),)]


def test_numba_workqueue_layer_runs_take_turns():
    """Numba's workqueue layer terminates the process when two threads enter parallel
    kernels at once; runs from 4 threads, the very first ones included, must not."""
    pytest.importorskip("numba")
    code = (
        "import threading, numpy as np, rlx_ref, numba\n"
        "g = rlx_ref.Graph('big')\n"
        "x = g.input('x', [512, 1024])\n"
        "g.set_outputs([g.reduce(g.tanh(g.mul(x, x)), 'Sum', [1])])\n"
        "exe = rlx_ref.Session('numba-cpu').compile(g)\n"
        "xv = np.linspace(-1, 1, 512 * 1024, dtype=np.float32).reshape(512, 1024)\n"
        "want = rlx_ref.interpret(g, {'x': xv})[0]\n"
        "bad, start = [], threading.Barrier(4)\n"
        "def work():\n"
        "    start.wait()\n"
        "    for _ in range(5):\n"
        "        bad.append(not np.allclose(exe.run({'x': xv})[0], want, rtol=1e-4))\n"
        "ts = [threading.Thread(target=work) for _ in range(4)]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "print(numba.threading_layer(), sum(bad), len(bad))\n")
    env = {**os.environ, "NUMBA_THREADING_LAYER": "workqueue"}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["workqueue", "0", "20"], run.stdout


def test_two_threads_loading_one_kernel_get_one_module():
    pytest.importorskip("numba")
    from rlx_ref.backends.numba_cpu.kernels import compile_kernel

    name = f"k{uuid.uuid4().hex[:8]}"
    body = f"def {name}(x):\n    return x + 1\n"
    got, start = [], threading.Barrier(4)

    def load():
        start.wait()
        got.append(compile_kernel(name, body))
    pool = [threading.Thread(target=load) for _ in range(4)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    assert len(got) == 4 and len({id(k) for k in got}) == 1
    assert sys.modules[got[0].module.__name__] is got[0].module


@pytest.mark.parametrize("name", ["numba-cpu", "opencl"])
def test_threads_compiling_one_new_graph_at_once(name):
    """Four threads compile and run one graph never built before (fresh kernels, a fresh
    OpenCL program) at once: one build, every result right."""
    backend = _backend(name)
    n = 5 + uuid.uuid4().int % 60            # a size no earlier test built kernels for
    g = rlx_ref.Graph("fresh")
    x = g.input("x", [n, 3])
    g.set_outputs([g.sigmoid(g.sub(g.mul(x, x), x))])
    xv = np.linspace(-2, 2, n * 3, dtype=np.float32).reshape(n, 3)
    want = rlx_ref.interpret(g, {"x": xv})[0]
    got, start = [], threading.Barrier(4)

    def work():
        start.wait()
        got.append(backend.compile(g).run({"x": xv})[0])
    pool = [threading.Thread(target=work) for _ in range(4)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    assert len(got) == 4
    for out in got:
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


def test_cuda_simulator_under_threads():
    pytest.importorskip("numba")
    try:
        import numba_cuda  # noqa: F401
    except ImportError:
        pytest.skip("numba-cuda is not installed (pip install 'numba-cuda[cu13]')")
    code = (
        "import json, sys\n"
        f"sys.path.insert(0, {HERE!r})\n"
        "import _thread_cases as c\n"
        "from rlx_ref.backends.registry import get_backend\n"
        "g = c.graph()\n"
        "exe = get_backend('cuda').compile(g)\n"
        "print(json.dumps({'hammer': c.hammer(exe, g, threads=4, runs=2),\n"
        "                  'aliasing': c.aliasing(exe, g),\n"
        "                  'swaps': c.param_swaps(exe, g, runs=4)}))\n")
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "PYTHONWARNINGS": "ignore"}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["hammer"]["errors"] == [] and got["hammer"]["wrong"] == 0, got
    assert got["aliasing"] == [], got
    assert got["swaps"]["errors"] == [] and got["swaps"]["torn"] == 0, got
