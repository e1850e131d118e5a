"""Standalone repros: a failing case as graph text + inputs + a runnable script.

    repros/<backend>/<case id>/
        graph.rlx      the graph in RLX's text form
        inputs.npz     the inputs (params.npz the params, if any)
        meta.json      backend spec, case id/op/dtype/tags, the result seen
        repro.py       `python repro.py` re-runs the backend and the oracle and compares
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

SCRIPT = '''"""Repro for conformance case {case_id} ({op}, {dtype}) on backend {backend}.

Seen: {status}: {message}
Run:  python repro.py      (exit status 0 = passes now, 1 = still failing)
"""
import sys
from pathlib import Path

from rlx_ref.conformance.repro import rerun

sys.exit(rerun(Path(__file__).resolve().parent))
'''


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.:+-]", "_", name)


def write_repro(root, backend_spec: str, case, result) -> str:
    """Write the repro folder for ``case``; returns its path."""
    d = Path(root) / _safe(backend_spec) / _safe(case.id)
    d.mkdir(parents=True, exist_ok=True)
    (d / "graph.rlx").write_text(case.graph.to_text())
    np.savez(d / "inputs.npz", **case.inputs)
    if case.params:
        np.savez(d / "params.npz", **case.params)
    meta = {"backend": backend_spec, "case_id": case.id, "op": case.op, "dtype": case.dtype,
            "tags": list(case.tags), "noncontiguous": list(case.noncontiguous),
            "seed": case.seed, "source": case.source,
            "expect_error": list(case.expect_error),
            "seen": {"status": result.status, "message": result.message}}
    (d / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    first = (result.message or "").splitlines()[0] if result.message else ""
    (d / "repro.py").write_text(SCRIPT.format(
        case_id=case.id, op=case.op, dtype=case.dtype, backend=backend_spec,
        status=result.status, message=first.replace('"""', "'''")))
    return str(d)


def load_case(folder):
    """Rebuild the Case stored in a repro folder."""
    from ..ir.text import parse
    from .model import Case

    d = Path(folder)
    meta = json.loads((d / "meta.json").read_text())
    with np.load(d / "inputs.npz") as z:
        inputs = {k: z[k] for k in z.files}
    params = {}
    if (d / "params.npz").exists():
        with np.load(d / "params.npz") as z:
            params = {k: z[k] for k in z.files}
    case = Case(meta["case_id"], meta["op"], meta["dtype"], tuple(meta["tags"]),
                parse((d / "graph.rlx").read_text()), inputs, params,
                tuple(meta["noncontiguous"]), meta.get("seed", 0), meta.get("source", ""),
                expect_error=tuple(meta.get("expect_error", ())))
    return case, meta


def rerun(folder) -> int:
    """Re-run a repro: print the backend's result against the oracle; 0 when it passes."""
    from ..backends.registry import get_backend
    from .ledger import Ledger
    from .model import PASSING
    from .runner import run_case

    case, meta = load_case(folder)
    backend = get_backend(meta["backend"])
    result = run_case(backend, case, Ledger([]))
    print(f"case {case.id} ({case.op}, {case.dtype}, tags {', '.join(case.tags) or '-'})")
    print(f"backend {backend.name}: {result.status}")
    if result.message:
        print(result.message)
    print(f"graph:\n{case.graph.to_text()}", file=sys.stderr)
    return 0 if result.status in PASSING else 1
