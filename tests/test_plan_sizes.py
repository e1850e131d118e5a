"""Kernel backends refuse outputs too large to plan with an error naming node, op and size."""
import pytest

import rlx_ref
from rlx_ref.backends.planning import PlanError, planning
from rlx_ref.backends.registry import get_backend
from rlx_ref.ir.dtype import DType
from rlx_ref.ir.graph import Node, Op
from rlx_ref.ir.shape import Shape

HUGE = 2**39        # 2 TiB of f32: past any host's memory and any device's largest buffer


def _graphs():
    def one(name, build):
        g = rlx_ref.Graph(name)
        x = g.input("x", [1])
        y = build(g, x)
        g.set_outputs([g.op("Activation", [y], op="Relu")])
        return g

    return {
        "Expand": one("expand", lambda g, x: g.op("Expand", [x], target_shape=(HUGE,))),
        "Tile": one("tile", lambda g, x: g.op("Tile", [x], reps=(HUGE,))),
        "Pad": one("pad", lambda g, x: g.op("Pad", [x], pads=((0, HUGE - 1),),
                                            mode=("Constant", 0.0))),
    }


def _backend(name):
    be = get_backend(name)
    ok, why = be.availability()
    if not ok:
        pytest.skip(f"{name}: {why}")
    return name


@pytest.mark.parametrize("backend", ["numba-cpu", "opencl"])
@pytest.mark.parametrize("kind", ["Expand", "Tile", "Pad"])
def test_huge_movement_outputs_name_the_node(backend, kind):
    graph = _graphs()[kind]
    with pytest.raises(PlanError) as e:
        rlx_ref.Session(_backend(backend)).compile(graph)
    msg = str(e.value)
    assert msg.startswith(f"{backend}: cannot plan %1 {kind} ([{HUGE}] f32: {HUGE} elements, "
                          f"2048.0 GiB): more than the ")


def test_allocation_failures_inside_planning_name_the_node():
    node = Node(3, Op("Tile", None), (0,), Shape([2**32], DType.F32))
    with pytest.raises(PlanError, match=r"^numba-cpu: cannot plan %3 Tile \(\[4294967296\] f32: "
                       r"4294967296 elements, 16\.0 GiB\): MemoryError: no room$"):
        with planning("numba-cpu", node):
            raise MemoryError("no room")
    with pytest.raises(PlanError, match=r"opencl: cannot plan %3 Tile .*: KeyError: 'x'"):
        with planning("opencl", node, errors=(KeyError,)):
            raise KeyError("x")
    with pytest.raises(ZeroDivisionError):        # anything else is a bug, left as it is
        with planning("opencl", node):
            raise ZeroDivisionError
