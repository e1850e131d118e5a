"""The weight-only prefix (split_param_invariant) in the numba-cpu executable: prepared
once per set of params, again after a set_param it reads, never per run."""
import numpy as np

import rlx_ref
from rlx_ref.backends.registry import get_backend
from rlx_ref.runtime.options import CompileOptions

F = np.float32
RNG = np.random.default_rng(5)


def linear():
    """y = x @ transpose(w) * exp(s) + b: transpose(w) and exp(s) are weight-only."""
    g = rlx_ref.Graph("lin")
    x, w = g.input("x", [2, 3]), g.param("w", [4, 3])
    s, b = g.param("s", [4]), g.param("b", [4])
    y = g.add(g.mul(g.matmul(x, g.transpose(w, (1, 0))), g.activation("Exp", s)), b)
    g.set_outputs([y])
    return g


def values(*names):
    dims = {"w": (4, 3), "s": (4,), "b": (4,)}
    return {k: RNG.standard_normal(dims[k]).astype(F) for k in names}


def counted(exe) -> list:
    """Count every run of the prefix through its hook (the prepare callable)."""
    calls, inner = [], exe.hoisted._run_prepare

    def hook(params):
        calls.append(sorted(params))
        return inner(params)
    exe.hoisted._run_prepare = hook
    return calls


def check(exe, params, x):
    np.testing.assert_allclose(exe.run({"x": x})[0], rlx_ref.interpret(linear(), {"x": x},
                                                                      params)[0], rtol=1e-5)


def test_prefix_runs_once_per_params_not_per_run():
    exe = get_backend("numba-cpu").compile(linear())
    assert exe.hoisted is not None and exe.hoisted.split.prepare_params == {"w", "s"}
    calls = counted(exe)
    params = values("w", "s", "b")
    for k, v in params.items():
        exe.set_param(k, v)
    for _ in range(4):
        check(exe, params, RNG.standard_normal((2, 3)).astype(F))
    assert len(calls) == 1
    params["b"] = values("b")["b"]          # main reads b: nothing to prepare again
    exe.set_param("b", params["b"])
    check(exe, params, RNG.standard_normal((2, 3)).astype(F))
    assert len(calls) == 1
    params["w"] = values("w")["w"]          # the prefix reads w: prepared again, once
    exe.set_param("w", params["w"])
    for _ in range(3):
        check(exe, params, RNG.standard_normal((2, 3)).astype(F))
    assert len(calls) == 2
    exe.set_param("s", params["s"])         # the same values, a new array: prepared again
    check(exe, params, RNG.standard_normal((2, 3)).astype(F))
    assert len(calls) == 3 and exe.hoisted.runs == 3


def test_clones_keep_their_own_params():
    exe = get_backend("numba-cpu").compile(linear())
    p1, p2 = values("w", "s", "b"), values("w", "s", "b")
    for k, v in p1.items():
        exe.set_param(k, v)
    twin = exe.clone()
    for k, v in p2.items():
        twin.set_param(k, v)
    x = RNG.standard_normal((2, 3)).astype(F)
    for _ in range(2):
        check(exe, p1, x)
        check(twin, p2, x)


def test_option_off_runs_the_whole_graph():
    opts = CompileOptions().with_hoist_param_invariant(False)
    exe = get_backend("numba-cpu").compile(linear(), opts)
    assert exe.hoisted is None
    params = values("w", "s", "b")
    for k, v in params.items():
        exe.set_param(k, v)
    check(exe, params, RNG.standard_normal((2, 3)).astype(F))
