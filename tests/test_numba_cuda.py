"""The CUDA backend without a GPU: its declaration, availability, and every kernel it
generates for the conformance cases compiled to PTX for an H100/H200 (cc 9.0).

The simulator half lives in test_numba_cuda_sim.py (it needs a fresh process: the
simulator is chosen when numba.cuda is first imported).
"""
import hashlib
import os
import time

import pytest

from rlx_ref.backends.base import BackendUnavailable

pytest.importorskip("numba")
cuda = pytest.importorskip("numba.cuda", reason="numba-cuda is not installed "
                           "(pip install 'numba-cuda[cu13]')")
if not hasattr(cuda, "compile_ptx"):
    pytest.skip("numba.cuda has no compile_ptx (numba-cuda missing or simulator active)",
                allow_module_level=True)

from rlx_ref.backends.registry import get_backend
from rlx_ref.ops.opdef import all_opdefs
from rlx_ref.passes.decompose import DECOMPOSITIONS

CUDA = get_backend("cuda")
SHARDS = 4
_LAUNCHES: dict = {}


def test_declares_every_kind_with_a_path_and_reason():
    table, paths, reasons = CUDA.supported_ops(), CUDA.paths(), CUDA.path_reasons()
    assert {d.kind for d in all_opdefs()} <= set(table)
    for kind, path in paths.items():
        assert path in ("native", "host", "decomposed", "rewritten")
        if path != "native":
            assert reasons.get(kind), f"{kind} runs on the {path} path without a reason"
    native = {k for k, p in paths.items() if p == "native"}
    assert {"Binary", "ElementwiseRegion", "Reduce", "Softmax", "LayerNorm", "RmsNorm",
            "Cumsum", "MatMul", "Gather", "Transpose", "If", "While", "Scan"} <= native
    # every registry kind has a kernel but the ones that are sequential or user-defined,
    # the low-precision codec kinds, and the families added since (quant codecs, sequence
    # models, sort/RNG, factorizations, splats, 3-D kinds: the reference on the host until
    # their CUDA kernels land), and those claimed through a registered decomposition
    host = {k for k, p in paths.items() if p not in ("native", "decomposed")}
    assert {"Custom", "DenseSolve", "BatchedDenseSolve", "ScaledQuantScale", "ScaledQuantize",
            "ScaledDequantize", "ScaledMatMul", "ScaledGroupedMatMul"} <= host
    # the families that had CUDA kernels before the vocabulary grew keep them all
    kernel_families = ("leaves", "elementwise", "linalg", "reduction", "movement",
                       "indexing", "normalization", "attention", "conv", "control", "region")
    later = {"ConvTranspose3d", "AxialRope2d"}  # kernels to come
    assert host - {"Custom", "DenseSolve", "BatchedDenseSolve"} - later <= {
        d.kind for d in all_opdefs() if d.family not in kernel_families}
    assert {k for k, p in paths.items() if p == "decomposed"} <= set(DECOMPOSITIONS)


def test_availability_explains_what_is_missing():
    ok, why = CUDA.availability()
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "") not in ("", "0"):
        assert ok and CUDA.emulated
    elif not ok:
        assert "CUDA" in why or "numba-cuda" in why
        assert not CUDA.emulated
    with pytest.raises(BackendUnavailable, match="GPU number"):     # a spec error, named
        get_backend("cuda:x")
    assert get_backend("cuda:1").index == 1


def _all_launches() -> list:
    """Every distinct (kernel, argument types) the conformance cases make, lowered here."""
    if "all" not in _LAUNCHES:
        from rlx_ref.backends.numba_cuda.ptx_check import launches_of
        from rlx_ref.conformance.cases import build_cases

        seen = {}
        for case in build_cases():
            if CUDA.unsupported_nodes(case.graph):
                continue
            for ln in launches_of(CUDA, case.graph):
                seen.setdefault(ln.key(), ln)
        _LAUNCHES["all"] = list(seen.values())
    return _LAUNCHES["all"]


def _shard_of(launch) -> int:
    digest = hashlib.sha256(repr(launch.key()).encode()).digest()
    return digest[0] % SHARDS


def test_conformance_cases_lower_to_many_distinct_kernels():
    launches = _all_launches()
    families = {ln.kernel.name.split("_")[0] for ln in launches}
    assert {"ew", "reduce", "softmax", "scan", "norm", "matmul", "gather", "move", "attention",
            "rope", "conv", "convt", "pool", "im2col", "arg", "topk", "colnorm", "batchnorm",
            "gatherel", "gathernd", "scatinit", "scatter", "scatfin", "rnguni", "rngnorm",
            "sortinit", "sortpass", "sortout", "smpscale", "smpdraw", "kvappend", "conv3d",
            "interp3d", "s6", "ssd", "gdn", "fftload", "fftstage", "fftout",
            "fftbfly"} <= families
    assert len(launches) > 300


@pytest.mark.parametrize("shard", range(SHARDS))
def test_every_generated_kernel_compiles_to_ptx_for_cc90(shard):
    from rlx_ref.backends.numba_cuda.ptx_check import _DONE, compile_launches

    mine = [ln for ln in _all_launches() if _shard_of(ln) == shard]
    t0 = time.perf_counter()
    result = compile_launches(mine, cc=(9, 0))
    took = time.perf_counter() - t0
    assert result["kernels"] + result["cached"] == len(mine)
    assert all(_DONE[ln.key() + ((9, 0),)][0] > 0 for ln in mine)    # non-empty PTX
    print(f"shard {shard}: {len(mine)} kernels to PTX in {took:.1f}s")


def test_ptx_check_of_one_graph_needs_no_gpu():
    import rlx_ref

    g = rlx_ref.Graph("mlp")
    x = g.input("x", [4, 8])
    w = g.param("w", [8, 3])
    g.set_outputs([g.softmax(g.gelu(g.matmul(x, w)), -1)])
    result = CUDA.ptx_check(g, cc=(9, 0))
    assert result["kernels"] + result["cached"] == 3


def _graph(build):
    import rlx_ref

    g = rlx_ref.Graph("big")
    g.set_outputs(build(g))
    return g


# shapes past the conformance cases' sizes: the tilings and accumulators real models get
_HARDWARE_SHAPES = {
    "matmul_f32_4096": lambda g: [g.matmul(g.input("a", [4096, 4096]),
                                           g.input("b", [4096, 4096]))],
    "matmul_f16_batched": lambda g: [g.matmul(g.input("a", [3, 200, 96], "f16"),
                                              g.input("b", [96, 130], "f16"))],
    "dot_general_bf16": lambda g: [g.op("DotGeneral", [g.input("a", [64, 4, 128], "bf16"),
                                                       g.input("b", [4, 256, 64], "bf16")],
                                        lhs_contracting=(0,), rhs_contracting=(2,),
                                        lhs_batch=(1,), rhs_batch=(0,))],
    "attention_f16_causal": lambda g: [g.op(
        "Attention", [g.input(n, [2, 512, 8, 128], "f16") for n in "qkv"], num_heads=8,
        head_dim=128, mask_kind="Causal", attn_logit_softcap=30.0)],
    "attention_f32_bias_gqa": lambda g: [g.op(
        "Attention", [g.input("q", [1, 8, 256, 64]), g.input("k", [1, 2, 256, 64]),
                      g.input("v", [1, 2, 256, 96]), g.input("m", [1, 8, 256, 256])],
        num_heads=8, head_dim=64, v_head_dim=96, mask_kind="Bias")],
    "conv_f32_resnet": lambda g: [g.op("Conv", [g.input("x", [8, 64, 56, 56]),
                                                g.input("w", [128, 64, 3, 3])],
                                       kernel_size=(3, 3), padding=(1, 1))],
    "conv_transpose_f16": lambda g: [g.op(
        "ConvTranspose2d", [g.input("x", [2, 64, 16, 16], "f16"),
                            g.input("w", [64, 32, 4, 4], "f16")],
        kernel_size=(4, 4), stride=(2, 2), padding=(1, 1))],
}


@pytest.mark.parametrize("name", sorted(_HARDWARE_SHAPES))
def test_hardware_sized_graphs_compile_to_ptx(name):
    result = CUDA.ptx_check(_graph(_HARDWARE_SHAPES[name]), cc=(9, 0))
    assert result["kernels"] + result["cached"] >= 1


def test_matmul_is_register_tiled():
    """The f32 GEMM keeps its 8×8 outputs per thread in registers: one unrolled K step of
    eight is 512 FMAs fed by 128 shared loads, and nothing spills to local memory."""
    import re

    from numba.cuda import compile_ptx

    from rlx_ref.backends.numba_cuda._gemm import BIG
    from rlx_ref.backends.numba_cuda.ptx_check import launches_of, target_cc

    (launch,) = launches_of(CUDA, _graph(_HARDWARE_SHAPES["matmul_f32_4096"]))
    assert "cuda.local.array((8, 8), np.float32)" in launch.kernel.source
    assert BIG.threads == 256
    with target_cc((9, 0)):
        ptx, _ = compile_ptx(launch.kernel.pyfunc, launch.argtypes, cc=(9, 0))
    assert len(re.findall(r"fma\.rn\.f32", ptx)) >= 512
    assert len(re.findall(r"ld\.shared\.f32", ptx)) <= 160
    assert not re.search(r"(ld|st)\.local", ptx)
