"""ONNX's backend node tests as an external suite: one case imported, run and judged.

A case is one of ``onnx.backend.test.case.node.collect_testcases()``: a model, its input
arrays and ONNX's expected outputs. ``run_case`` imports it (graph inputs that RLX needs
at import time, such as a Reshape's shape, are taken from the case's inputs), runs it on
each backend and compares every output with ONNX's: same dtype, same shape, and values
within the graph's accuracy contract (``conformance.accuracy``; integer and bool outputs
exact). Statuses: pass, fail (with the worst differences), not_mappable (with the ops).
"""
from __future__ import annotations

import contextlib
import fnmatch
import warnings

import numpy as np

PASS, FAIL, DIFFERS, NOT_MAPPABLE = "pass", "fail", "differs", "not_mappable"
STATUSES = (PASS, FAIL, DIFFERS, NOT_MAPPABLE)
FAST_SUBSET = 150


@contextlib.contextmanager
def quiet():
    """ONNX's case generators compute expected outputs with numpy: silence its warnings."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


def collect(op_glob: str | None = None, subset: str | None = None) -> list:
    """The node cases as ``(name, model bytes, inputs, outputs)``, sorted by name."""
    with quiet():
        from onnx.backend.test.case.node import collect_testcases

        cases = collect_testcases()
    out = []
    for c in sorted(cases, key=lambda c: c.name):
        ops = {n.op_type for n in c.model.graph.node}
        if op_glob and not any(fnmatch.fnmatchcase(o, op_glob) for o in ops):
            continue
        ins, outs = c.data_sets[0]
        out.append((c.name, c.model.SerializeToString(), list(ins), list(outs)))
    if subset == "fast":
        out = fast_subset(out)
    elif subset:
        raise ValueError(f"unknown subset {subset!r}; expected 'fast'")
    return out


def fast_subset(cases: list) -> list:
    """About FAST_SUBSET cases spread evenly over the sorted names (deterministic)."""
    step = max(len(cases) // FAST_SUBSET, 1)
    return cases[::step]


def run_case(name: str, model_bytes: bytes, inputs: list, expected: list,
             backends: tuple) -> dict:
    """``{backend: (status, detail)}`` for one case; never raises."""
    import onnx

    from .load import OnnxImportError, import_model

    model = onnx.load_from_string(model_bytes)
    feeds = {vi.name: _typed(_array(a), vi) for vi, a in zip(_graph_inputs(model), inputs)}
    try:
        with quiet():
            imp = import_model(model, static_inputs=feeds)
    except OnnxImportError as e:
        ops = sorted({p.op_type for p in e.problems}) or ["(model)"]
        why = "; ".join(str(p) for p in e.problems) or str(e)
        return {b: (NOT_MAPPABLE, {"ops": ops, "why": why[:2000]}) for b in backends}
    except Exception as e:  # noqa: BLE001 - the verifier or a builder rejected the graph
        return {b: (NOT_MAPPABLE, {"ops": ["(verify)"], "why": f"{type(e).__name__}: {e}"})
                for b in backends}
    g = imp.graph
    run_in = {n.attrs.name: feeds[n.attrs.name] for n in g.input_nodes()}
    res = {}
    for b in backends:
        try:
            with quiet():
                got = _execute(b, g, run_in, imp.params)
            want = [_typed(_array(e), vo) for e, vo in zip(expected, model.graph.output)]
            res[b] = judge(g, got, want)
        except Exception as e:  # noqa: BLE001 - a run error is this case's failure
            res[b] = (FAIL, {"error": f"{type(e).__name__}: {str(e)[:1000]}"})
    return res


def _array(a):
    """An input as an array; sequences and optionals stay as they are (they do not map)."""
    import onnx

    if isinstance(a, onnx.TensorProto):
        from onnx import numpy_helper

        return numpy_helper.to_array(a)
    try:
        return np.asarray(a)
    except ValueError:
        return a


def _typed(a, vi):
    """ONNX stores some cases' 16-bit float data as object arrays: give them their dtype."""
    if not isinstance(a, np.ndarray) or a.dtype != object:
        return a
    from .context import ONNX_DTYPES

    dt = ONNX_DTYPES.get(vi.type.tensor_type.elem_type)
    try:
        return a.astype(dt.np) if dt is not None else a
    except (TypeError, ValueError):
        return a


def _graph_inputs(model) -> list:
    inits = {t.name for t in model.graph.initializer}
    return [vi for vi in model.graph.input if vi.name not in inits]


def _execute(backend: str, graph, inputs: dict, params: dict) -> list:
    if backend == "reference":
        from ..interpret import Interpreter

        return Interpreter(graph).run(inputs, params)
    from ..runtime.session import Session

    exe = Session(backend).compile(graph)
    for k, v in params.items():
        exe.set_param(k, v)
    return exe.run(inputs)


def contract(graph, dtype):
    """The contract for comparing with ONNX: the graph's composite contract, counted twice
    (ONNX's expected values carry their own rounding, of the same size as ours)."""
    from ..conformance import accuracy as A

    return A.composite([A.graph_work(graph, dtype)], 2, f"@{graph.name} vs ONNX")


def judge(graph, got: list, expected: list):
    """(status, detail) of a run's outputs against ONNX's expected outputs."""
    from ..conformance.compare import compare
    from ..ir.dtype import DType
    from ..ir.shape import Shape

    if len(got) != len(expected):
        return FAIL, {"error": f"{len(got)} outputs, ONNX expects {len(expected)}"}
    worst_abs = worst_rel = 0.0
    for i, (g, e) in enumerate(zip(got, expected)):
        g = np.asarray(g)
        if g.dtype != e.dtype:
            return FAIL, {"error": f"output {i}: dtype {g.dtype}, ONNX expects {e.dtype}"}
        if g.shape != e.shape:
            return FAIL, {"error": f"output {i}: shape {list(g.shape)}, ONNX expects "
                                   f"{list(e.shape)}"}
        try:
            dt = DType.of(e)
        except Exception:  # noqa: BLE001
            return FAIL, {"error": f"output {i}: ONNX's dtype {e.dtype} has no RLX dtype"}
        wide = e.astype(np.complex128 if dt.is_complex else np.float64) \
            if (dt.is_float or dt.is_complex) else e
        v = compare(g, wide, None, Shape(list(e.shape), dt), contract(graph, dt))
        worst_abs = max(worst_abs, v.max_abs or 0.0)
        worst_rel = max(worst_rel, v.max_rel or 0.0)
        if not v.ok:
            return FAIL, {"output": i, "max_abs": v.max_abs, "max_rel": v.max_rel,
                          "error": v.message[:1000]}
    return PASS, {"max_abs": worst_abs, "max_rel": worst_rel}
