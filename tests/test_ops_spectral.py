"""The spectral family's oracle (and numba-cpu kernels) against independent formulas."""
import math

import numpy as np
import pytest

from rlx_ref.ir.dtype import DType
from rlx_ref.ir.shape import Shape
from rlx_ref.ops.opdef import get
from rlx_ref.ops.single import run_single, single_op_graph, verify_single

NORMS = ("Backward", "Forward", "Ortho")
RNG = np.random.default_rng(7)


def fft(x, inverse=False, norm="Backward", device=None):
    attrs = get("Fft").attrs(inverse, norm)
    if device is None:
        return run_single("Fft", attrs, x)
    return _run_on(device, "Fft", attrs, x)


def _run_on(device, kind, attrs, *arrays, out=None):
    import rlx_ref

    g = single_op_graph(kind, attrs, arrays, out)
    exe = rlx_ref.Session(device).compile(g)
    return exe.run({f"x{i}": a for i, a in enumerate(arrays)})[0]


def block(z):
    """Complex rows → the 2N real block (f64)."""
    return np.concatenate([z.real, z.imag], axis=-1)


def unblock(b):
    n = b.shape[-1] // 2
    return b[..., :n] + 1j * b[..., n:]


def numpy_fft(z, inverse, norm):
    """numpy.fft with RLX's norm names: Backward is unscaled in BOTH directions."""
    n = z.shape[-1]
    if not inverse:
        return np.fft.fft(z, norm="ortho" if norm == "Ortho" else "backward")
    y = np.fft.ifft(z, norm="ortho" if norm == "Ortho" else "backward")
    return y * n if norm == "Backward" else y


DEVICES = [None, "numba-cpu"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [1, 2, 5, 8, 12, 17, 32])
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("inverse", [False, True])
def test_fft_agrees_with_numpy_in_both_layouts(device, n, norm, inverse):
    z = RNG.standard_normal((3, n)) + 1j * RNG.standard_normal((3, n))
    want = numpy_fft(z, inverse, norm)
    got_block = fft(block(z), inverse, norm, device)            # f64 2N real block
    np.testing.assert_allclose(unblock(got_block), want, rtol=1e-12, atol=1e-12 * n)
    got_c64 = fft(z.astype(np.complex64), inverse, norm, device)
    assert got_c64.dtype == np.complex64
    tol = 1e-5 * max(1.0, np.abs(want).max())
    np.testing.assert_allclose(got_c64, want, rtol=0, atol=tol)
    got_f32 = fft(block(z).astype(np.float32), inverse, norm, device)
    np.testing.assert_allclose(unblock(got_f32.astype(np.float64)), want, rtol=0, atol=tol)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("norm,factor", [("Backward", "n"), ("Forward", 1), ("Ortho", 1)])
def test_inverse_after_forward_is_identity_up_to_the_norm(device, norm, factor):
    for n in (4, 6, 16, 7):
        x = RNG.standard_normal((2, 2 * n))
        y = fft(fft(x, False, norm, device), True, norm, device)
        scale = n if factor == "n" else 1
        np.testing.assert_allclose(y, scale * x, rtol=1e-12, atol=1e-12 * n)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [8, 9, 15])
def test_parseval(device, n):
    z = RNG.standard_normal((4, n)) + 1j * RNG.standard_normal((4, n))
    ortho = unblock(fft(block(z), False, "Ortho", device))
    np.testing.assert_allclose((np.abs(ortho) ** 2).sum(-1), (np.abs(z) ** 2).sum(-1),
                               rtol=1e-12)
    plain = unblock(fft(block(z), False, "Backward", device))
    np.testing.assert_allclose((np.abs(plain) ** 2).sum(-1), n * (np.abs(z) ** 2).sum(-1),
                               rtol=1e-12)


def test_fft_hand_cases():
    # an impulse at n = 1 of N = 4: X[k] = exp(-2πi·k/4) = (1, -i, -1, i)
    x = np.float32([0, 1, 0, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(fft(x), np.float32([1, 0, -1, 0, 0, -1, 0, 1]))
    # the same with the inverse sign: (1, i, -1, -i); Forward norm divides it by 4
    np.testing.assert_array_equal(fft(x, True, "Forward"),
                                  np.float32([1, 0, -1, 0, 0, 1, 0, -1]) / 4)
    # N = 1 is the identity under every norm; a constant row is N at DC
    np.testing.assert_array_equal(fft(np.float32([3, -2]), False, "Ortho"), [3, -2])
    c = fft(np.complex64([2, 2, 2]))
    np.testing.assert_allclose(c, [6, 0, 0], atol=1e-6)


def test_fft_verifier_rules():
    attrs = get("Fft").attrs(False, "Backward")
    assert any("(C3)" in m for m in verify_single("Fft", attrs, [Shape((2, 5), DType.F32)]))
    assert any("(C1)" in m for m in verify_single("Fft", attrs, [Shape((4,), DType.I32)]))
    assert any("(C2)" in m for m in verify_single("Fft", attrs, [Shape((), DType.C64)]))
    assert verify_single("Fft", attrs, [Shape((3,), DType.C64)]) == []


def radix2_by_stages(x, device=None):
    """A full forward radix-2 FFT built from FftButterflyStage (bit-reversed input)."""
    n = x.shape[-1]
    bits = n.bit_length() - 1
    rev = [int(format(i, f"0{bits}b")[::-1], 2) for i in range(n)]
    state = np.stack([x.real, x.imag], -1)[:, rev].astype(np.float32)
    half = n // 2
    for stage in range(bits):
        s = 1 << stage
        k = np.arange(half) % s
        w = np.exp(-2j * np.pi * k / (2 * s))
        ins = (state, np.ones(half, np.float32), np.zeros(half, np.float32),
               w.real.astype(np.float32), w.imag.astype(np.float32))
        attrs = get("FftButterflyStage").attrs(stage, n)
        state = (run_single("FftButterflyStage", attrs, *ins) if device is None
                 else _run_on(device, "FftButterflyStage", attrs, *ins))
    return state[..., 0] + 1j * state[..., 1]


@pytest.mark.parametrize("device", DEVICES)
def test_butterfly_stages_compose_into_an_fft(device):
    x = RNG.standard_normal((2, 16)) + 1j * RNG.standard_normal((2, 16))
    np.testing.assert_allclose(radix2_by_stages(x, device), np.fft.fft(x), atol=2e-5)


def test_butterfly_stage_rules():
    attrs = get("FftButterflyStage").attrs(2, 6)       # 2^2 does not divide 3
    v = Shape((3,), DType.F32)
    msgs = verify_single("FftButterflyStage", attrs, [Shape((1, 6, 2), DType.F32)] + [v] * 4)
    assert any("(C2)" in m for m in msgs)
    attrs = get("FftButterflyStage").attrs(0, 8)
    msgs = verify_single("FftButterflyStage", attrs, [Shape((1, 8, 2), DType.F32)] + [v] * 4)
    assert any("(C4)" in m for m in msgs)


def log_mel_formula(spec, filters):
    """Whisper's compression written directly in f64, one frame at a time."""
    n_fft = spec.shape[-1] // 2
    n_bins = n_fft // 2 + 1
    out = []
    for row in spec.reshape(-1, spec.shape[-1]).astype(np.float64):
        power = row[:n_bins] ** 2 + row[n_fft:n_fft + n_bins] ** 2
        mel = np.log10(np.maximum(filters.astype(np.float64) @ power, float(np.float32(1e-10))))
        out.append((np.maximum(mel, mel.max() - 8) + 4) / 4)
    return np.array(out).reshape(spec.shape[:-1] + (filters.shape[0],))


@pytest.mark.parametrize("device", DEVICES)
def test_log_mel_matches_the_direct_formula(device):
    spec = RNG.standard_normal((2, 3, 32)).astype(np.float32)
    spec[0, 0, 2] = 400.0                           # a loud bin: the floor clamps
    filters = RNG.random((5, 9)).astype(np.float32) ** 4
    got = (run_single("LogMel", None, spec, filters) if device is None
           else _run_on(device, "LogMel", None, spec, filters))
    assert got.shape == (2, 3, 5)
    np.testing.assert_allclose(got, log_mel_formula(spec, filters), atol=3e-6)


def test_log_mel_from_an_fft_of_a_tone():
    """Fft → LogMel: a pure tone puts all its energy in the filter covering its bin."""
    n = 16
    t = np.arange(n)
    x = np.concatenate([np.cos(2 * np.pi * 3 * t / n), np.zeros(n)]).astype(np.float32)
    spec = fft(x)
    filters = np.eye(9, dtype=np.float32)[[1, 3, 5]]       # mels = bins 1, 3, 5
    got = run_single("LogMel", None, spec, filters)
    # bin 3 holds (n/2)² = 64; the others ~0 clamp to the floor log10(64) - 8
    top = math.log10(64.0)
    np.testing.assert_allclose(got, [(top - 8 + 4) / 4, (top + 4) / 4, (top - 8 + 4) / 4],
                               atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_log_mel_backward_matches_finite_differences(device):
    spec = RNG.standard_normal((2, 16)).astype(np.float32).astype(np.float64)
    filters = (RNG.random((4, 5)) + 0.1).astype(np.float32).astype(np.float64)
    dy = RNG.standard_normal((2, 4)).astype(np.float32).astype(np.float64)
    ins = (spec.astype(np.float32), filters.astype(np.float32), dy.astype(np.float32))
    got = (run_single("LogMelBackward", None, *ins, float64=True) if device is None
           else _run_on(device, "LogMelBackward", None, *ins).astype(np.float64))

    def loss(s):
        return float((log_mel_formula(s, filters) * dy).sum())
    num = np.zeros_like(spec)
    for i in np.ndindex(spec.shape):
        e = np.zeros_like(spec)
        e[i] = 1e-6
        num[i] = (loss(spec + e) - loss(spec - e)) / 2e-6
    # no mel sits on its frame's floor here, so RLX's VJP is the exact gradient
    tol = (1e-6 if device is None else 1e-5) * np.abs(num).max()
    np.testing.assert_allclose(got, num, atol=tol)
    assert np.all(got[:, 5:8] == 0) and np.all(got[:, 13:] == 0)   # bins past n/2 + 1


@pytest.mark.parametrize("device", DEVICES)
def test_welch_peaks_formula(device):
    spec = RNG.standard_normal((6, 16)).astype(np.float32)
    attrs = get("WelchPeaks").attrs(3, 2)
    got = (run_single("WelchPeaks", attrs, spec) if device is None
           else _run_on(device, "WelchPeaks", attrs, spec))
    assert got.shape == (3, 6)
    for b in range(3):
        rows = spec[2 * b:2 * b + 2].astype(np.float64)
        p = rows[:, :5] ** 2 + rows[:, 8:13] ** 2
        p[:, 1:4] *= 2
        psd = p.mean(0)
        order = np.argsort(-psd, kind="stable")[:3]
        np.testing.assert_array_equal(got[b, 0::2], order)
        np.testing.assert_allclose(got[b, 1::2], psd[order], rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_partitioned_conv_is_numpy_convolve(device):
    x = RNG.standard_normal((3, 20)).astype(np.float32)
    ir = RNG.standard_normal(37).astype(np.float32)
    for block in (0, 4, 64):
        attrs = get("PartitionedConv").attrs(block)
        got = (run_single("PartitionedConv", attrs, x, ir) if device is None
               else _run_on(device, "PartitionedConv", attrs, x, ir))
        want = np.stack([np.convolve(r.astype(np.float64), ir.astype(np.float64))
                         for r in x])
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_partitioned_conv_rules():
    attrs = get("PartitionedConv").attrs(4)
    out = Shape((5,), DType.F32)
    assert any("(C2)" in m for m in verify_single(
        "PartitionedConv", attrs, [Shape((4,), DType.F32), Shape((2, 2), DType.F32)], out))
    assert any("(C3)" in m for m in verify_single(
        "PartitionedConv", attrs, [Shape((0,), DType.F32), Shape((2,), DType.F32)], out))
    assert any("(C1)" in m for m in verify_single(
        "PartitionedConv", attrs, [Shape((4,), DType.F64), Shape((2,), DType.F64)], out))
