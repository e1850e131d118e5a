"""The memory plan: liveness and offsets on a hand-built graph, alignment, views, and the
numba-cpu executables that slice its arena (aliasing, threads, plan on = plan off)."""
import numpy as np
import pytest

import rlx_ref
import _thread_cases as cases
from rlx_ref.backends.registry import get_backend
from rlx_ref.ops.movement import NarrowAttrs
from rlx_ref.passes.memory_plan import Slot, View, plan_memory
from rlx_ref.runtime.options import CompileOptions, FusionOptions
from rlx_ref.training.models import counting_corpus, transformer_lm

F = np.float32
NO_FUSION = CompileOptions(fusion_opts=FusionOptions(enable=False))


def steps_of(g):
    return [n for n in g.nodes if n.kind not in ("Input", "Param", "Constant")]


def views_graph():
    """x[64] -> a=-x; r=reshape(a); n=rows 2..6 of r; c=exp(n); s=cast(c, f32); d=-s;
    e=exp(d) (the output)."""
    g = rlx_ref.Graph("views")
    x = g.input("x", [64])
    a = g.neg(x)                                                        # %1, step 0
    r = g.reshape(a, [8, 8])                                            # %2, step 1
    n = g.op("Narrow", [r], NarrowAttrs(0, 2, 4))                       # %3, step 2
    c = g.exp(n)                                                        # %4, step 3
    s = g.cast(c, "f32")                                                # %5, step 4
    d = g.neg(s)                                                        # %6, step 5
    g.set_outputs([g.exp(d)])                                           # %7, step 6
    return g


def test_liveness_offsets_reuse_and_views_by_hand():
    g = views_graph()
    plan = plan_memory(g, steps_of(g))
    # a lives until c reads its rows (step 3); c until d reads its cast (step 5); d's
    # lifetime misses a's, so d takes a's bytes at offset 0; c sits above a
    assert plan.slots == {1: Slot(1, 0, 256, 0, 3), 4: Slot(4, 256, 128, 3, 5),
                          6: Slot(6, 0, 128, 5, 6)}
    assert plan.views == {2: View(2, 1, "reshape"), 3: View(3, 2, "rows", 2, 4),
                          5: View(5, 4, "same")}
    assert plan.outside == [7]
    assert plan.to_dict() == {"arena_bytes": 384, "intermediate_bytes": 1024,
                              "saved_bytes": 640, "ratio": 0.375, "slots": 3, "reused": 1,
                              "views": 3, "outside": 1, "alignment": 64}
    text = plan.report()
    assert "arena 384 B for 1024 B" in text and "3 views" in text and "1 reuse" in text


def test_views_off_and_host_results_are_not_viewed():
    g = views_graph()
    off = plan_memory(g, steps_of(g), views=False)
    assert not off.views and set(off.slots) == {1, 2, 3, 4, 5, 6}
    # a step that returns an array of its own making: its layout is unknown, no view of it
    hosted = plan_memory(g, steps_of(g), outside={1})
    assert 1 not in hosted.slots and 2 not in hosted.views and 2 in hosted.slots
    # the chain resumes past the copy
    assert hosted.views == {3: View(3, 2, "rows", 2, 4), 5: View(5, 4, "same")}


def test_offsets_are_aligned_and_live_tensors_never_overlap():
    g, _ = transformer_lm(batch=2, seq=8, vocab=16, d_model=32, layers=1)
    for alignment in (64, 256):
        plan = plan_memory(g, steps_of(g), alignment=alignment)
        slots = list(plan.slots.values())
        assert slots and all(s.offset % alignment == 0 for s in slots)
        for s in slots:
            assert s.offset + s.nbytes <= plan.arena_bytes
            for t in slots:
                if s is not t and s.first <= t.last and t.first <= s.last:
                    assert s.offset + s.nbytes <= t.offset or t.offset + t.nbytes <= s.offset
    g3 = rlx_ref.Graph("odd")          # 12-byte tensors still start 64 bytes apart
    y = g3.exp(g3.neg(g3.input("x", [3])))
    g3.set_outputs([g3.neg(g3.exp(y))])
    plan = plan_memory(g3, steps_of(g3))
    assert [s.offset for s in plan.slots.values()] == [0, 64, 0]
    assert plan.arena_bytes == 128


def test_executable_runs_in_an_aligned_arena_with_views():
    exe = get_backend("numba-cpu").compile(views_graph(), NO_FUSION)
    plan = exe._plans[()]
    assert plan.arena.ctypes.data % 64 == 0 and plan.arena.nbytes == 384
    base = plan.arena.ctypes.data
    for i, buf in plan.buffer.items():
        assert buf.ctypes.data - base == plan.memory.slots[i].offset
    assert set(plan.views) == {2, 3, 5}
    assert np.shares_memory(plan._template[3], plan.buffer[1])    # rows of a, no copy
    x = np.linspace(-1, 1, 64, dtype=F)
    want = rlx_ref.interpret(views_graph(), {"x": x})[0]
    for _ in range(2):
        np.testing.assert_allclose(exe.run({"x": x})[0], want, rtol=1e-6)
    assert exe.memory_plans()[0].to_dict()["views"] == 3


def test_view_of_an_input_is_made_per_run():
    g = rlx_ref.Graph("inview")
    x = g.input("x", [6, 4])
    rows = g.op("Narrow", [g.reshape(x, [4, 6])], NarrowAttrs(0, 1, 2))
    g.set_outputs([g.exp(rows), g.reshape(x, [24])])
    exe = get_backend("numba-cpu").compile(g, NO_FUSION)
    assert len(exe._plans[()].views) == 2       # the output Reshape is a kernel, not a view
    for seed in range(2):
        fd = {"x": np.random.default_rng(seed).standard_normal((6, 4)).astype(F)}
        got, want = exe.run(fd), rlx_ref.interpret(g, fd)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
        assert not np.shares_memory(got[1], fd["x"])
        np.testing.assert_array_equal(got[1], want[1])


def arena_graph():
    """The thread cases' I/O with views of intermediates and of an input, a hoisted
    weight-only prefix, an Input passed out and one node returned twice."""
    g = rlx_ref.Graph("arena")
    x, w = g.input("x", [4, 6]), g.param("w", [6, cases.H])
    wc, xs = g.param("wc", [cases.H, cases.H]), g.input("xs", [cases.STEPS, 1, cases.H])
    h = g.tanh(g.matmul(x, w))
    hh = g.matmul(h, g.mul(g.exp(wc), g.constant(F(0.5))))     # weight-only: hoisted
    r = g.reshape(g.cast(g.op("Narrow", [hh], NarrowAttrs(0, 1, 2)), "f32"), [10])
    xr = g.op("Narrow", [g.reshape(x, [24])], NarrowAttrs(0, 0, 10))
    out = g.add(g.neg(r), g.exp(xr))
    mix = g.add(g.reshape(xs, [cases.STEPS, cases.H]), g.mean(hh, [0], True))
    g.set_outputs([out, x, g.reshape(x, [6, 4]), mix, out])
    return g


@pytest.fixture(scope="module")
def arena_exe():
    exe = get_backend("numba-cpu").compile(arena_graph(), NO_FUSION)
    assert exe.hoisted is not None and exe._plans[()].views
    return exe


def test_outputs_alias_no_input_param_arena_or_each_other(arena_exe):
    assert cases.aliasing(arena_exe, arena_graph()) == []
    out = arena_exe.run(cases.feeds(0))
    plan = arena_exe._plans[()]
    assert not any(np.shares_memory(o, plan.arena) for o in out)
    assert not np.shares_memory(out[0], out[4])


def test_four_threads_with_their_own_inputs_match_the_oracle(arena_exe):
    assert cases.hammer(arena_exe, arena_graph(), threads=4, runs=10) == \
        {"runs": 40, "wrong": 0, "errors": []}


GRAPHS = {
    "arena": lambda: (arena_graph(), cases.feeds(2), cases.params(1)),
    "threads": lambda: (cases.graph(), cases.feeds(3), cases.params(2)),
    "views": lambda: (views_graph(), {"x": np.linspace(-2, 2, 64, dtype=F)}, {}),
}


def _transformer():
    g, ps = transformer_lm(batch=2, seq=8, vocab=16, d_model=32, layers=1)
    tokens, targets = counting_corpus(2, 8, 16, seed=4)
    return g, {"tokens": tokens, "targets": targets}, ps


GRAPHS["transformer"] = _transformer


@pytest.mark.parametrize("name", sorted(GRAPHS))
@pytest.mark.parametrize("fusion", [True, False])
def test_plan_on_and_off_give_identical_results(name, fusion):
    g, fd, ps = GRAPHS[name]()
    results = []
    for on in (True, False):
        opts = CompileOptions(fusion_opts=FusionOptions(enable=fusion)).with_memory_plan(on)
        exe = get_backend("numba-cpu").compile(g, opts)
        assert bool(exe.memory_plans()) == on
        for k, v in ps.items():
            exe.set_param(k, v)
        for plan in exe._pools()[0].plans() if on else ():
            plan.arena[...] = 0xFF          # NaN bytes: a kernel must not read what it owns
        results.append(exe.run(fd))
        results.append(exe.run(fd))         # a second run over the same arena
    for got in results[1:]:
        for a, b in zip(got, results[0]):
            np.testing.assert_array_equal(a, b)
    for a, b in zip(results[0], rlx_ref.interpret(g, fd, ps)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_transformer_block_arena_is_at_most_six_tenths_of_its_intermediates():
    g, _, _ = _transformer()
    exe = get_backend("numba-cpu").compile(g)
    (plan,) = exe.memory_plans()
    d = plan.to_dict()
    assert d["arena_bytes"] <= 0.6 * d["intermediate_bytes"] and d["reused"] > 0
