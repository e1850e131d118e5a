"""vmap: every batching rule against per-example runs of the oracle.

For each kind with a rule, small conformance cases are batched with several ``in_axes``
patterns (every operand batched, one operand at a time, the batch last, mixed axes); the
batched graph on stacked inputs must equal the original graph run once per example.
"""
import numpy as np
import pytest

from rlx_ref.autodiff import batch_kinds, vmap
from rlx_ref.conformance.cases import is_index_input
from rlx_ref.interpret import InterpretError, interpret
from rlx_ref.ops.opdef import get

B = 3
TOL = {"f64": 1e-9, "f32": 2e-5, "f16": 4e-3, "bf16": 3e-2}
# rows of an index tuple (GatherNd, ScatterNd) move together; other index operands permute
TUPLE_INDICES = ("GatherNd", "ScatterNd")


def _index_names(case) -> set:
    out = set()
    for n in case.graph.nodes:
        if n.kind in ("Input", "Param"):
            continue
        for pos, src in enumerate(n.inputs):
            leaf = case.graph.nodes[src]
            if leaf.kind in ("Input", "Param") and is_index_input(get(n.kind), pos):
                out.add(leaf.attrs.name)
    return out


def _examples(case, name: str, arr, rng) -> list:
    """``B`` per-example values of one leaf, each valid where the original is: floats
    scaled by up to ±5% (signs, zeros and specials kept), other values permuted."""
    arr = np.asarray(arr)
    out = [arr]
    for _ in range(1, B):
        if name in _index_names(case) or arr.dtype.kind not in "fcV":
            if arr.ndim and arr.size and case.op in TUPLE_INDICES and name in _index_names(case):
                rows = arr.reshape(-1, arr.shape[-1])
                out.append(rows[rng.permutation(len(rows))].reshape(arr.shape))
            else:
                out.append(rng.permutation(arr.reshape(-1)).reshape(arr.shape))
        else:
            scale = 1 + 0.05 * rng.uniform(-1, 1, arr.shape)
            with np.errstate(all="ignore"):
                out.append((arr.astype(np.complex128 if arr.dtype.kind == "c" else np.float64)
                            * scale).astype(arr.dtype))
    return out


def _patterns(case) -> list:
    """in_axes dicts: all at 0, each leaf alone (at 0, then last), all last, mixed axes."""
    leaves = {**case.inputs, **case.params}
    ranks = {k: np.ndim(v) for k, v in leaves.items()}
    pats = [{k: 0 for k in leaves}]
    if len(leaves) > 1:
        pats += [{k: (0 if k == name else None) for k in leaves} for name in leaves]
        pats += [{k: (ranks[k] if k == name else None) for k in leaves} for name in leaves]
    pats.append({k: ranks[k] for k in leaves})
    pats.append({k: i % (ranks[k] + 1) for i, k in enumerate(leaves)})
    out = []
    for p in pats:
        if p not in out:
            out.append(p)
    return out


def _close(got, want, dtype: str, what: str):
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    if want.dtype.kind not in "fcV":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    g64 = got.astype(np.complex128 if want.dtype.kind == "c" else np.float64)
    w64 = want.astype(g64.dtype)
    finite = np.isfinite(w64)
    scale = max(1.0, float(np.abs(w64[finite]).max())) if finite.any() else 1.0
    tol = TOL.get(dtype, 2e-5)
    np.testing.assert_allclose(g64, w64, rtol=tol, atol=tol * scale, equal_nan=True,
                               err_msg=what)


def _split(case, feeds: dict) -> tuple:
    inputs = {k: v for k, v in feeds.items() if k in case.inputs}
    params = {k: v for k, v in feeds.items() if k in case.params}
    return inputs, params


def check_case(case, pattern: dict, rng) -> None:
    """The batched graph on stacked examples equals one run per example."""
    leaves = {**case.inputs, **case.params}
    examples = {k: _examples(case, k, v, rng) for k, v in leaves.items()}
    per_example = []
    for j in range(B):
        feeds = {k: (examples[k][j] if pattern[k] is not None else np.asarray(v))
                 for k, v in leaves.items()}
        try:
            per_example.append(interpret(case.graph, *_split(case, feeds)))
        except InterpretError:
            return      # a perturbed example left the op's domain: nothing to compare
    vg = vmap(case.graph, pattern, B)
    stacked = {k: (np.stack(examples[k], axis=pattern[k]) if pattern[k] is not None
                   else np.asarray(v)) for k, v in leaves.items()}
    got = interpret(vg, *_split(case, stacked))
    for o, out in enumerate(got):
        want = np.stack([r[o] for r in per_example])
        if out.shape != want.shape:         # an output no batched value reaches
            want = per_example[0][o]
        _close(out, want, case.dtype, f"{case.id} ({case.source}) in_axes {pattern}, "
                                      f"output {o}\n{case.graph.to_text()}")


def _usable(case) -> bool:
    return (not case.expect_error and case.graph.outputs
            and all(n.shape.is_static and (n.shape.numel or 0) <= 2048
                    for n in case.graph.nodes))


def cases_for(kind: str, limit: int = 10) -> list:
    """Small cases of ``kind``: one per (operand shapes, payload) in 32/64-bit dtypes, then
    one per remaining dtype."""
    from rlx_ref.conformance.cases import build_cases

    cases = [c for c in build_cases(kind) if c.op == kind and _usable(c)]
    seen, out = set(), []
    for c in cases:
        node = c.graph.nodes[c.graph.outputs[0]]
        key = (tuple(np.shape(v) for v in c.inputs.values()), str(node.op))
        if c.dtype not in ("f16", "bf16") and key not in seen:
            seen.add(key)
            out.append(c)
    out = out[:limit]
    dtypes = {c.dtype for c in out}
    for c in cases:
        if c.dtype not in dtypes:
            dtypes.add(c.dtype)
            out.append(c)
    return out


@pytest.mark.parametrize("kind", batch_kinds())
def test_every_rule_matches_per_example_runs(kind):
    cases = cases_for(kind)
    if not cases:
        pytest.skip(f"no static case of {kind}")
    rng = np.random.default_rng(7)
    checked = 0
    for case in cases:
        try:
            interpret(case.graph, case.inputs, case.params)
        except InterpretError:
            continue
        for pattern in _patterns(case):
            check_case(case, pattern, rng)
            checked += 1
    assert checked, f"no case of {kind} ran on the oracle"
