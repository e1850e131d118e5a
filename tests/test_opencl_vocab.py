"""OpenCL kernels of the vocabulary kinds (RNG, Sample, Sort, KvAppend, Conv3d, Interpolate3d,
the state-space scans) against the oracle, on shapes the conformance samples do not reach."""
import dataclasses

import numpy as np
import pytest

import rlx_ref
from rlx_ref.backends.registry import get_backend
from rlx_ref.ir.dtype import DType
from rlx_ref.ir.shape import Shape
from rlx_ref.ops.opdef import get
from rlx_ref.ops.single import single_op_graph

cl = pytest.importorskip("pyopencl")
OCL = get_backend("opencl")
if not OCL.availability()[0]:
    pytest.skip(f"no OpenCL device: {OCL.availability()[1]}", allow_module_level=True)

NATIVE = ("RngUniform", "RngNormal", "Sample", "Sort", "ArgSort", "KvAppend", "Conv3d",
          "Interpolate3d", "SelectiveScan", "Mamba2", "GatedDeltaNet")
SORT_DTYPES = ("i8", "u8", "i16", "i32", "i64", "u32", "f16", "bf16", "f32", "f64")
SPLITS = pytest.mark.parametrize("gpu_shaped", [False, True], ids=["cpu-split", "gpu-split"])


def _device_run(g, feeds, gpu_shaped=False, fp64=True):
    from rlx_ref.backends.opencl.executable import OpenCLExecutable
    from rlx_ref.passes import compile_pipeline

    info, context, queue = OCL._device()
    if gpu_shaped:      # the GPU work split on the same device
        info = dataclasses.replace(info, is_cpu=False, max_work_group=64)
    if not fp64:        # lowered as for a device without cl_khr_fp64
        info = dataclasses.replace(info, fp64=False)
    lowered, _ = compile_pipeline(g, OCL)
    return OpenCLExecutable(lowered, info, context, queue).run(feeds)[0]


def _run(kind, attrs, arrays, out=None, gpu_shaped=False):
    """(opencl result, oracle result) of one ``kind`` node on ``arrays``."""
    g = single_op_graph(kind, attrs, arrays, out)
    feeds = {f"x{i}": a for i, a in enumerate(arrays)}
    return _device_run(g, feeds, gpu_shaped), rlx_ref.interpret(g, feeds)[0]


def _bits(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype
    assert got.tobytes() == want.tobytes()


def _attrs(kind, **kw):
    return get(kind).attrs(**kw)


def test_declared_native():
    paths = OCL.paths()
    for kind in NATIVE:
        assert paths[kind] == "native", kind
    table = OCL.supported_ops()
    assert {DType.F16, DType.BF16, DType.I8, DType.U32} <= table["Sort"]
    assert {DType.BOOL, DType.C64, DType.C128} <= table["KvAppend"]


@SPLITS
@pytest.mark.parametrize("n", [1, 7, 1001, 4099])
def test_rng_fills_are_bit_exact(n, gpu_shaped):
    out = Shape((n,), DType.F32)
    for kind, kw in (("RngUniform", dict(low=-2.0, high=5.0)),
                     ("RngNormal", dict(mean=0.5, scale=3.0))):
        for key in (0, 12345, 2**64 - 1):
            got, want = _run(kind, _attrs(kind, key=key, **kw), [], out, gpu_shaped)
            _bits(got, want)


def _sort_data(dt: str, shape, seed):
    rng = np.random.default_rng(seed)
    v = rng.integers(-6, 7, shape).astype(np.float64)      # many ties
    if dt in ("u8", "u32"):
        v = np.abs(v)
    x = v.astype(DType.parse(dt).np)
    if dt in ("f16", "bf16", "f32", "f64"):
        flat = x.reshape(-1)
        flat[::7] = np.nan
        flat[3::11] = -0.0
        flat[5::13] = np.inf
    return x


@pytest.mark.parametrize("dt,gpu_shaped", [(d, False) for d in SORT_DTYPES]
                         + [(d, True) for d in ("u8", "bf16", "f64")])
def test_sort_and_argsort_every_dtype(dt, gpu_shaped):
    x = _sort_data(dt, (3, 41, 5), 1)
    for kind in ("Sort", "ArgSort"):
        for axis in (0, 1, 2):
            for desc in (False, True):
                got, want = _run(kind, _attrs(kind, axis=axis, descending=desc), [x],
                                 gpu_shaped=gpu_shaped)
                _bits(got, want)


@SPLITS
@pytest.mark.parametrize("n", [1000, 3000])     # GPU split: bitonic in local memory, merge
def test_sort_long_lines(n, gpu_shaped):
    x = _sort_data("f32", (2, n), 3)
    for kind in ("Sort", "ArgSort"):
        got, want = _run(kind, _attrs(kind, axis=1, descending=True), [x],
                         gpu_shaped=gpu_shaped)
        _bits(got, want)


@pytest.mark.parametrize("dt", ["bool", "i8", "f16", "c64", "c128"])
def test_kv_append_raw_copy(dt):
    np_dt = DType.parse(dt).np
    cache = (np.arange(2 * 6 * 3) % 5).astype(np_dt).reshape(2, 6, 3)
    row = np.ones((2, 1, 3), np_dt)
    got, want = _run("KvAppend", _attrs("KvAppend", axis=1, pos=4), [cache, row])
    _bits(got, want)


@pytest.mark.parametrize("dt", ["u8", "f16", "f64", "c128"])
def test_interpolate3d_any_dtype(dt):
    x = (np.arange(2 * 3 * 4 * 5 * 3) % 97).astype(DType.parse(dt).np).reshape(2, 3, 4, 5, 3)
    got, want = _run("Interpolate3d", _attrs("Interpolate3d", size=[7, 2, 5]), [x])
    _bits(got, want)


@pytest.mark.parametrize("dt", ["f16", "bf16"])
def test_conv3d_sixteen_bit(dt):
    rng = np.random.default_rng(4)
    np_dt = DType.parse(dt).np
    x = rng.standard_normal((1, 4, 5, 4, 6)).astype(np_dt)
    w = rng.standard_normal((6, 2, 2, 3, 2)).astype(np_dt)
    a = _attrs("Conv3d", stride=(1, 2, 1), padding=(1, 0, 1), dilation=(2, 1, 1), groups=2)
    got, want = _run("Conv3d", a, [x, w])
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32),
                               rtol=2e-2, atol=2e-2)


def _close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("n", [3, 80])       # 80: the state lives in global scratch
def test_state_space_scans(n):
    rng = np.random.default_rng(5)
    f = np.float32
    bt, sq, hd, p = 2, 9, 3, 2
    x = rng.standard_normal((bt, sq, hd)).astype(f)
    delta = np.abs(rng.standard_normal((bt, sq, hd))).astype(f) * f(0.2)
    a = -np.abs(rng.standard_normal((hd, n))).astype(f)
    b, c = (rng.standard_normal((bt, sq, n)).astype(f) for _ in range(2))
    _close(*_run("SelectiveScan", _attrs("SelectiveScan", state_size=n),
                 [x, delta, a, b, c]))
    x4 = rng.standard_normal((bt, sq, hd, p)).astype(f)
    b4, c4 = (rng.standard_normal((bt, sq, hd, n)).astype(f) for _ in range(2))
    _close(*_run("Mamba2", _attrs("Mamba2", head_dim=p, state_size=n),
                 [x4, delta, -np.abs(a[:, 0]), b4, c4]))


@pytest.mark.parametrize("per_channel,n", [(False, 5), (True, 5), (True, 80)])
def test_gated_delta_net_with_carried_state(per_channel, n):
    rng = np.random.default_rng(6)
    f = np.float32
    bt, sq, hd = 2, 7, 2
    q, k, v = (rng.standard_normal((bt, sq, hd, n)).astype(f) * f(0.5) for _ in range(3))
    g = -np.abs(rng.standard_normal((bt, sq, hd, n) if per_channel else (bt, sq, hd)))
    beta = np.abs(rng.standard_normal((bt, sq, hd))).astype(f) * f(0.5)
    state = rng.standard_normal((bt, hd, n, n)).astype(f)
    a = _attrs("GatedDeltaNet", state_size=n, carry_state=True, gate_per_channel=per_channel)
    _close(*_run("GatedDeltaNet", a, [q, k, v, g.astype(f), beta, state]))


@SPLITS
def test_sample_long_rows_are_exact(gpu_shaped):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((6, 300)) * 3).astype(np.float32)
    x[1, 10:20] = x[1, 0]                   # ties at the top-k cut and in the top-p order
    for k, p, t, seed in ((0, 1.0, 1.0, 5), (17, 0.9, 0.8, 0), (300, 0.5, 2.0, 3),
                          (1, 0.3, 0.0, 11)):
        a = _attrs("Sample", top_k=k, top_p=p, temperature=t, seed=seed)
        got, want = _run("Sample", a, [x], Shape((6,), DType.F32), gpu_shaped)
        _bits(got, want)


def test_sample_nan_reaching_a_sort_is_an_error():
    x = np.zeros((2, 5), np.float32)
    x[1, 2] = np.nan
    a = _attrs("Sample", top_k=2, top_p=1.0, temperature=1.0, seed=1)
    g = single_op_graph("Sample", a, [x], Shape((2,), DType.F32))
    with pytest.raises(Exception, match="NaN logits or probabilities reach a sort"):
        _device_run(g, {"x0": x})


@SPLITS
@pytest.mark.parametrize("n", [2, 32, 1024, 60, 100, 1000])   # direct, stages, Bluestein
def test_fft_layouts_norms_and_lengths(n, gpu_shaped):
    rng = np.random.default_rng(8)
    z = rng.standard_normal((3, n)) + 1j * rng.standard_normal((3, n))
    inputs = {"f64": np.concatenate([z.real, z.imag], 1),
              "f32": np.concatenate([z.real, z.imag], 1).astype(np.float32),
              "c64": z.astype(np.complex64)}
    for dt, x in inputs.items():
        tol = 1e-9 if dt == "f64" else 2e-5
        for inverse, norm in ((False, "Backward"), (True, "Forward"), (True, "Ortho")):
            a = _attrs("Fft", inverse=inverse, norm=norm)
            got, want = _run("Fft", a, [x], gpu_shaped=gpu_shaped)
            scale = np.abs(want).max()
            np.testing.assert_allclose(got, want, rtol=0, atol=tol * scale * np.log2(2 * n))


def test_without_fp64_sums_in_float_and_exact_kinds_stay_exact():
    rng = np.random.default_rng(9)
    f = np.float32
    z = rng.standard_normal((2, 2 * 100)).astype(f)             # Bluestein in float
    x = rng.standard_normal((2, 9, 3)).astype(f)
    delta = np.abs(rng.standard_normal((2, 9, 3))).astype(f) * f(0.2)
    a = -np.abs(rng.standard_normal((3, 4))).astype(f)
    b, c = (rng.standard_normal((2, 9, 4)).astype(f) for _ in range(2))
    logits = rng.standard_normal((3, 50)).astype(f)
    cases = [("Fft", _attrs("Fft", inverse=False, norm="Ortho"), [z], None, 1e-4),
             ("SelectiveScan", _attrs("SelectiveScan", state_size=4), [x, delta, a, b, c],
              None, 1e-4),
             ("RngNormal", _attrs("RngNormal", mean=1.0, scale=2.0, key=9), [],
              Shape((333,), DType.F32), 0),
             ("Sample", _attrs("Sample", top_k=5, top_p=0.7, temperature=0.9, seed=2),
              [logits], Shape((3,), DType.F32), 0)]
    for kind, attrs, arrays, out, tol in cases:
        g = single_op_graph(kind, attrs, arrays, out)
        feeds = {f"x{i}": v for i, v in enumerate(arrays)}
        got, want = _device_run(g, feeds, fp64=False), rlx_ref.interpret(g, feeds)[0]
        if tol:
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())
        else:
            _bits(got, want)
