"""The CUDA kernels of the spectral and complex kinds: declared native, every kernel their
conformance cases and some larger transforms make compiles to PTX for cc 9.0, and on the
simulator (no fused multiply-adds there) Fft and the LogMel pair give numba-cpu's bits,
since both run the same f64 operations in the same order, at shapes past the cases' (many
stages, Bluestein on several rows, every layout and norm), for any launch grid; the f32
kinds (FftButterflyStage, the complex trio) give the oracle's."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("numba")
try:
    import numba_cuda  # noqa: F401
except ImportError:
    pytest.skip("numba-cuda is not installed (pip install 'numba-cuda[cu13]')",
                allow_module_level=True)

from rlx_ref.backends.registry import get_backend

KINDS = ("Fft", "FftButterflyStage", "LogMel", "LogMelBackward", "ComplexNormSq",
         "ComplexNormSqBackward", "Conjugate")
SIM_ENV = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "PYTHONWARNINGS": "ignore"}


def test_kinds_are_native():
    paths = get_backend("cuda").paths()
    assert {k: paths[k] for k in KINDS} == {k: "native" for k in KINDS}


def _fft_graph(name, dims, dtype, inverse=False, norm="Backward"):
    import rlx_ref

    g = rlx_ref.Graph(name)
    g.set_outputs([g.op("Fft", [g.input("x", dims, dtype)], inverse=inverse, norm=norm)])
    return g


def test_kernels_compile_to_ptx_for_cc90():
    cuda = pytest.importorskip("numba.cuda")
    if not hasattr(cuda, "compile_ptx"):
        pytest.skip("numba.cuda has no compile_ptx (simulator active)")
    from rlx_ref.backends.numba_cuda.ptx_check import _DONE, compile_launches, launches_of
    from rlx_ref.conformance.cases import build_cases

    backend = get_backend("cuda")
    seen, kinds = {}, set()
    graphs = [c.graph for c in build_cases(kinds=KINDS)] + [
        _fft_graph("pow2", [4, 2048], "f32"), _fft_graph("blue", [3, 2000], "f64", True),
        _fft_graph("c64", [2, 1000], "c64", True, "Ortho")]
    for graph in graphs:
        for ln in launches_of(backend, graph):
            seen.setdefault(ln.key(), ln)
            kinds.add(ln.kernel.name.split("_")[0])
    assert {"fftload", "fftstage", "fftmid", "fftout", "fftbfly", "melnrg", "melout",
            "meldlog", "melgrad", "cnormsq", "conj", "cnormsqbwd"} <= kinds
    result = compile_launches(list(seen.values()), cc=(9, 0))
    assert result["kernels"] + result["cached"] == len(seen)
    assert all(_DONE[key + ((9, 0),)][0] > 0 for key in seen)


_SIM = '''
import json, warnings
import numpy as np, rlx_ref
from rlx_ref.backends.registry import get_backend
from rlx_ref.backends.numba_cuda import device
warnings.filterwarnings("ignore")
cuda, cpu = get_backend("cuda"), get_backend("numba-cpu")
rng = np.random.default_rng(3)
out = {}

def fft(name, dims, dtype, inverse=False, norm="Backward"):
    g = rlx_ref.Graph(name)
    g.set_outputs([g.op("Fft", [g.input("x", dims, dtype)], inverse=inverse, norm=norm)])
    x = rng.standard_normal(dims)
    if dtype == "c64":
        x = (x + 1j * rng.standard_normal(dims)).astype(np.complex64)
    x = x.astype({"f32": np.float32, "f64": np.float64, "c64": np.complex64}[dtype])
    if x.size > 3:
        x.reshape(-1)[[1, 2]] = [np.inf, np.nan]     # non-finite values travel the row
    feeds = {"x": x}
    got = cuda.compile(g).run(feeds)[0]
    ref = cpu.compile(g).run(feeds)[0]
    want = rlx_ref.interpret(g, feeds)[0]
    ok = np.isfinite(want) & np.isfinite(got)
    scale = max(1.0, float(np.abs(want[ok]).max(initial=0)))
    nan = np.isnan(ref)         # NaN payloads and signs carry no meaning: compare the masks
    out[name] = {"bits": got.dtype == ref.dtype and got.shape == ref.shape
                 and got[~nan].tobytes() == ref[~nan].tobytes(),
                 "err": float(np.abs(got[ok] - want[ok]).max(initial=0)) / scale,
                 "nan": bool((np.isnan(got) == nan).all())}

def mel(name, rows, n_fft, n_mels):
    ext, bins = 2 * n_fft, n_fft // 2 + 1
    g = rlx_ref.Graph(name)
    spec, filt = g.input("spec", [rows, ext]), g.input("filt", [n_mels, bins])
    lm = g.op("LogMel", [spec, filt])
    g.set_outputs([lm, g.op("LogMelBackward", [spec, filt, g.input("dy", [rows, n_mels])])])
    x = rng.standard_normal((rows, ext)).astype(np.float32)
    x[0] = 0.0                                      # a silent frame: every mel clamps
    x[1, :3] = [np.nan, 0.0, 0.0]                   # a NaN energy stays live
    f = np.abs(rng.standard_normal((n_mels, bins))).astype(np.float32)
    f[:, ::3] = 0.0
    f[:2] *= 1e9                                    # mels 2.. sit on the frame's floor
    f[2] *= 1e1                                     # ... but mel 2 near its edge
    feeds = {"spec": x, "filt": f, "dy": rng.standard_normal((rows, n_mels)).astype(np.float32)}
    got, ref = cuda.compile(g).run(feeds), cpu.compile(g).run(feeds)
    want = rlx_ref.interpret(g, feeds)
    for i, part in enumerate(("fwd", "bwd")):
        nan = np.isnan(ref[i])
        ok = np.isfinite(want[i]) & np.isfinite(got[i])
        scale = max(1.0, float(np.abs(want[i][ok]).max(initial=0)))
        out[f"{name}_{part}"] = {
            "bits": got[i][~nan].tobytes() == ref[i][~nan].tobytes(),
            "err": float(np.abs(got[i][ok] - want[i][ok]).max(initial=0)) / scale,
            "nan": bool((np.isnan(got[i]) == nan).all())}

def cases():
    fft("pow2_f32", [3, 512], "f32")
    fft("pow2_f64_fwd_inv", [2, 3, 128], "f64", True, "Forward")
    fft("blue_f32", [5, 2 * 37], "f32", True, "Ortho")
    fft("blue_f64", [2, 2 * 100], "f64")
    fft("c64_pow2", [4, 256], "c64", False, "Ortho")
    fft("c64_blue", [3, 45], "c64", True)
    fft("c64_one", [5, 1], "c64", True, "Forward")
    fft("f32_one", [3, 2], "f32")
    mel("mel", 7, 64, 10)
'''


def _sim(body: str) -> dict:
    code = textwrap.dedent(_SIM) + textwrap.dedent(body) + "\nprint(json.dumps(out))\n"
    run = subprocess.run([sys.executable, "-c", code], env=SIM_ENV, capture_output=True,
                         text=True, timeout=900, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def _check_fft(out: dict) -> None:
    assert {k: v["bits"] for k, v in out.items()} == {k: True for k in out}, out
    assert {k: v["nan"] for k, v in out.items()} == {k: True for k in out}, out
    worst = {k: v["err"] for k, v in out.items()}
    assert all(e < (1e-12 if "f64" in k else 1e-5) for k, e in worst.items()), worst
    assert {"mel_fwd", "mel_bwd", "c64_blue", "pow2_f32"} <= set(out)


def test_fft_gives_numba_cpus_bits_on_the_simulator():
    _check_fft(_sim("cases()"))


def test_fft_does_not_depend_on_the_launch_shape():
    # odd grids: every grid-stride loop strides differently, and rows straddle blocks
    _check_fft(_sim("device.SIM_THREADS, device.SIM_MAX_BLOCKS = 5, 3\ncases()"))


def test_butterfly_stage_matches_the_oracle_bit_for_bit_on_the_simulator():
    out = _sim('''
        def stage(name, batch, n_fft, st):
            half = n_fft // 2
            g = rlx_ref.Graph(name)
            ins = [g.input("state", [batch, n_fft, 2])] + [g.input(v, [half]) for v in
                                                            ("gate", "rev", "twr", "twi")]
            g.set_outputs([g.op("FftButterflyStage", ins, stage=st, n_fft=n_fft)])
            feeds = {"state": rng.standard_normal((batch, n_fft, 2)).astype(np.float32),
                     "gate": (rng.random(half) < 0.7).astype(np.float32),
                     "rev": rng.random(half).astype(np.float32),
                     "twr": rng.standard_normal(half).astype(np.float32),
                     "twi": rng.standard_normal(half).astype(np.float32)}
            got = cuda.compile(g).run(feeds)[0]
            want = rlx_ref.interpret(g, feeds)[0]
            out[name] = got.dtype == want.dtype and got.tobytes() == want.tobytes()

        stage("s0", 3, 64, 0)
        stage("s3", 2, 48, 3)
        device.SIM_THREADS, device.SIM_MAX_BLOCKS = 5, 3
        stage("last_odd_grid", 3, 32, 4)
    ''')
    assert out == {k: True for k in out}, out


def test_complex_kinds_match_the_oracle_bit_for_bit_on_the_simulator():
    out = _sim('''
        z = (rng.standard_normal((5, 67)) + 1j * rng.standard_normal((5, 67))).astype(
            np.complex64)
        z.reshape(-1)[:4] = [complex(np.nan, 1), complex(np.inf, -0.0), complex(3e19, 2),
                             complex(-0.0, 0.0)]
        gz = rng.standard_normal((5, 67)).astype(np.float32)
        for kind, extra in (("ComplexNormSq", ()), ("Conjugate", ()),
                            ("ComplexNormSqBackward", ("g",))):
            g = rlx_ref.Graph(kind)
            ins = [g.input("z", [5, 67], "c64")] + [g.input(n, [5, 67]) for n in extra]
            g.set_outputs([g.op(kind, ins)])
            feeds = {"z": z, "g": gz} if extra else {"z": z}
            got = cuda.compile(g).run(feeds)[0]
            want = rlx_ref.interpret(g, feeds)[0]
            nan = np.isnan(want)
            out[kind] = (got.dtype == want.dtype and bool((np.isnan(got) == nan).all())
                         and got[~nan].tobytes() == want[~nan].tobytes())
    ''')
    assert out == {k: True for k in out}, out
