"""Standalone repros: a failing case as graph text + inputs + a runnable script.

    repros/<backend>/<case id>/
        graph.rlx      the graph in RLX's text form
        inputs.npz     the inputs (params.npz the params, if any)
        meta.json      backend spec, case id/op/dtype/tags, the case's own contract (if
                       any), the result seen
        repro.py       `python repro.py` re-runs the backend and the oracle and compares;
                       its docstring gives the `rlx-ref diff` line that names the first
                       node departing from the oracle
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np

from .._atomic import atomic_open, write_json, write_text
from .._readers import FileInputError, load_npz, read_json, read_text

SCRIPT = '''"""Repro for conformance case {case_id} ({op}, {dtype}) on backend {backend}.

Seen: {status}: {message}
Run:  python repro.py      (exit status 0 = passes now, 1 = still failing)
Diff: {diff}
      (names the first node where the backend departs from the oracle)
"""
import sys
from pathlib import Path

from rlx_ref.conformance.repro import rerun

sys.exit(rerun(Path(__file__).resolve().parent))
'''


def _safe(name: str) -> str:
    """A folder name: no colon (``opencl:0:1``, ``pkg.mod:Backend``), which Windows and
    Python's import path reject; the full spec stays in meta.json."""
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", name)


# the scalar fields of a case's own contract (generated cases set only these)
_ACCURACY_FIELDS = ("kind", "ulps", "ulps_16", "floor", "floor_cap", "floor_min", "c", "k",
                    "scale", "mean", "work", "signed_zeros", "per_step", "ftz", "reason")


def _accuracy_meta(acc) -> dict | None:
    if acc is None:
        return None
    return {f: getattr(acc, f) for f in _ACCURACY_FIELDS
            if isinstance(getattr(acc, f), (bool, int, float, str, type(None)))}


def _accuracy_of(raw):
    from .accuracy import Accuracy

    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) - set(_ACCURACY_FIELDS):
        raise TypeError(f"accuracy must be an object with keys from {_ACCURACY_FIELDS}")
    return Accuracy(**raw)


def write_repro(root, backend_spec: str, case, result) -> str:
    """Write the repro folder for ``case``; returns its path."""
    d = Path(root) / _safe(backend_spec) / _safe(case.id)
    d.mkdir(parents=True, exist_ok=True)
    write_text(d / "graph.rlx", case.graph.to_text())
    with atomic_open(d / "inputs.npz") as f:
        np.savez(f, **case.inputs)
    if case.params:
        with atomic_open(d / "params.npz") as f:
            np.savez(f, **case.params)
    meta = {"backend": backend_spec, "case_id": case.id, "op": case.op, "dtype": case.dtype,
            "tags": list(case.tags), "noncontiguous": list(case.noncontiguous),
            "seed": case.seed, "source": case.source,
            "expect_error": list(case.expect_error),
            "accuracy": _accuracy_meta(case.accuracy),
            "seen": {"status": result.status, "message": result.message}}
    write_json(d / "meta.json", meta, indent=2)
    first = (result.message or "").splitlines()[0] if result.message else ""
    write_text(d / "repro.py", SCRIPT.format(
        case_id=case.id, op=case.op, dtype=case.dtype, backend=backend_spec,
        status=result.status, message=first.replace('"""', "'''"),
        diff=diff_command(backend_spec, bool(case.params))))
    return str(d)


def diff_command(backend_spec: str, params: bool) -> str:
    """The ``rlx-ref diff`` line to run inside a repro folder."""
    import shlex

    return (f"rlx-ref diff graph.rlx --backend {shlex.quote(backend_spec)} --inputs inputs.npz"
            + (" --params params.npz" if params else ""))


META = "a repro folder's meta.json written by `rlx-ref conformance` (backend, case_id, ...)"
_META_KEYS = ("backend", "case_id", "op", "dtype", "tags", "noncontiguous")


def load_case(folder):
    """Rebuild the Case stored in a repro folder; FileInputError names a bad file."""
    from ..ir.text import parse
    from .model import Case

    d = Path(folder)
    meta = read_json(d / "meta.json", META)
    if not isinstance(meta, dict) or not all(k in meta for k in _META_KEYS):
        raise FileInputError(d / "meta.json", "lacks some of " + ", ".join(_META_KEYS), META)
    inputs = load_npz(d / "inputs.npz")
    params = load_npz(d / "params.npz") if (d / "params.npz").exists() else {}
    graph_file = d / "graph.rlx"
    try:
        graph = parse(read_text(graph_file, "the case's graph in RLX's text form"))
    except (ValueError, RecursionError) as e:
        if isinstance(e, FileInputError):
            raise
        raise FileInputError(graph_file, str(e), "the case's graph in RLX's text form") from None
    try:
        case = Case(str(meta["case_id"]), str(meta["op"]), str(meta["dtype"]),
                    tuple(meta["tags"]), graph, inputs, params, tuple(meta["noncontiguous"]),
                    int(meta.get("seed", 0)), str(meta.get("source", "")),
                    accuracy=_accuracy_of(meta.get("accuracy")),
                    expect_error=tuple(meta.get("expect_error", ())))
    except (TypeError, ValueError) as e:
        raise FileInputError(d / "meta.json", f"a field has the wrong type: {e}", META) from None
    return case, meta


def rerun(folder) -> int:
    """Re-run a repro: print the backend's result against the oracle; 0 when it passes."""
    from ..backends.registry import get_backend
    from .ledger import Ledger
    from .model import PASSING
    from .runner import run_case

    try:
        case, meta = load_case(folder)
    except FileInputError as e:
        print(f"repro: {e}", file=sys.stderr)
        return 2
    backend = get_backend(meta["backend"])
    result = run_case(backend, case, Ledger([]))
    print(f"case {case.id} ({case.op}, {case.dtype}, tags {', '.join(case.tags) or '-'})")
    print(f"backend {backend.name}: {result.status}")
    if result.message:
        print(result.message)
    print(f"graph:\n{case.graph.to_text()}", file=sys.stderr)
    if result.status not in PASSING:
        print(f"node by node: cd {Path(folder)} && "
              f"{diff_command(meta['backend'], bool(case.params))}", file=sys.stderr)
    return 0 if result.status in PASSING else 1
