"""numba-cpu folds an imported eval-mode BatchNorm (with the conv's bias, a residual and
Relu/HardSwish/HardSigmoid) into FusedConvBiasAct steps: 3×3, 1×1 and depthwise convs,
results within the graph's contract of PyTorch in float64, the folded weights computed by
the hoisted weight-only prefix once per set of params."""
import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rlx_ref.backends.registry import get_backend  # noqa: E402
from rlx_ref.conformance.accuracy import graph_accuracy  # noqa: E402
from rlx_ref.conformance.compare import compare  # noqa: E402
from rlx_ref.ir.dtype import DType  # noqa: E402
from rlx_ref.passes.fuse_patterns import fuse_patterns, fusions_for  # noqa: E402
from rlx_ref.passes._rewrite import SupportTable  # noqa: E402
from rlx_ref.torch_import import from_torch  # noqa: E402

nn = torch.nn
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning")


def bn(c, seed):
    """An eval BatchNorm with statistics and affine far from the identity."""
    g = torch.Generator().manual_seed(seed)
    m = nn.BatchNorm2d(c)
    m.running_mean.copy_(torch.rand(c, generator=g) * 2 - 1)
    m.running_var.copy_(torch.rand(c, generator=g) * 1.5 + 0.5)
    m.weight.data.copy_(torch.rand(c, generator=g) + 0.5)
    m.bias.data.copy_(torch.rand(c, generator=g) * 2 - 1)
    return m


class Block(nn.Module):
    """conv3×3(bias)+BN+ReLU, depthwise+BN+HardSwish, 1×1+BN (+ the block's input), then
    a 1×1 conv with bias and HardSigmoid (a squeeze-excitation gate)."""

    def __init__(self, c=4):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1), bn(c, 1)
        self.dw, self.b2 = nn.Conv2d(c, c, 3, padding=1, groups=c, bias=False), bn(c, 2)
        self.pw, self.b3 = nn.Conv2d(c, c, 1, bias=False), bn(c, 3)
        self.se = nn.Conv2d(c, c, 1)

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        y = nn.functional.hardswish(self.b2(self.dw(y)))
        y = self.b3(self.pw(y)) + x
        return nn.functional.hardsigmoid(self.se(y))


class Basic(nn.Module):
    """A ResNet basic block with a strided 1×1 shortcut conv + BN."""

    def __init__(self, ci=3, co=6):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(ci, co, 3, 2, 1, bias=False), bn(co, 4)
        self.c2, self.b2 = nn.Conv2d(co, co, 3, 1, 1, bias=False), bn(co, 5)
        self.down, self.bd = nn.Conv2d(ci, co, 1, 2, bias=False), bn(co, 6)

    def forward(self, x):
        y = self.b2(self.c2(torch.relu(self.b1(self.c1(x)))))
        return torch.relu(y + self.bd(self.down(x)))


def imported(module, dims):
    torch.manual_seed(0)
    module = module.eval()
    x = torch.randn(*dims)
    with torch.no_grad():
        want = copy.deepcopy(module).double()(x.double()).numpy()
    return module, x, from_torch(module, (x,)), want


def kinds(exe) -> list:
    return [n.kind for n in exe.graph.nodes]


def check(prog, got, want):
    g = prog.graph
    verdict = compare(np.asarray(got), want, None, g.shape(g.outputs[0]),
                      graph_accuracy(g, DType.F32))
    assert verdict.status == "ok", verdict.message


@pytest.mark.parametrize("make, dims, fused", [(Block, (2, 4, 6, 6), 4),
                                               (Basic, (1, 3, 8, 8), 3)])
def test_conv_bn_compiles_to_fused_steps_within_contract(make, dims, fused):
    _, x, prog, want = imported(make(), dims)
    exe = prog.compile("numba-cpu")
    ks = kinds(exe)
    assert ks.count("FusedConvBiasAct") == fused and "Conv" not in ks
    fc = [n for n in exe.graph.nodes if n.kind == "FusedConvBiasAct"]
    if make is Block:
        assert [n.attrs.activation for n in fc] == ["Relu", "HardSwish", None, "HardSigmoid"]
        assert [n.attrs.has_residual for n in fc] == [False, False, True, False]
    else:   # the main branch takes the residual Add; the shortcut fuses up to its shift
        assert sorted(n.attrs.has_residual for n in fc) == [False, False, True]
    # no per-channel Mul/Add over a full-size activation is left
    big = [n for n in exe.graph.nodes if n.kind == "Binary" and n.shape.rank == 4
           and n.shape.dims[2:] != (1, 1) and n.shape.dims[0] == dims[0]]
    assert big == []
    got = exe.run(prog.feeds(x))[0]
    check(prog, got, want)
    ref = prog.run(x, backend="reference")
    check(prog, ref, want)


def test_folded_weights_are_hoisted_once_across_runs():
    module, x, prog, want = imported(Block(), (1, 4, 5, 5))
    exe = prog.compile("numba-cpu")
    assert exe.hoisted is not None
    assert {"b1.running_var", "c1.weight"} <= exe.hoisted.split.prepare_params
    before = exe.hoisted.runs
    feeds = prog.feeds(x)
    for _ in range(3):
        check(prog, exe.run(feeds)[0], want)
    assert exe.hoisted.runs - before <= 1
    ran = exe.hoisted.runs
    for _ in range(2):
        exe.run(feeds)
    assert exe.hoisted.runs == ran
    # a new BatchNorm statistic is folded again, once
    var = prog.params["b2.running_var"] * 2
    exe.set_param("b2.running_var", var)
    module.b2.running_var.copy_(torch.from_numpy(var))
    with torch.no_grad():
        want2 = copy.deepcopy(module).double()(x.double()).numpy()
    for _ in range(2):
        check(prog, exe.run(feeds)[0], want2)
    assert exe.hoisted.runs == ran + 1


def test_cpu_gate_only_for_cpu_backends():
    numba = SupportTable.of(get_backend("numba-cpu"))
    names = fusions_for(numba)
    assert names.index("fuse_conv_affine_act_cpu") < names.index("fuse_conv_bias_act")
    assert "fuse_conv_affine_act_cpu" not in fusions_for(SupportTable(None))
    # elsewhere RLX's gate stays: the 3×3 convs fuse, the 1×1 shortcut stays a Conv
    _, _, prog, _ = imported(Basic(), (1, 3, 8, 8))
    g = fuse_patterns(prog.graph, SupportTable(None))
    fc = [n for n in g.nodes if n.kind == "FusedConvBiasAct"]
    assert [tuple(n.attrs.kernel_size) for n in fc] == [(3, 3), (3, 3)]
    assert [tuple(n.attrs.kernel_size) for n in g.nodes if n.kind == "Conv"] == [(1, 1)]


GEOMETRIES = [  # x dims, w dims, payload geometry
    ((2, 4, 7, 6), (5, 4, 3, 3), dict(kernel_size=(3, 3), padding=(1, 1))),
    ((1, 6, 9, 9), (6, 1, 3, 3), dict(kernel_size=(3, 3), stride=(2, 2), padding=(1, 1),
                                      groups=6)),
    ((2, 8, 5, 5), (3, 8, 1, 1), dict(kernel_size=(1, 1))),
]


@pytest.mark.parametrize("act", [None, "Relu", "HardSwish", "HardSigmoid", "Gelu"])
@pytest.mark.parametrize("geo", range(len(GEOMETRIES)))
@pytest.mark.parametrize("residual", ["none", "full", "broadcast"])
def test_native_lowering_matches_the_oracle(act, geo, residual):
    from rlx_ref import Graph, interpret

    rng = np.random.default_rng(geo)
    xd, wd, fields = GEOMETRIES[geo]
    probe = Graph("s")
    y = probe.op("Conv", [probe.input("x", xd), probe.input("w", wd)], **fields)
    out = probe.shape(y).dims
    arrays = [rng.standard_normal(xd), rng.standard_normal(wd), rng.standard_normal(wd[0])]
    if residual != "none":
        rd = out if residual == "full" else (1, out[1], 1, out[3])
        arrays.append(rng.standard_normal(rd))
    arrays = [a.astype(np.float32) for a in arrays]
    g = Graph("t")
    ins = [g.input(f"x{i}", a.shape) for i, a in enumerate(arrays)]
    g.set_outputs([g.op("FusedConvBiasAct", ins, activation=act,
                        has_residual=residual != "none", **fields)])
    feeds = {f"x{i}": a for i, a in enumerate(arrays)}
    want = interpret(g, feeds)[0]
    exe = get_backend("numba-cpu").compile(g)
    assert kinds(exe).count("FusedConvBiasAct") == 1
    got = exe.run(feeds)[0]
    assert got.dtype == np.float32 and got.shape == want.shape
    # the conv kernels sum in another order than the oracle: a few f32 ulps of the sums
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
