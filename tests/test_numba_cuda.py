"""The CUDA backend without a GPU: its declaration, availability, and every kernel it
generates for the conformance cases compiled to PTX for an H100/H200 (cc 9.0).

The simulator half lives in test_numba_cuda_sim.py (it needs a fresh process: the
simulator is chosen when numba.cuda is first imported).
"""
import hashlib
import os
import time

import pytest

pytest.importorskip("numba")
cuda = pytest.importorskip("numba.cuda", reason="numba-cuda is not installed "
                           "(pip install 'numba-cuda[cu13]')")
if not hasattr(cuda, "compile_ptx"):
    pytest.skip("numba.cuda has no compile_ptx (numba-cuda missing or simulator active)",
                allow_module_level=True)

from rlx_ref.backends.registry import get_backend
from rlx_ref.ops.opdef import all_opdefs

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


def test_availability_explains_what_is_missing():
    ok, why = CUDA.availability()
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "") not in ("", "0"):
        assert ok and CUDA.emulated
    elif not ok:
        assert "CUDA" in why or "numba-cuda" in why
        assert not CUDA.emulated
    with pytest.raises(ValueError, match="GPU number"):
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
    assert {"ew", "reduce", "softmax", "scan", "norm", "matmul", "gather", "move"} <= families
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
