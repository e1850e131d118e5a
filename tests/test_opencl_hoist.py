"""The weight-only prefix (split_param_invariant) in the OpenCL executable: prepared once
per set of params and kept on the device (fed to the per-run plan like params), prepared
again after a set_param it reads, and switched off by the option."""
import numpy as np
import pytest

import rlx_ref
from rlx_ref.backends.registry import get_backend
from rlx_ref.runtime.options import CompileOptions

cl = pytest.importorskip("pyopencl")
OCL = get_backend("opencl")
if not OCL.availability()[0]:
    pytest.skip(f"no OpenCL device: {OCL.availability()[1]}", allow_module_level=True)

from rlx_ref.backends.opencl import memory  # noqa: E402

F = np.float32
RNG = np.random.default_rng(7)


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


def compiled(graph, params, hoist=True):
    exe = OCL.compile(graph, CompileOptions().with_hoist_param_invariant(hoist))
    for k, v in params.items():
        exe.set_param(k, v)
    return exe


def check(exe, params, x):
    want = rlx_ref.interpret(linear(), {"x": x}, params)[0]
    np.testing.assert_allclose(exe.run({"x": x})[0], want, rtol=1e-5, atol=1e-6)


def test_prefix_runs_once_per_params_and_again_after_set_param():
    params = values("w", "s", "b")
    exe = compiled(linear(), params)
    assert exe.hoisted is not None and exe.hoisted.split.prepare_params == {"w", "s"}
    for _ in range(4):
        check(exe, params, RNG.standard_normal((2, 3)).astype(F))
    assert exe.hoisted.runs == 1
    params["b"] = values("b")["b"]          # main reads b: nothing to prepare again
    exe.set_param("b", params["b"])
    check(exe, params, RNG.standard_normal((2, 3)).astype(F))
    assert exe.hoisted.runs == 1
    params["w"] = values("w")["w"]          # the prefix reads w: prepared again, once
    exe.set_param("w", params["w"])
    for _ in range(3):
        check(exe, params, RNG.standard_normal((2, 3)).astype(F))
    assert exe.hoisted.runs == 2


def test_prepared_tensors_stay_on_the_device():
    params = values("w", "s", "b")
    exe = compiled(linear(), params)
    exe.run({"x": RNG.standard_normal((2, 3)).astype(F)})
    cache = exe.hoisted._cache[1]
    assert set(cache) == set(exe.hoisted.split.boundary)
    assert all(isinstance(v, memory.DevArray) for v in cache.values())
    (plan,) = exe._pool.plans()
    held = {plan.graph.nodes[i].attrs.name: v for i, v in plan._resident.items()}
    assert held == cache                      # copied in once, from the device
    # a run on the same params copies nothing again: the plan still holds the same arrays
    exe.run({"x": RNG.standard_normal((2, 3)).astype(F)})
    assert all(plan._resident[i] is v for i, v in zip(plan._resident, held.values()))


def test_off_switch():
    params = values("w", "s", "b")
    exe = compiled(linear(), params, hoist=False)
    assert exe.hoisted is None
    check(exe, params, RNG.standard_normal((2, 3)).astype(F))


def attention_block():
    """One attention head with pre-scaled, transposed weights (the weight-only part)."""
    g = rlx_ref.Graph("attn")
    x = g.input("x", [4, 8])
    wq, wk, wv = (g.param(n, [8, 8]) for n in ("wq", "wk", "wv"))
    gain = g.param("gain", [8])
    h = g.mul(x, g.activation("Exp", gain))
    q, k, v = (g.matmul(h, g.transpose(w, (1, 0))) for w in (wq, wk, wv))
    att = g.softmax(g.matmul(q, g.transpose(k, (1, 0))), -1)
    g.set_outputs([g.add(g.matmul(att, v), x), g.transpose(wv, (1, 0))])  # one weight-only
    return g


def test_attention_results_equal_with_and_without_hoisting():
    g = attention_block()
    params = {n: (RNG.standard_normal((8, 8)) * 0.3).astype(F) for n in ("wq", "wk", "wv")}
    params["gain"] = (RNG.standard_normal(8) * 0.1).astype(F)
    on, off = compiled(g, params), compiled(g, params, hoist=False)
    assert on.hoisted is not None and off.hoisted is None

    def same(x):
        for a, b in zip(on.run({"x": x}), off.run({"x": x}), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    for _ in range(2):
        same(RNG.standard_normal((4, 8)).astype(F))
    assert on.hoisted.runs == 1
    for exe in (on, off):
        exe.set_param("wv", params["wv"] * F(0.5))
    same(RNG.standard_normal((4, 8)).astype(F))
    assert on.hoisted.runs == 2
    np.testing.assert_array_equal(on.run({"x": RNG.standard_normal((4, 8)).astype(F)})[1],
                                  (params["wv"] * F(0.5)).T)
    assert len(on.memory_plans()) == 2        # the per-run plan's and the prefix's


def test_a_dynamic_batch_shares_one_prefix():
    """Plans per batch size (PlanPool keys) all read the same prepared tensors."""
    from rlx_ref.ir.shape import Dyn

    g = rlx_ref.Graph("dyn")
    x, w = g.input("x", [Dyn(0), 3]), g.param("w", [4, 3])
    g.set_outputs([g.matmul(x, g.transpose(g.activation("Exp", w), (1, 0)))])
    w_val = values("w")["w"]
    exe = compiled(g, {"w": w_val})
    assert exe.hoisted is not None
    for rows in (2, 5, 2):
        xv = RNG.standard_normal((rows, 3)).astype(F)
        np.testing.assert_allclose(exe.run({"x": xv})[0], xv @ np.exp(w_val).T,
                                   rtol=1e-5, atol=1e-6)
    assert exe.hoisted.runs == 1 and len(exe._pool.plans()) == 2
