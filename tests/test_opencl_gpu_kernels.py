"""OpenCL's GPU-style kernels on any device (``opencl/gpu-kernels``): the spec and its
errors, the backend's facts, ops against the oracle with the ``*_gpu`` variants recorded,
both styles in one process, and report coverage united over both styles' columns."""
import json

import numpy as np
import pytest

import rlx_ref
from rlx_ref.backends import variants
from rlx_ref.backends.base import BackendUnavailable
from rlx_ref.backends.registry import get_backend
from rlx_ref.conformance import report
from rlx_ref.conformance.model import CaseResult
from rlx_ref.conformance.runner import results_document, write_results

ENV = "RLX_REF_OPENCL_KERNELS"


def _usable() -> tuple[bool, str]:
    try:
        return get_backend("opencl").availability()
    except BackendUnavailable as e:
        return False, str(e)


USABLE, WHY = _usable()
needs_device = pytest.mark.skipif(not USABLE, reason=f"no usable OpenCL device: {WHY}")


@pytest.fixture(autouse=True)
def _no_style_env(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)


def test_specs_pick_the_kernel_style_and_keep_the_name():
    for spec, device, style in (("opencl", None, "auto"), ("opencl/gpu-kernels", None, "gpu"),
                                ("opencl:0:1/gpu-kernels", "0:1", "gpu"),
                                ("opencl:pocl/cpu-kernels", "pocl", "cpu")):
        b = get_backend(spec)
        assert (b.name, b.spec, b.kernels) == ("opencl", device, style), spec
    assert get_backend("opencl/gpu-kernels").device_types == ("gpu",)
    assert get_backend("opencl/cpu-kernels").device_types == ("cpu",)


def test_the_environment_variable_sets_the_default_and_a_spec_wins(monkeypatch):
    monkeypatch.setenv(ENV, "gpu")
    assert get_backend("opencl").kernels == "gpu"
    assert get_backend("opencl/cpu-kernels").kernels == "cpu"
    monkeypatch.setenv(ENV, "auto")
    assert get_backend("opencl").kernels == "auto"


@pytest.mark.parametrize("spec", ["opencl/gpu", "opencl/", "opencl:0:0/kernels=gpu",
                                  "opencl/gpu-kernels/cpu-kernels"])
def test_a_bad_option_names_the_expected_ones(spec):
    with pytest.raises(BackendUnavailable, match=r"unknown opencl option .* expected "
                       r"opencl\[:DEVICE\]/OPTION with OPTION one of gpu-kernels, cpu-kernels"):
        get_backend(spec)


def test_a_bad_style_names_the_expected_values(monkeypatch):
    from rlx_ref.backends.opencl import OpenCLBackend

    with pytest.raises(ValueError, match="'tpu' \\(kernels\\): expected one of auto, gpu, cpu"):
        OpenCLBackend(kernels="tpu")
    monkeypatch.setenv(ENV, "fast")
    with pytest.raises(BackendUnavailable, match=f"'fast' \\({ENV}\\): expected one of auto"):
        get_backend("opencl")


@needs_device
def test_the_backend_says_its_style():
    gpu, cpu, auto = (get_backend(s) for s in ("opencl/gpu-kernels", "opencl/cpu-kernels",
                                               "opencl"))
    info = auto._device()[0]
    assert "GPU-style kernels forced" in gpu.device and "forced" not in auto.device
    assert gpu.emulated == auto.emulated
    assert not gpu.promise_holds("cpu_fp64")
    assert cpu.promise_holds("cpu_fp64") == bool(info.fp64)
    assert not gpu.accumulation()           # work-group kernels promise no f64 sums
    assert gpu.describe()["kernels"] == "gpu" and gpu.describe()["device_types"] == ["gpu"]
    assert "kernels" not in auto.describe()
    assert gpu._device()[1] is auto._device()[1]        # one context per device


def _r(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _attention(g, q, k, v):
    return g.attention(q, k, v, num_heads=2, head_dim=8, mask_kind="Causal")


# (name, build, input arrays, the GPU variant it must run, the CPU variant instead)
OPS = [
    ("reduce rows", lambda g, x: g.reduce(x, "Sum", [1]), [_r(5, 300)],
     "reduce.rows_gpu", "reduce.rows_cpu"),
    ("reduce cols", lambda g, x: g.reduce(x, "Max", [0]), [_r(37, 9)],
     "reduce.cols_gpu", "reduce.cols_cpu"),
    ("softmax rows", lambda g, x: g.softmax(x, -1), [_r(4, 257)],
     "softmax.rows_gpu", "softmax.rows_cpu"),
    ("softmax cols", lambda g, x: g.softmax(x, 1), [_r(3, 11, 6)],
     "softmax.cols_gpu", "softmax.cols_cpu"),
    ("matmul", lambda g, a, b: g.matmul(a, b), [_r(40, 37), _r(37, 45, seed=1)],
     "matmul.gemm_gpu", "matmul.gemm_cpu"),
    ("transpose", lambda g, x: g.transpose(x, [1, 0]), [_r(40, 36)],
     "move.tiled_gpu", "move.tiled_cpu"),
    ("layernorm rows", lambda g, x, a, b: g.layer_norm(x, a, b, axis=-1, eps=1e-5),
     [_r(6, 300), _r(300, seed=1), _r(300, seed=2)], "norm.rows_gpu", "norm.rows_cpu"),
    ("layernorm cols", lambda g, x, a, b: g.layer_norm(x, a, b, axis=1, eps=1e-5),
     [_r(3, 10, 7), _r(10, seed=1), _r(10, seed=2)], "norm.cols_gpu", "norm.cols_cpu"),
    ("argmax rows", lambda g, x: g.arg_max(x, axis=1, keep_dim=False),
     [np.round(_r(7, 300) * 4).astype(np.float32)], "arg.rows_gpu", "arg.rows_cpu"),
    ("cumsum rows", lambda g, x: g.cumsum(x, axis=1, exclusive=False), [_r(3, 600)],
     "scan.rows_gpu", "scan.lines"),
    ("attention", _attention, [_r(2, 5, 16), _r(2, 7, 16, seed=1), _r(2, 7, 16, seed=2)],
     "attention.gpu", "attention.cpu"),
]


def _graph(build, arrays):
    g = rlx_ref.Graph("t")
    ins = [g.input(f"x{i}", list(a.shape), rlx_ref.DType.of(a)) for i, a in enumerate(arrays)]
    g.set_outputs([build(g, *ins)])
    return g, {f"x{i}": a for i, a in enumerate(arrays)}


def _check(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype
    if want.dtype.kind in "iu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


@needs_device
@pytest.mark.parametrize("name,build,arrays,gpu,cpu", OPS, ids=[o[0] for o in OPS])
def test_gpu_kernels_match_the_oracle_beside_the_cpu_ones(name, build, arrays, gpu, cpu):
    """Both styles compile the same graph in one process; each runs its own variant."""
    g, feeds = _graph(build, arrays)
    (want,) = rlx_ref.interpret(g, feeds)
    for spec, ran, other in (("opencl/gpu-kernels", gpu, cpu), ("opencl/cpu-kernels", cpu, gpu)):
        exe = get_backend(spec).compile(g)
        (got,) = exe.run(feeds)
        _check(got, want)
        assert f"opencl:{ran}" in exe.variants_run(), (spec, exe.variants_run())
        assert f"opencl:{other}" not in exe.variants_run(), spec


@needs_device
def test_conformance_refuses_two_styles_in_one_results_file():
    from rlx_ref.conformance.cli import main

    with pytest.raises(RuntimeError, match="both record results as 'opencl'.*own --out"):
        main(["--backend", "opencl,opencl/gpu-kernels", "--op", "Reduce", "--quiet"])


@needs_device
def test_a_gpu_style_fault_runs_on_the_gpu_style_backend_only():
    from rlx_ref.backends.fault_catalogue import by_name

    fault = by_name("clg-reduce-tree-early")
    assert fault.backend == "opencl" and fault.run_spec == "opencl/gpu-kernels"
    b = get_backend("opencl/gpu-kernels+fault:clg-reduce-tree-early")
    assert b.name == "opencl+fault:clg-reduce-tree-early" and b.device_types == ("gpu",)
    with pytest.raises(BackendUnavailable, match="never runs; plant it in "
                       "opencl/gpu-kernels\\+fault:clg-reduce-tree-early"):
        get_backend("opencl/cpu-kernels+fault:clg-reduce-tree-early")


# ── coverage: a backend's columns count together ─────────────────────────────

def _results(path, spec: str, names: list):
    """A results file of ``spec``: one passing case per registry kind, the variants
    ``names`` spread over them."""
    from rlx_ref.ops.opdef import all_opdefs

    be = get_backend(spec)
    kinds = sorted(d.kind for d in all_opdefs())
    rows = [CaseResult(f"{k}.f32.{i:012x}", k, "f32", (), be.name, "ok",
                       emulated=bool(be.emulated),
                       variants=names[i::len(kinds)]).to_json()
            for i, k in enumerate(kinds)]
    write_results(results_document([be], rows, "style-test"), path)
    return path


def _coverage(tmp_path, *files, check=False):
    out = [str(tmp_path / f) for f in ("c.md", "c.json", "c.html")]
    return report.main_coverage([*map(str, files), "--out", out[0], "--json", out[1],
                                 "--html", out[2]] + (["--check"] if check else []))


def test_coverage_unites_the_cpu_and_gpu_style_columns(tmp_path, capsys):
    cpu, gpu = (set(variants.applicable("opencl", (t,))) for t in ("cpu", "gpu"))
    only_cpu, only_gpu, common = sorted(cpu - gpu), sorted(gpu - cpu), sorted(cpu & gpu)
    assert "opencl:reduce.rows_gpu" in only_gpu and "opencl:reduce.rows_cpu" in only_cpu
    a = _results(tmp_path / "a.json", "opencl/cpu-kernels", only_cpu + common[::2])
    b = _results(tmp_path / "b.json", "opencl/gpu-kernels", only_gpu + common[1::2])
    for alone, missing in ((a, common[1]), (b, common[0])):     # each ran half of them
        assert _coverage(tmp_path, alone) == 0
        assert _coverage(tmp_path, alone, check=True) == 1
        assert missing in capsys.readouterr().err
    assert _coverage(tmp_path, a, b) == 0
    assert _coverage(tmp_path, a, b, check=True) == 0, capsys.readouterr().err
    rep = json.loads((tmp_path / "c.json").read_text())
    labels = [c["column"] for c in rep["backends"]]
    assert len(labels) == 2 and all(lab.startswith("opencl (") for lab in labels)
    assert any("gpu kernels" in lab for lab in labels)
    [row] = rep["variants"]
    assert row["unexercised"] == [] and row["device_types"] == ["cpu", "gpu"]
    assert row["exercised"] == row["declared"] == len(variants.declared("opencl"))


def test_a_forced_style_gets_its_own_report_column():
    assert report.column_label("opencl", True, "gpu") == "opencl (emulated, gpu kernels)"
    assert report.column_label("opencl", False, "gpu") == "opencl (gpu kernels)"
    assert report.column_label("opencl", True) == "opencl (emulated)"
