"""The memory plan's arena in the OpenCL executable: intermediates are sub-buffers of one
buffer at the plan's offsets (aligned to the device's base-address alignment), results are
those of a buffer per tensor, the plan can be switched off, and an arena past the device's
largest buffer falls back to a buffer per tensor."""
import numpy as np
import pytest

import rlx_ref
from rlx_ref.backends.registry import get_backend
from rlx_ref.ops.control import ScanAttrs
from rlx_ref.runtime.options import CompileOptions, FusionOptions
from rlx_ref.training.models import counting_corpus, mlp_classifier, transformer_lm

cl = pytest.importorskip("pyopencl")
OCL = get_backend("opencl")
if not OCL.availability()[0]:
    pytest.skip(f"no OpenCL device: {OCL.availability()[1]}", allow_module_level=True)

from rlx_ref.backends.opencl import executable as ocl_exe  # noqa: E402
from rlx_ref.backends.opencl import memory  # noqa: E402


def block():
    g, params = transformer_lm(4, 16, 16, 32, 2, 1)
    tok, tgt = counting_corpus(4, 16, 16, seed=1)
    return g, params, {"tokens": tok, "targets": tgt}


def mlp():
    g, params = mlp_classifier()
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((64, 2), np.float32),
             "labels": np.float32(np.eye(3)[rng.integers(0, 3, 64)])}
    return g, params, feeds


def run(graph, params, feeds, plan: bool):
    exe = OCL.compile(graph, CompileOptions().with_memory_plan(plan))
    for k, v in params.items():
        exe.set_param(k, v)
    return exe, exe.run(feeds)


@pytest.mark.parametrize("make", [block, mlp])
def test_results_equal_with_and_without_the_plan(make):
    g, params, feeds = make()
    on, got = run(g, params, feeds, True)
    off, want = run(g, params, feeds, False)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    assert off.memory_plans() == []
    (mp,) = on.memory_plans()
    assert mp.slots and not mp.views and 0 < mp.arena_bytes < mp.intermediate_bytes
    assert mp.reused > 0                     # some tensor sits over a dead one's bytes


def test_slots_are_sub_buffers_of_one_arena_at_aligned_offsets():
    g, params, feeds = block()
    exe, _ = run(g, params, feeds, True)
    (plan,) = exe._pool.plans()
    mp = plan.memory
    base = memory.base_alignment(plan.rt.context)
    assert mp.alignment == max(64, base) and mp.alignment % base == 0
    for i, slot in mp.slots.items():
        assert slot.offset % base == 0
        buf = plan.env[i].buf
        if slot.nbytes:
            assert buf.get_info(cl.mem_info.ASSOCIATED_MEMOBJECT) == plan.arena
            assert buf.get_info(cl.mem_info.OFFSET) == slot.offset
            assert buf.size == slot.nbytes
    for o in plan.outputs:                   # outputs keep buffers of their own
        assert plan.env[o].buf.get_info(cl.mem_info.ASSOCIATED_MEMOBJECT) is None


def test_a_larger_alignment_is_kept():
    g, params, feeds = mlp()
    exe = OCL.compile(g, CompileOptions().with_memory_plan(True).with_arena_alignment(1024))
    for k, v in params.items():
        exe.set_param(k, v)
    exe.run(feeds)
    (mp,) = exe.memory_plans()
    assert mp.alignment == 1024 and all(s.offset % 1024 == 0 for s in mp.slots.values())


def test_an_arena_past_the_largest_buffer_falls_back(monkeypatch):
    g, params, feeds = mlp()
    _, want = run(g, params, feeds, False)
    (full,) = run(g, params, feeds, True)[0].memory_plans()
    init = ocl_exe.Runtime.__init__

    def small(self, *a, **k):                # a device whose largest buffer is too small
        init(self, *a, **k)
        self.max_alloc = full.arena_bytes - 1
    monkeypatch.setattr(ocl_exe.Runtime, "__init__", small)
    exe, got = run(g, params, feeds, True)
    assert exe.memory_plans() == []
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


def rnn(steps: int = 5, h: int = 8):
    """A Scan of ``tanh(h @ w + x_t)`` after an elementwise prologue (so the top level
    has an intermediate in the arena)."""
    body = rlx_ref.Graph("cell")
    hc, w, xt = body.input("h", [1, h]), body.input("w", [h, h]), body.input("x_t", [1, h])
    body.set_outputs([body.tanh(body.add(body.matmul(hc, w), xt))])
    g = rlx_ref.Graph("rnn")
    h0, w_in, xs = g.input("h0", [1, h]), g.input("w", [h, h]), g.input("xs", [steps, 1, h])
    scaled = g.mul(g.exp(g.neg(xs)), xs)
    out = g.op("Scan", [h0, w_in, scaled], ScanAttrs(body, steps, False, 1, 1, 0),
               shape=rlx_ref.Shape([1, h], rlx_ref.DType.F32))
    g.set_outputs([g.add(out, h0)])
    r = np.random.default_rng(0)
    return g, {"h0": r.standard_normal((1, h), np.float32),
               "w": r.standard_normal((h, h), np.float32) * np.float32(0.05),
               "xs": r.standard_normal((steps, 1, h), np.float32)}


def test_control_flow_bodies_keep_their_own_buffers():
    g, feeds = rnn()
    on, got = run(g, {}, feeds, True)
    _, want = run(g, {}, feeds, False)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[0], rlx_ref.interpret(g, feeds)[0], rtol=1e-4, atol=1e-5)
    (mp,) = on.memory_plans()                # the top level's: bodies plan no arena
    assert mp.slots


def test_an_unfused_chain_ping_pongs_over_two_arena_ranges():
    g = rlx_ref.Graph("chain")
    x = g.input("x", [64])
    y = x
    for _ in range(6):
        y = g.exp(g.neg(y))
    g.set_outputs([y])
    exe = OCL.compile(g, CompileOptions(fusion_opts=FusionOptions(enable=False)))
    (mp,) = exe.memory_plans()
    assert len(mp.slots) == 11 and len({s.offset for s in mp.slots.values()}) == 2
    assert mp.arena_bytes == 2 * 256 and 2 * 256 % mp.alignment == 0   # 64 f32 each
    xv = np.linspace(-1, 1, 64, dtype=np.float32)
    np.testing.assert_allclose(exe.run({"x": xv})[0], rlx_ref.interpret(g, {"x": xv})[0],
                               rtol=1e-5)


def test_rows_copied_by_narrow_and_concat_keep_buffers_of_their_own():
    # PoCL 3.1 crashes copying a rectangle to or from a sub-buffer: these stay out
    g = rlx_ref.Graph("rect")
    x = g.input("x", [6, 8])
    a = g.exp(g.neg(x))
    part = g.op("Narrow", [a], axis=1, start=2, len=4)          # rows of 4 out of 8
    both = g.op("Concat", [g.tanh(part), g.neg(part)], axis=1)   # rows of 4 + 4
    g.set_outputs([g.mul(both, both)])
    xv = np.linspace(-1, 1, 48, dtype=np.float32).reshape(6, 8)
    exe = OCL.compile(g, CompileOptions(fusion_opts=FusionOptions(enable=False)))
    got = exe.run({"x": xv})[0]
    np.testing.assert_allclose(got, rlx_ref.interpret(g, {"x": xv})[0], rtol=1e-5)
    (mp,) = exe.memory_plans()
    (plan,) = exe._pool.plans()
    rect = [n for n, _ in plan.steps if n.kind in memory.RECT_COPY_KINDS]
    assert len(rect) == 2
    for n in rect:
        for i in (n.id, *n.inputs):
            assert i not in mp.slots and i in mp.outside
    assert mp.slots                          # the rest is still in the arena
