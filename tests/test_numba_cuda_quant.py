"""The CUDA backend's quant kernels without a GPU: their declaration, and every kernel
they generate compiled to PTX for an H100/H200 (cc 9.0), including the hardware tilings.

The simulator half lives in test_numba_cuda_quant_sim.py.
"""
import re

import pytest

pytest.importorskip("numba")
try:
    import numba_cuda  # noqa: F401  (the package; numba.cuda is imported where needed)
except ImportError:
    pytest.skip("numba-cuda is not installed (pip install 'numba-cuda[cu13]')",
                allow_module_level=True)

from rlx_ref.backends.registry import get_backend
from rlx_ref.quant import get_scheme

QUANT_KINDS = ("Quantize", "Dequantize", "QMatMul", "QConv2d", "DequantMatMul",
               "GroupedMatMul", "DequantGroupedMatMul", "DequantMoEWeights", "LoraMatMul")
GGUF = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
        "Q8_K", "IQ4_NL", "IQ4_XS", "TQ1_0", "TQ2_0", "MXFP4", "NVFP4")
CUDA = get_backend("cuda")


def _compiler():
    """numba.cuda with compile_ptx, or skip (simulator active or numba-cuda missing)."""
    cuda = pytest.importorskip("numba.cuda")
    if not hasattr(cuda, "compile_ptx"):
        pytest.skip("numba.cuda has no compile_ptx (the simulator is active)")
    return cuda


# ── declaration and PTX ─────────────────────────────────────────────────────

def test_quant_kinds_are_claimed_natively_with_reasons():
    paths, reasons = CUDA.paths(), CUDA.path_reasons()
    for kind in QUANT_KINDS:
        assert paths[kind] == "native", kind
        assert reasons.get(kind), kind
    assert "IQ2/IQ3/IQ1" in reasons["DequantMatMul"]       # the host step is declared


def test_decoders_take_block_sizes_from_the_scheme_records():
    from rlx_ref.backends.numba_cuda._quant_kernels import CH, DECODERS, block_of

    assert set(GGUF) <= set(DECODERS)
    for name in GGUF:
        sd, blk = get_scheme(name), block_of(name)
        assert (blk.qk, blk.bb) == (sd.block_size, sd.block_bytes), name
        assert sd.block_size % blk.sub == 0 and sd.block_size % CH == 0


def _graph(name, build):
    import rlx_ref

    g = rlx_ref.Graph(name)
    g.set_outputs(build(g))
    return g


def _gguf_graphs(scheme: str):
    """DequantMatMul (GEMV, small and prefill tiles), DequantMoEWeights and
    DequantGroupedMatMul graphs for ``scheme`` at hardware sizes (lowered, never run)."""
    from rlx_ref.ir.shape import Shape

    sd = get_scheme(scheme)
    k, n, e = 2 * sd.block_size, 256, 4
    nbytes = n * (k // sd.block_size) * sd.block_bytes
    out = []
    for m in (1, 8, 128):
        out.append(_graph(f"dmm{m}", lambda g, m=m: [g.op(
            "DequantMatMul", [g.input("x", [m, k]), g.input("w", [nbytes], "u8")],
            scheme=sd.rlx, shape=Shape((m, n), "f32"))]))
    out.append(_graph("moe", lambda g: [g.op(
        "DequantMoEWeights", [g.input("w", [e * nbytes], "u8")], scheme=sd.rlx,
        shape=Shape((e, k, n), "f32"))]))
    out.append(_graph("grouped", lambda g: [g.op(
        "DequantGroupedMatMul", [g.input("x", [64, k]), g.input("w", [e * nbytes], "u8"),
                                 g.input("i", [64])], scheme=sd.rlx,
        shape=Shape((64, n), "f32"))]))
    return out


@pytest.mark.parametrize("scheme", GGUF)
def test_gguf_kernels_compile_to_ptx_for_cc90(scheme):
    _compiler()
    from rlx_ref.backends.numba_cuda.ptx_check import launches_of

    kernels = {}
    for g in _gguf_graphs(scheme):
        assert not CUDA.unsupported_nodes(g)
        result = CUDA.ptx_check(g, cc=(9, 0))
        assert result["kernels"] + result["cached"] >= 1
        kernels.update((ln.kernel.name, ln) for ln in launches_of(CUDA, g))
    families = {name.split("_")[0] for name in kernels}
    assert families == {"qgemv", "qtile", "qdeq"}, families
    assert len(kernels) >= 4           # GEMV, two tilings (grouped ones too), dequant


def test_quant_conformance_kernels_compile_to_ptx_for_cc90():
    """Every kernel the conformance cases of the quant kinds launch (4-operand schemes,
    LoRA, grouped, the integer ops) compiles for cc 9.0."""
    _compiler()
    from rlx_ref.backends.numba_cuda.ptx_check import compile_launches, launches_of
    from rlx_ref.conformance.cases import build_cases

    seen = {}
    for case in build_cases(",".join(QUANT_KINDS)):
        assert not CUDA.unsupported_nodes(case.graph), case.id
        for ln in launches_of(CUDA, case.graph):
            seen.setdefault(ln.key(), ln)
    names = {ln.kernel.name.split("_")[0] for ln in seen.values()}
    assert {"qgemv", "qtile", "qdeq", "qdense", "qgroup", "lora", "quantize", "dequantize",
            "qmatmul", "qconv"} <= names, names
    result = compile_launches(list(seen.values()), cc=(9, 0))
    assert result["kernels"] + result["cached"] == len(seen)


@pytest.mark.parametrize("scheme", ["Q4_K", "Q6_K", "Q4_0"])
def test_decode_stays_in_registers_and_integer_arithmetic(scheme):
    """The GEMV and tiled kernels keep each decoded sub-block in registers (no local
    memory) and decode f16 scales with integer and exact f32 operations (no f64)."""
    _compiler()
    from numba.cuda import compile_ptx

    from rlx_ref.backends.numba_cuda._quant_kernels import (BIG, block_of, gemv_launch,
                                                            tiled_launch)
    from rlx_ref.backends.numba_cuda.ptx_check import target_cc

    blk = block_of(scheme)
    for launch in (gemv_launch(blk, 256), tiled_launch(blk, BIG)):
        with target_cc((9, 0)):
            ptx, _ = compile_ptx(launch.kernel.pyfunc, launch.argtypes, cc=(9, 0))
        assert not re.search(r"(ld|st)\.local", ptx), launch.kernel.name
        assert not re.search(r"\.f64", ptx), launch.kernel.name
    assert f"* {blk.bb}" in launch.kernel.source        # the record's block bytes


def test_mlx_affine_rounds_its_product_before_adding_the_bias():
    """numpy rounds ``scale·code`` before ``+ bias``; the loader's ``mul.rn.f32`` keeps
    the code generator from fusing the two into one FMA (one rounding instead of two)."""
    _compiler()
    from numba.cuda import compile_ptx

    from rlx_ref.backends.numba_cuda.ptx_check import launches_of, target_cc
    from rlx_ref.ir.shape import Shape

    g = _graph("mlx", lambda g: [g.op(
        "DequantMatMul", [g.input("x", [2, 64]), g.input("q", [96], "u8"),
                          g.input("s", [3, 2]), g.input("z", [3, 2])],
        scheme=("MlxAffine", {"bits": 4, "group_size": 32}), shape=Shape((2, 3), "f32"))])
    (launch,) = launches_of(CUDA, g)
    with target_cc((9, 0)):
        ptx, _ = compile_ptx(launch.kernel.pyfunc, launch.argtypes, cc=(9, 0))
    assert re.search(r"mul\.rn\.f32", ptx)
