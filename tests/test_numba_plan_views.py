"""numba-cpu plans share intermediate buffers by element count: a dead [8, 16] buffer is
reused, as a view, by a later [128] or [2, 64] node, and results stay the oracle's."""
import numpy as np

import rlx_ref
from rlx_ref.backends.registry import get_backend
from rlx_ref.runtime.options import CompileOptions, FusionOptions


def _bases(plan) -> set:
    return {id(b if b.base is None else b.base) for b in plan.buffer.values()}


def test_buffers_of_equal_size_and_other_shapes_share_memory():
    g = rlx_ref.Graph("views")
    x = g.input("x", [8, 16])
    y = g.exp(g.neg(x))                                   # [8, 16]
    for dims in ([128], [2, 64], [8, 16], [128]):
        y = g.exp(g.neg(g.reshape(y, dims)))
    g.set_outputs([g.sum(y, [0])])
    exe = get_backend("numba-cpu").compile(
        g, CompileOptions(fusion_opts=FusionOptions(enable=False)))
    plan = exe._plans[()]
    shapes = {tuple(b.shape) for b in plan.buffer.values()}
    assert len(shapes) >= 3 and len(_bases(plan)) <= 3
    feeds = {"x": np.linspace(-1, 1, 128, dtype=np.float32).reshape(8, 16)}
    for _ in range(2):                                    # a second run reuses the plan
        got = exe.run(feeds)[0]
        np.testing.assert_allclose(got, rlx_ref.interpret(g, feeds)[0], rtol=1e-5)


def test_live_buffers_never_alias():
    """Two intermediates alive at once never get the same memory, views or not."""
    g = rlx_ref.Graph("live")
    x = g.input("x", [4, 8])
    a = g.exp(x)                                          # [4, 8], live to the end
    b = g.reshape(g.neg(x), [32])
    c = g.reshape(g.add(g.reshape(b, [4, 8]), a), [32])
    g.set_outputs([g.add(g.reshape(c, [4, 8]), a)])
    exe = get_backend("numba-cpu").compile(
        g, CompileOptions(fusion_opts=FusionOptions(enable=False)))
    feeds = {"x": np.arange(32, dtype=np.float32).reshape(4, 8) / 32}
    np.testing.assert_allclose(exe.run(feeds)[0], rlx_ref.interpret(g, feeds)[0],
                               rtol=1e-6)
