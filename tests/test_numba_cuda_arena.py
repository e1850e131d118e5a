"""The memory plan's arena in the CUDA executable, on numba's CUDA simulator: each
intermediate is a dtype view of one device array at its planned offset (aligned to 256
bytes or the plan's larger alignment), results equal those of a buffer per tensor, outputs
and control-flow bodies keep buffers of their own, and the plan can be switched off."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("numba")
try:
    import numba_cuda  # noqa: F401  (the package; numba.cuda itself is imported by children)
except ImportError:
    pytest.skip("numba-cuda is not installed (pip install 'numba-cuda[cu13]')",
                allow_module_level=True)

SIM_ENV = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "PYTHONWARNINGS": "ignore"}

_CHILD = '''
import json
import numpy as np, rlx_ref
from rlx_ref.backends.registry import get_backend
from rlx_ref.backends.numba_cuda.device import device_dtype
from rlx_ref.backends.numba_cuda.executable import SubPlan
from rlx_ref.ops.control import ScanAttrs
from rlx_ref.runtime.options import CompileOptions
from rlx_ref.training.models import counting_corpus, transformer_lm
b = get_backend("cuda")
out = {}
BODIES, _init = [], SubPlan.__init__

def _record(self, *a, **k):          # every body plan compiled, to look at after the run
    _init(self, *a, **k)
    BODIES.append(self)
SubPlan.__init__ = _record

def rnn(steps=3, h=4):
    body = rlx_ref.Graph("cell")
    hc, w, xt = body.input("h", [1, h]), body.input("w", [h, h]), body.input("x_t", [1, h])
    body.set_outputs([body.tanh(body.add(body.matmul(hc, w), xt))])
    g = rlx_ref.Graph("rnn")
    h0, w_in, xs = g.input("h0", [1, h]), g.input("w", [h, h]), g.input("xs", [steps, 1, h])
    scaled = g.mul(g.exp(g.neg(xs)), xs)
    o = g.op("Scan", [h0, w_in, scaled], ScanAttrs(body, steps, False, 1, 1, 0),
             shape=rlx_ref.Shape([1, h], rlx_ref.DType.F32))
    g.set_outputs([g.add(o, h0)])
    r = np.random.default_rng(0)
    return g, {}, {"h0": r.standard_normal((1, h), np.float32),
                   "w": r.standard_normal((h, h), np.float32) * np.float32(0.3),
                   "xs": r.standard_normal((steps, 1, h), np.float32)}

def block():
    g, params = transformer_lm(2, 4, 8, 8, 2, 1)
    tok, tgt = counting_corpus(2, 4, 8, seed=1)
    return g, params, {"tokens": tok, "targets": tgt}

def run(g, params, feeds, opts):
    exe = b.compile(g, opts)
    for k, v in params.items():
        exe.set_param(k, v)
    return exe, exe.run(feeds)

def views_at_offsets(exe):
    """Fill the arena with a byte pattern: every slot's array reads its own bytes."""
    (plan,) = exe._pool.plans()
    mp = plan.memory
    pattern = (np.arange(mp.arena_bytes) * 7 % 251).astype(np.uint8)
    plan.arena.copy_to_device(pattern)
    ok = True
    for i, slot in mp.slots.items():
        arr = plan.buffers[i]
        dt = device_dtype(plan.graph.nodes[i].shape.dtype)
        want = pattern[slot.offset:slot.offset + arr.size * dt.itemsize].view(dt)
        ok &= arr.dtype == dt and bool((arr.copy_to_host().view(np.uint8)
                                        == want.view(np.uint8)).all())
    return ok

for name, make in (("block", block), ("rnn", rnn)):
    g, params, feeds = make()
    BODIES.clear()
    on, got = run(g, params, feeds, CompileOptions())
    bodies = list(BODIES)
    off, want = run(g, params, feeds, CompileOptions().with_memory_plan(False))
    ref = rlx_ref.interpret(g, feeds, params)
    (mp,) = on.memory_plans()
    (plan,) = on._pool.plans()
    out[name] = {
        "equal": all(np.array_equal(a, c) for a, c in zip(got, want)),
        "close": all(np.allclose(a, r, rtol=1e-4, atol=1e-5) for a, r in zip(got, ref)),
        "off": off.memory_plans() == [] and off._pool.plans()[0].arena is None,
        "slots": len(mp.slots), "views": len(mp.views), "alignment": mp.alignment,
        "aligned": all(s.offset % 256 == 0 for s in mp.slots.values()),
        "smaller": 0 < mp.arena_bytes < mp.intermediate_bytes,
        "outputs_own": all(o not in mp.slots for o in plan.outputs)
                       and all(plan.buffers[o] is not None for o in plan.outputs
                               if o in plan.buffers),
        "views_at_offsets": views_at_offsets(on),
        "bodies": [sp.plan.memory is None and not sp.plan.use_arena and sp.plan._ready
                   for sp in bodies],
    }
    if name == "rnn":
        out[name]["outside"] = sorted(plan.graph.nodes[i].kind for i in mp.outside)

g, params, feeds = block()
big, got = run(g, params, feeds, CompileOptions().with_arena_alignment(1024))
(mp,) = big.memory_plans()
out["align1024"] = {"alignment": mp.alignment,
                    "aligned": all(s.offset % 1024 == 0 for s in mp.slots.values()),
                    "equal": all(np.array_equal(a, c) for a, c in
                                 zip(got, run(g, params, feeds, CompileOptions())[1]))}
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def sim() -> dict:
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(_CHILD)], env=SIM_ENV,
                         capture_output=True, text=True, timeout=900, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", ["block", "rnn"])
def test_results_equal_with_and_without_the_plan(sim, name):
    r = sim[name]
    assert r["equal"] and r["close"] and r["off"]
    assert r["slots"] > 0 and r["views"] == 0
    assert r["smaller"] or name == "rnn"     # rnn: one fused 48-byte prologue, 256 aligned


@pytest.mark.parametrize("name", ["block", "rnn"])
def test_slots_are_views_of_one_arena_at_aligned_offsets(sim, name):
    r = sim[name]
    assert r["alignment"] == 256 and r["aligned"] and r["views_at_offsets"]
    assert r["outputs_own"]


def test_control_flow_bodies_keep_their_own_buffers(sim):
    assert sim["rnn"]["bodies"] == [True]
    assert sim["block"]["bodies"] == []


def test_control_flow_results_stay_outside_the_arena(sim):
    assert "Scan" in sim["rnn"]["outside"]


def test_a_larger_alignment_is_kept(sim):
    assert sim["align1024"] == {"alignment": 1024, "aligned": True, "equal": True}
