"""from_torch: aten ops onto RLX kinds, checked against PyTorch in float64 within the graph's
conformance contract; four real models on every local backend; the same models through
ONNX (torch.onnx.export, then rlx_ref.onnx.load where that importer exists)."""
import copy
import io

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import rlx_ref  # noqa: E402
from rlx_ref.conformance.accuracy import graph_accuracy  # noqa: E402
from rlx_ref.conformance.compare import compare  # noqa: E402
from rlx_ref.ir.dtype import DType  # noqa: E402
from rlx_ref.models import torch_zoo as Z  # noqa: E402
from rlx_ref.runtime.devices import is_available  # noqa: E402
from rlx_ref.torch_import import TorchImportError, from_torch  # noqa: E402

nn, F = torch.nn, torch.nn.functional
# torch.export's own deprecation notices (treespec, the TorchScript ONNX exporter)
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning")
BACKENDS = [d for d in ("reference", "numba-cpu", "opencl") if is_available(d)]


class Fn(nn.Module):
    """A module around one function, so torch.export can trace it."""

    def __init__(self, fn, *children):
        super().__init__()
        self.fn, self.layers = fn, nn.ModuleList(children)

    def forward(self, *xs):
        return self.fn(self, *xs)


def torch64(module, inputs):
    """The module's output in float64 (a copy of its weights, floats widened)."""
    m64 = copy.deepcopy(module).double()
    ins = [x.double() if x.is_floating_point() else x for x in inputs]
    with torch.no_grad():
        return m64(*ins).numpy()


def assert_within_contract(prog, got, want64, what):
    """``got`` (f32) is within the graph's composite contract of PyTorch's float64 result."""
    g = prog.graph
    verdict = compare(np.asarray(got), want64, None, g.shape(g.outputs[0]),
                      graph_accuracy(g, DType.F32))
    assert verdict.status == "ok", f"{what}: {verdict.message}"


def _r(*dims, seed=0):
    return torch.randn(*dims, generator=torch.Generator().manual_seed(seed))


def _seed(module, seed=1):
    return Z.seeded(module, seed)


# (id, module factory, inputs, RLX kinds or activations the graph must contain)
OPS = [
    ("conv2d_groups_stride_pad_dil",
     lambda: _seed(nn.Conv2d(4, 6, 3, stride=2, padding=2, dilation=2, groups=2)),
     lambda: [_r(2, 4, 9, 9)], {"Conv"}),
    ("conv1d", lambda: _seed(nn.Conv1d(3, 4, 3, padding=1)), lambda: [_r(2, 3, 10)], {"Conv"}),
    ("depthwise_bn_relu",
     lambda: _seed(nn.Sequential(nn.Conv2d(4, 4, 3, padding=1, groups=4, bias=False),
                                 nn.BatchNorm2d(4), nn.ReLU())),
     lambda: [_r(1, 4, 6, 6)], {"Conv", "Rsqrt"}),
    ("batchnorm1d", lambda: _seed(nn.BatchNorm1d(5)), lambda: [_r(3, 5)], {"Rsqrt"}),
    ("hardswish_hardsigmoid", lambda: Fn(lambda s, x: F.hardswish(x) + F.hardsigmoid(x)),
     lambda: [4 * _r(3, 7)], {"Activation"}),
    ("gelu_erf_tanh", lambda: Fn(lambda s, x: F.gelu(x) + F.gelu(x, approximate="tanh")),
     lambda: [_r(3, 7)], {"Activation"}),
    ("silu_sigmoid_tanh_relu6",
     lambda: Fn(lambda s, x: F.silu(x) * torch.sigmoid(x) + torch.tanh(F.relu6(3 * x))),
     lambda: [_r(3, 7)], {"Clamp"}),
    ("leaky_relu_exp_rsqrt", lambda: Fn(lambda s, x: F.leaky_relu(x, 0.2) + torch.rsqrt(
        torch.exp(x))), lambda: [_r(4, 5)], {"Where"}),
    ("adaptive_avg_pool", lambda: Fn(lambda s, x: F.adaptive_avg_pool2d(x, 1).sum()
                                     + F.adaptive_avg_pool2d(x, 2).sum()),
     lambda: [_r(2, 3, 6, 6)], {"Pool", "Reduce"}),
    ("max_avg_pool", lambda: Fn(lambda s, x: F.max_pool2d(x, 3, 2, 1) + F.avg_pool2d(x, 3, 2,
                                                                                  1)),
     lambda: [_r(1, 2, 9, 9)], {"Pool"}),
    ("linear_3d", lambda: _seed(nn.Linear(6, 5)), lambda: [_r(2, 3, 6)], {"MatMul"}),
    ("addmm_mm_bmm_matmul",
     lambda: Fn(lambda s, a, b: torch.addmm(a[0, :, :1].T, a[0], b[0]).sum()
                + torch.bmm(a, b).sum(0) + torch.matmul(a[1], b[1][:, 0]).sum()),
     lambda: [_r(2, 3, 4), _r(2, 4, 3, seed=1)], {"MatMul"}),
    ("layer_norm_1d_2d",
     lambda: _seed(Fn(lambda s, x: s.layers[0](x) + s.layers[1](x.transpose(1, 2)).transpose(
         1, 2), nn.LayerNorm(8), nn.LayerNorm([8, 4]))),
     lambda: [_r(2, 4, 8)], {"LayerNorm"}),
    ("softmax_log_softmax", lambda: Fn(lambda s, x: x.softmax(-1) + F.log_softmax(x, 1)),
     lambda: [_r(3, 5)], {"Softmax"}),
    ("embedding", lambda: _seed(nn.Embedding(11, 4)),
     lambda: [torch.tensor([[1, 0, 10], [3, 3, 7]])], {"Gather"}),
    ("sdpa_causal", lambda: Fn(lambda s, q, k, v: F.scaled_dot_product_attention(
        q, k, v, is_causal=True)), lambda: [_r(1, 2, 5, 4, seed=i) for i in range(3)],
     {"Attention"}),
    ("sdpa_mask_scale", lambda: Fn(lambda s, q, k, v, m: F.scaled_dot_product_attention(
        q, k, v, attn_mask=m, scale=0.3)),
     lambda: [_r(2, 2, 3, 4, seed=i) for i in range(3)] + [_r(3, 3)], {"Attention"}),
    ("movement", lambda: Fn(lambda s, x: torch.cat([
        x.view(2, 12).permute(1, 0).reshape(4, 6)[:, ::2].flatten().unsqueeze(0),
        x.transpose(0, 2)[1:3, 0].reshape(1, 1, -1).expand(1, 2, 4).reshape(1, 8),
        x.select(1, -1).reshape(1, 8)[:, 2:]], 1)),
     lambda: [_r(2, 3, 4)], {"Transpose", "Concat", "Slice", "Narrow", "Expand"}),
    ("split_chunk_unbind", lambda: Fn(lambda s, x: x.split(2, 1)[1] * x.chunk(3, 1)[2]
                                      + torch.unbind(x, 0)[1].sum()),
     lambda: [_r(3, 6)], {"Narrow"}),
    ("arithmetic_scalars", lambda: Fn(lambda s, x, y: (1 - x * 2 + 1) / y.abs().add(1) + x.pow(
        2) - torch.maximum(x, y) + torch.where(x > 0, x, y)),
     lambda: [_r(3, 4), _r(3, 4, seed=1)], {"Binary", "Compare", "Where"}),
    ("reductions", lambda: Fn(lambda s, x: x.mean((1, 2), keepdim=True) + x.sum(-1,
                                                                                keepdim=True)
                              + x.amax(0) + x.mean()),
     lambda: [_r(2, 3, 4)], {"Reduce"}),
    ("arange_positions", lambda: Fn(lambda s, x: x + torch.arange(x.shape[1]).to(x.dtype)),
     lambda: [_r(2, 5)], {"Constant"}),
]


@pytest.mark.parametrize("name,make,inputs,kinds", OPS, ids=[o[0] for o in OPS])
def test_aten_op_maps_and_matches_torch(name, make, inputs, kinds):
    module, xs = make().eval(), inputs()
    prog = from_torch(module, xs)
    text = prog.graph.to_text()
    assert all(k in text for k in kinds), text
    assert_within_contract(prog, prog.run(*xs), torch64(module, xs), name)


def test_params_are_the_state_dict_and_run_takes_tensors():
    module = _seed(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)))
    prog = from_torch(module, [_r(1, 3, 5, 5)])
    sd = {k: v.numpy() for k, v in module.state_dict().items()}
    for name, value in prog.params.items():
        np.testing.assert_array_equal(value, sd[name])
    assert {"0.weight", "0.bias", "1.weight", "1.running_var"} <= set(prog.params)
    assert prog.input_names == ["input"] and len(prog.graph.input_nodes()) == 1
    lin = _seed(nn.Sequential(nn.Linear(3, 2), nn.ReLU()))
    lp = from_torch(lin, [_r(4, 3)])
    assert set(lp.params) == {"0.weight.T", "0.bias"}     # the weight fed transposed
    np.testing.assert_array_equal(lp.params["0.weight.T"], lin[0].weight.detach().numpy().T)
    with pytest.raises(TypeError, match="takes 1 input"):
        prog.run()


def test_unmappable_ops_are_listed_together():
    def fn(s, x):
        y = torch.sort(x, -1).values
        return F.conv_transpose2d(y, torch.ones(2, 2, 3, 3)).sum() + torch.special.bessel_j0(y)
    with pytest.raises(TorchImportError) as err:
        from_torch(Fn(fn).eval(), [_r(1, 2, 4, 4)])
    msg = str(err.value)
    assert "3 aten call(s)" in msg and "aten.sort" in msg and "bessel_j0" in msg
    assert "transposed convolution" in msg and len(err.value.nodes) == 3


def test_importing_rlx_ref_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, rlx_ref; rlx_ref.from_torch; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# ── real models at test sizes ────────────────────────────────────────────────

MODELS = {
    "resnet18": (lambda: Z.resnet18(seed=1, num_classes=10), lambda: [_r(1, 3, 64, 64)]),
    "mobilenet_v3_small": (lambda: Z.mobilenet_v3_small(seed=2, num_classes=10),
                           lambda: [_r(2, 3, 64, 64)]),
    "vit_tiny": (lambda: Z.vit_tiny(seed=3, image=32, depth=2, num_classes=10),
                 lambda: [_r(2, 3, 32, 32)]),
    "gpt2": (lambda: Z.gpt2(seed=4, vocab=96, ctx=32, dim=64, layers=2, heads=4),
             lambda: [torch.randint(0, 96, (2, 16), generator=torch.Generator().manual_seed(5))]),
}


@pytest.fixture(scope="module", params=sorted(MODELS))
def imported(request):
    make, inputs = MODELS[request.param]
    module, xs = make(), inputs()
    return request.param, module, xs, from_torch(module, xs), torch64(module, xs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_model_runs_and_agrees_with_torch(imported, backend):
    name, module, xs, prog, want64 = imported
    got = prog.run(*xs, backend=backend)
    assert got.shape == want64.shape
    assert_within_contract(prog, got, want64, f"{name} on {backend}")
    with torch.no_grad():    # PyTorch's own f32 result meets the same contract
        assert_within_contract(prog, module(*xs).numpy(), want64, f"{name} in torch f32")


# torch's default initialization: building and verifying needs no particular weights
FULL = {"resnet18": (Z.ResNet, (1, 3, 224, 224), Z.RESNET18_PARAMS),
        "mobilenet_v3_small": (Z.MobileNetV3, (1, 3, 224, 224), Z.MOBILENET_V3_SMALL_PARAMS),
        "vit_tiny": (Z.ViT, (1, 3, 224, 224), Z.VIT_TINY_PARAMS),
        "gpt2": (Z.GPT2, (1, 128), Z.GPT2_PARAMS)}


@pytest.mark.parametrize("name", sorted(FULL))
def test_real_config_graph_builds_and_verifies(name):
    make, dims, count = FULL[name]
    module = make().eval()
    assert Z.count_params(module) == count
    x = torch.zeros(dims, dtype=torch.long) if name == "gpt2" else torch.zeros(dims)
    prog = from_torch(module, [x])
    rlx_ref.verify_or_raise(prog.graph)
    out = prog.graph.shape(prog.graph.outputs[0]).dims
    assert tuple(out) == ((1, 128, 50257) if name == "gpt2" else (1, 1000))
    # every weight is a Param under one of its names (tied weights have several), a
    # linear layer's as its transpose ``<key>.T``
    names: dict = {}
    for k, p in module.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).extend([k, k + ".T"])
    held = [next((prog.params[k] for k in ks if k in prog.params), None)
            for ks in names.values()]
    assert all(v is not None for v in held)
    assert sum(v.size for v in held) == count


# ── the same models through ONNX ─────────────────────────────────────────────

def onnx_bytes(module, xs) -> bytes:
    f = io.BytesIO()
    names = [f"in{i}" for i in range(len(xs))]
    torch.onnx.export(module, tuple(xs), f, dynamo=False, input_names=names,
                      output_names=["out"])
    return f.getvalue()


def test_model_through_onnx_gives_the_same_results(imported):
    onnx = pytest.importorskip("onnx")
    name, module, xs, prog, want64 = imported
    data = onnx_bytes(module, xs)
    model = onnx.load_from_string(data)
    onnx.checker.check_model(model)
    feeds = {f"in{i}": x.numpy() for i, x in enumerate(xs)}
    ort = pytest.importorskip("onnxruntime")
    got = ort.InferenceSession(data).run(None, feeds)[0]
    assert_within_contract(prog, got, want64, f"{name} in onnxruntime")
    rlx_onnx = pytest.importorskip("rlx_ref.onnx")
    if hasattr(rlx_onnx, "load_with_params"):
        g, params = rlx_onnx.load_with_params(model)
    else:       # weights as Params named by their initializers
        from onnx import numpy_helper
        g = rlx_onnx.load(model)
        params = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    exe = rlx_ref.Session("reference").compile(g)
    for node in g.param_nodes():
        exe.set_param(node.attrs.name, params[node.attrs.name])
    out = exe.run(feeds)[0]
    verdict = compare(out, want64, None, g.shape(g.outputs[0]), graph_accuracy(g, DType.F32))
    assert verdict.status == "ok", f"{name} through rlx_ref.onnx: {verdict.message}"
