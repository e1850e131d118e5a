"""The CUDA backend's quant kernels on numba's CUDA simulator (tiny shapes: it runs a
Python thread per CUDA thread), against ``rlx_ref.quant.dequant`` and the oracle.

Each check runs in a child process with NUMBA_ENABLE_CUDASIM=1 (the simulator is chosen
when numba.cuda is first imported). The PTX half lives in test_numba_cuda_quant.py.
"""
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
QUANT_KINDS = ("Quantize", "Dequantize", "QMatMul", "QConv2d", "DequantMatMul",
               "GroupedMatMul", "DequantGroupedMatMul", "DequantMoEWeights", "LoraMatMul")
GGUF = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
        "Q8_K", "IQ4_NL", "IQ4_XS", "TQ1_0", "TQ2_0", "MXFP4", "NVFP4")


def _sim(code: str, timeout: int = 600) -> dict:
    """Run ``code`` on the simulator; it prints one JSON line last."""
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=SIM_ENV,
                         check=False, capture_output=True, text=True, timeout=timeout)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


_PRELUDE = '''
    import json
    import numpy as np, rlx_ref
    from rlx_ref.backends.registry import get_backend
    from rlx_ref.ir.shape import Shape
    from rlx_ref.quant import dequant, get_scheme, quantize
    b = get_backend("cuda")
    rng = np.random.default_rng(7)
    out = {}

    def same_bits(got, want):
        nan = np.isnan(got) & np.isnan(want)
        return bool(((got.view(np.uint32) == want.view(np.uint32)) | nan).all())
'''


def test_f16_f32_and_scale_fields_decode_exactly_on_the_simulator():
    """Every f16 bit pattern, f32 specials and every E8M0/UE4M3 scale byte decode to the
    exact value the numpy decoders give (signed zeros, subnormals, inf and NaN)."""
    out = _sim(_PRELUDE + '''
    from numba import cuda
    from rlx_ref.backends.numba_cuda._quant_device import _f16, _f32le, _ue4m3_half
    from rlx_ref.backends.numba_cuda._quant_device_int import _e8m0
    from rlx_ref.quant.blocks_nonlinear import _UE4M3_HALF
    from rlx_ref.ops._quant_linear import _e8m0 as e8m0_ref

    @cuda.jit
    def fields(h, f, c, o16, o32, oue, oe8):
        i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        while i < o16.size:
            o16[i] = _f16(h, 2 * i)
            if i < o32.size:
                o32[i] = _f32le(f, 4 * i)
            if i < oue.size:
                oue[i] = _ue4m3_half(np.int32(c[i]))
                oe8[i] = _e8m0(np.int32(c[i]))
            i += cuda.gridDim.x * cuda.blockDim.x

    # every sign and exponent with its edge mantissas, and a stride through the rest (the
    # simulator runs each thread step in Python: all 65,536 halves took minutes)
    edges = np.array([0, 1, 2, 0x1FF, 0x200, 0x3FE, 0x3FF])
    h = np.unique(np.concatenate([np.arange(0, 65536, 61),
                                  ((np.arange(64)[:, None] << 10) | edges).ravel()]))
    h = h.astype(np.uint16)
    f = np.array([0, 1, 0x7FFFFF, 0x800000, 0x3F800000, 0x7F7FFFFF, 0x7F800000,
                  0xFF800000, 0x7FC00000, 0x80000000, 0x80000001], np.uint32)
    f = np.concatenate([f, rng.integers(0, 2**32, 245, dtype=np.uint32)])
    c = np.arange(256, dtype=np.uint8)
    o16, o32 = np.zeros(h.size, np.float32), np.zeros(f.size, np.float32)
    oue, oe8 = np.zeros(256, np.float32), np.zeros(256, np.float32)
    fields[2, 32](h.view(np.uint8), f.view(np.uint8), c, o16, o32, oue, oe8)
    out["f16"] = same_bits(o16, h.view(np.float16).astype(np.float32))
    out["f32"] = same_bits(o32, f.view(np.float32))
    out["ue4m3"] = same_bits(oue, _UE4M3_HALF)
    with np.errstate(over="ignore"):
        out["e8m0"] = same_bits(oe8, e8m0_ref(c))
    print(json.dumps(out))
    ''')
    assert out == {"f16": True, "f32": True, "ue4m3": True, "e8m0": True}


def test_dequant_kernel_is_bit_exact_for_every_scheme():
    """DequantMoEWeights (the dequant-only kernel) against ``rlx_ref.quant.dequant`` on
    random bytes (any scale field, inf and NaN included) and on quantized weights."""
    out = _sim(_PRELUDE + f'''
    for name in {GGUF!r}:
        sd = get_scheme(name)
        e, n, k = 2, 3, sd.block_size
        raw = rng.integers(0, 256, e * n * sd.block_bytes, dtype=np.uint8)
        good = quantize(rng.standard_normal(e * n * k).astype(np.float32), name)
        g = rlx_ref.Graph("moe")
        w = g.input("w", [raw.size], "u8")
        g.set_outputs([g.op("DequantMoEWeights", [w], scheme=sd.rlx,
                            shape=Shape((e, k, n), "f32"))])
        exe = b.compile(g)
        res = []
        for packed in (raw, good):
            got = exe.run({{"w": packed}})[0]
            want = dequant(packed, name).reshape(e, n, k).transpose(0, 2, 1)
            res.append(same_bits(got, np.ascontiguousarray(want)))
        out[name] = res
    print(json.dumps(out))
    ''')
    assert out == {name: [True, True] for name in GGUF}


def test_codebook_schemes_run_the_declared_host_step():
    """IQ2/IQ3/IQ1 have no CUDA decoder: their DequantMatMul and DequantMoEWeights nodes
    run the host reference (no kernel launch) and give the oracle's values."""
    out = _sim(_PRELUDE + '''
    from rlx_ref.backends.numba_cuda.executable import Plan
    from rlx_ref.passes import compile_pipeline
    for name in ("IQ2_XXS", "IQ3_S", "IQ1_M"):
        sd = get_scheme(name)
        k, n = sd.block_size, 2
        raw = rng.integers(0, 256, n * sd.block_bytes, dtype=np.uint8)
        g = rlx_ref.Graph("cb")
        xi, wi = g.input("x", [1, k]), g.input("w", [raw.size], "u8")
        g.set_outputs([g.op("DequantMatMul", [xi, wi], scheme=sd.rlx,
                            shape=Shape((1, n), "f32")),
                       g.op("DequantMoEWeights", [wi], scheme=sd.rlx,
                            shape=Shape((1, k, n), "f32"))])
        feeds = {"x": rng.standard_normal((1, k)).astype(np.float32), "w": raw}
        got = b.compile(g).run(feeds)
        want = rlx_ref.interpret(g, feeds)
        lowered, _ = compile_pipeline(g, b, None)
        steps = Plan(lowered, None, None).steps
        out[name] = [same_bits(got[0], want[0]), same_bits(got[1], want[1]),
                     sorted(step.note for _, step in steps if step.note),
                     len(Plan(lowered, None, None).launches())]
    print(json.dumps(out))
    ''')
    for name, (mm, moe, notes, launches) in out.items():
        assert mm and moe, name
        assert notes == [f"host reference: no CUDA decoder for {name}"] * 2, notes
        assert launches == 0


def test_gemv_and_tiled_products_match_the_oracle_for_every_scheme():
    """DequantMatMul with one x row (GEMV) and with two (tiled), K one or two blocks, N up
    to 4, against the oracle."""
    out = _sim(_PRELUDE + f'''
    for name in {GGUF!r}:
        sd = get_scheme(name)
        k = sd.block_size * (2 if sd.block_size == 32 else 1)
        for m, n in ((1, 4), (2, 3)):
            w = quantize(rng.standard_normal(n * k).astype(np.float32), name)
            x = rng.standard_normal((m, k)).astype(np.float32)
            g = rlx_ref.Graph("dmm")
            xi, wi = g.input("x", [m, k]), g.input("w", [w.size], "u8")
            g.set_outputs([g.op("DequantMatMul", [xi, wi], scheme=sd.rlx,
                                shape=Shape((m, n), "f32"))])
            got = b.compile(g).run({{"x": x, "w": w}})[0].astype(np.float64)
            dense = dequant(w, name).reshape(n, k).astype(np.float64)
            want = x.astype(np.float64) @ dense.T
            scale = np.abs(x).astype(np.float64) @ np.abs(dense).T
            out[f"{{name}} m={{m}}"] = float(np.max(np.abs(got - want) / scale))
    print(json.dumps(out))
    ''')
    assert len(out) == 2 * len(GGUF)
    # f32 accumulation over at most 512 terms: a few ulps of the terms' magnitude
    assert all(v < 2e-6 for v in out.values()), out


def test_hardware_tilings_and_eight_warp_gemv_on_the_simulator():
    """The simulator normally runs an 8x8 tile of 16 threads and one-warp GEMV blocks;
    here the tilings a GPU gets (128x128 and 64x64 tiles of 256 threads, eight warps per
    GEMV block) run on ragged shapes (two column tiles, sub-blocks of 16 and 32)."""
    out = _sim(_PRELUDE + '''
    from rlx_ref.backends.numba_cuda import _quant_kernels as K, device
    device.SIM_THREADS = 256
    for tiles in ("BIG", "SMALL"):
        K.SIM = getattr(K, tiles)
        for name, m, n in (("Q4_K", 3, 70), ("Q6_K", 1, 9), ("Q5_0", 2, 130)):
            sd = get_scheme(name)
            k = sd.block_size
            w = quantize(rng.standard_normal(n * k).astype(np.float32), name)
            x = rng.standard_normal((m, k)).astype(np.float32)
            g = rlx_ref.Graph("dmm")
            xi, wi = g.input("x", [m, k]), g.input("w", [w.size], "u8")
            g.set_outputs([g.op("DequantMatMul", [xi, wi], scheme=sd.rlx,
                                shape=Shape((m, n), "f32"))])
            got = b.compile(g).run({"x": x, "w": w})[0].astype(np.float64)
            dense = dequant(w, name).reshape(n, k).astype(np.float64)
            want = x.astype(np.float64) @ dense.T
            scale = np.abs(x).astype(np.float64) @ np.abs(dense).T
            out[f"{tiles} {name} m={m}"] = float(np.max(np.abs(got - want) / scale))
    print(json.dumps(out))
    ''')
    assert len(out) == 6
    assert all(v < 2e-6 for v in out.values()), out


_GROUPED = '''
    from rlx_ref.backends.numba_cuda import kernels
    calls = [0]
    real = kernels.Launch.__call__
    def counted(self, *a):
        calls[0] += 1
        return real(self, *a)
    kernels.Launch.__call__ = counted

    def grouped(name, m, n, e, ids):
        sd = get_scheme(name)
        k = sd.block_size
        w = quantize(rng.standard_normal(e * n * k).astype(np.float32), name)
        g = rlx_ref.Graph("moe")
        xi, wi, ii = g.input("x", [m, k]), g.input("w", [w.size], "u8"), g.input("i", [m])
        g.set_outputs([g.op("DequantGroupedMatMul", [xi, wi, ii], scheme=sd.rlx,
                            shape=Shape((m, n), "f32"))])
        feeds = {"x": rng.standard_normal((m, k)).astype(np.float32), "w": w,
                 "i": np.float32(ids)}
        return g, feeds
'''


def test_grouped_moe_sorts_by_expert_and_unpermutes():
    """Tokens of one expert run one launch (GEMV for a single token, tiled otherwise);
    unused experts launch nothing; each token's row lands where it came from."""
    out = _sim(_PRELUDE + _GROUPED + '''
    for name in ("Q4_0", "Q4_K", "Q6_K", "IQ4_XS", "NVFP4"):
        g, feeds = grouped(name, 5, 3, 4, [3, 0, 3, 3.7, 1])   # expert 2 unused
        exe = b.compile(g)
        calls[0] = 0
        got = exe.run(feeds)[0]
        want = rlx_ref.interpret(g, feeds)[0]
        out[name] = [float(np.max(np.abs(got - want))), calls[0]]
    g = rlx_ref.Graph("bank")
    xi, wi, ii = g.input("x", [4, 6]), g.input("w", [3, 6, 5]), g.input("i", [4])
    g.set_outputs([g.op("GroupedMatMul", [xi, wi, ii])])
    feeds = {"x": rng.standard_normal((4, 6)).astype(np.float32),
             "w": rng.standard_normal((3, 6, 5)).astype(np.float32),
             "i": np.float32([2, 2, 0, 2])}
    calls[0] = 0
    got = b.compile(g).run(feeds)[0]
    out["GroupedMatMul"] = [float(np.max(np.abs(got - rlx_ref.interpret(g, feeds)[0]))),
                            calls[0]]
    print(json.dumps(out))
    ''')
    for name, (err, launches) in out.items():
        assert err < 1e-5, (name, err)
        assert launches == (3 if name != "GroupedMatMul" else 2), (name, launches)


def test_grouped_moe_rejects_bad_expert_ids_before_any_launch():
    out = _sim(_PRELUDE + _GROUPED + '''
    for label, ids in (("range", [0, 3, 1]), ("negative", [0, -1, 1]),
                       ("nan", [0, float("nan"), 1])):
        g, feeds = grouped("Q4_K", 3, 2, 3, ids)
        exe = b.compile(g)
        calls[0] = 0
        try:
            exe.run(feeds)
            msg = "no error"
        except Exception as e:
            msg = str(e).splitlines()[0]
        out[label] = [msg, calls[0]]
    print(json.dumps(out))
    ''')
    assert out["range"][0].endswith("expert_idx[1] = 3 is out of range for 3 experts "
                                    "(expected 0..2)"), out
    assert "expert_idx[1] = -1 is out of range" in out["negative"][0]
    assert "expert_idx[1] = nan is not an integer expert id" in out["nan"][0]
    assert all(msg.startswith("at %3 in @moe:") for msg, _ in out.values()), out
    assert [launches for _, launches in out.values()] == [0, 0, 0]


def test_a_32_element_scheme_walked_with_256_element_blocks_fails():
    """RLX's pitfall: decoding Q4_0 (32-element blocks) with a 256-element block size
    gives wrong products, which conformance reports; the records' sizes give the right
    ones."""
    out = _sim(_PRELUDE + '''
    from dataclasses import replace
    from rlx_ref.backends.numba_cuda import _quant_kernels as K, lower_quant
    name, k, n = "Q4_0", 256, 3
    w = quantize(rng.standard_normal(n * k).astype(np.float32), name)
    x = rng.standard_normal((1, k)).astype(np.float32)
    g = rlx_ref.Graph("dmm")
    xi, wi = g.input("x", [1, k]), g.input("w", [w.size], "u8")
    g.set_outputs([g.op("DequantMatMul", [xi, wi], scheme="GgufQ4_0",
                        shape=Shape((1, n), "f32"))])
    want = rlx_ref.interpret(g, {"x": x, "w": w})[0]
    right = b.compile(g).run({"x": x, "w": w})[0]
    lower_quant.block_of = lambda s: replace(K.block_of(s), qk=256)
    wrong = b.compile(g).run({"x": x, "w": w})[0]
    scale = float(np.abs(want).max())
    out["right"] = float(np.abs(right - want).max()) / scale
    out["wrong"] = float(np.abs(wrong - want).max()) / scale
    print(json.dumps(out))
    ''')
    assert out["right"] < 1e-6 and out["wrong"] > 0.1, out


def test_quant_conformance_cases_pass_on_the_simulator(tmp_path):
    ops = ",".join(QUANT_KINDS + ("multi:grad-Dequant*", "multi:grad-GroupedMatMul",
                                  "multi:grad-LoraMatMul"))
    out = tmp_path / "results.json"
    run = subprocess.run(
        [sys.executable, "-m", "rlx_ref.cli", "conformance", "--backend", "cuda", "--op",
         ops, "--quiet", "--out", str(out), "--repro-dir", str(tmp_path / "repros")],
        env=SIM_ENV, capture_output=True, text=True, timeout=1200, check=False)
    summary = [ln for ln in run.stdout.splitlines() if ln.startswith(("cuda:", "FAIL"))]
    assert run.returncode == 0, "\n".join(summary) + run.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["backends"]["cuda"]["emulated"] is True
    results = doc["results"]
    assert {r["status"] for r in results} == {"ok"}
    assert {r["path"] for r in results if not r["op"].startswith("multi:")} == {"native"}
    assert {r["op"] for r in results} >= set(QUANT_KINDS)
    assert len(results) >= 90
