"""The suite's power: run each catalogued planted fault on its selection and count catches.

A fault is caught when any case of its selection does not pass on the faulty backend
(``numba-cpu+fault:NAME``), which runs the real kernels with one mutation. Cases are built
once; each fault's selection runs in its own worker process, so a faulty kernel never
shares a process (or a module-level kernel memo) with the real backend.
"""
from __future__ import annotations

import time

from .model import PASSING


def fault_cases(fault, cases: list) -> list:
    """The cases of ``fault``'s selection (its op pattern, dtypes and tags)."""
    from .cases import filter_cases

    dtypes = fault.dtypes.split(",") if fault.dtypes else None
    picked = filter_cases(cases, fault.ops, dtypes)
    picked = [c for c in picked if all(t in c.tags for t in fault.tags)
              and (not fault.attr_op or _has_op(c.graph, fault.attr_op))]
    return picked[:fault.limit]


def _has_op(graph, op: str) -> bool:
    nodes = graph.nodes.values() if isinstance(graph.nodes, dict) else graph.nodes
    return any(str(getattr(n.attrs, "op", "")) == op for n in nodes)


def run_fault(fault, cases: list, ledger, *, faulty: bool = True, jobs: int = 1,
              case_timeout=None, in_process: bool = False) -> dict:
    """One fault's row: its selection on the faulty (or, ``faulty=False``, the real)
    backend; ``caught`` is whether any case failed, ``failing`` their ids."""
    from ..backends.registry import get_backend
    from .runner import run_backend

    spec = f"{fault.run_spec}+fault:{fault.name}" if faulty else fault.run_spec
    sel = fault_cases(fault, cases)
    t0 = time.perf_counter()
    row = {"fault": fault.name, "backend": fault.backend, "bug_class": fault.bug_class,
           "variant": fault.variant, "spec": spec, "cases": len(sel), "failing": [],
           "gap": fault.gap}
    if sel:
        backend = get_backend(spec)
        ok, why = backend.availability()
        if not ok:
            raise RuntimeError(f"backend {fault.run_spec!r} is unavailable here: {why}")
        results = run_backend(backend, sel, ledger, jobs=jobs, repro_dir=None, spec=spec,
                              progress=False, in_process=in_process,
                              case_timeout=case_timeout)
        row["failing"] = [f"{r['case_id']} {r['status']}" for r in results
                          if r["status"] not in PASSING]
    row["caught"] = bool(row["failing"])
    row["seconds"] = round(time.perf_counter() - t0, 2)
    return row


def run_power(faults: list, ledger, *, seed: int = 0, jobs: int = 1, case_timeout=None,
              progress=print) -> list[dict]:
    """Every fault's row (see ``run_fault``), the cases built once for all of them."""
    from .cases import build_cases

    cases = build_cases(seed=seed)
    rows = []
    for f in faults:
        row = run_fault(f, cases, ledger, jobs=jobs, case_timeout=case_timeout)
        if progress:
            progress(format_row(row))
        rows.append(row)
    return rows


def format_row(row: dict) -> str:
    what = "caught" if row["caught"] else ("MISSED" if row["cases"] else "MISSED (no cases)")
    if row.get("gap"):
        what = "CAUGHT (remove its gap)" if row["caught"] else "gap"
    first = f" ({len(row['failing'])} failing, e.g. {row['failing'][0]})" \
        if row["failing"] else ""
    why = f"\n        known gap: {row['gap']}" if row.get("gap") and not row["caught"] else ""
    return (f"{what:<7} {row['fault']:<28} {row['backend']:<10} {row['bug_class']}: "
            f"{row['cases']} cases, {row['seconds']}s{first}{why}")


def passed(rows: list[dict]) -> bool:
    """Every fault caught, except known gaps, which must still be missed (a caught gap
    means the gap is closed: its marker is stale)."""
    return all(r["caught"] != bool(r.get("gap")) for r in rows)


def summary(rows: list[dict]) -> str:
    caught = sum(r["caught"] for r in rows)
    share = 100.0 * caught / len(rows) if rows else 0.0
    missed = [r["fault"] for r in rows if not r["caught"] and not r.get("gap")]
    gaps = [r["fault"] for r in rows if not r["caught"] and r.get("gap")]
    stale = [r["fault"] for r in rows if r["caught"] and r.get("gap")]
    return (f"power: {caught}/{len(rows)} planted faults caught ({share:.0f}%)"
            + (f"; missed: {', '.join(missed)}" if missed else "")
            + (f"; known gaps: {', '.join(gaps)}" if gaps else "")
            + (f"; caught but marked as gaps: {', '.join(stale)}" if stale else ""))


def variant_reach(backends: list[str]) -> str:
    """How many of each backend's declared kernel variants have a planted fault."""
    from ..backends import variants
    from ..backends.fault_catalogue import FAULTS, WITHOUT_FAULT

    parts = []
    for b in backends:
        declared = set(variants.declared(b))
        have = {f.variant for f in FAULTS if f.backend == b} & declared
        parts.append(f"{b} {len(have)}/{len(declared)}")
    left = sum(v.split(":")[0] in backends for v in WITHOUT_FAULT)
    return (f"variants with a planted fault: {', '.join(parts)}"
            + (f" ({left} listed in fault_catalogue.WITHOUT_FAULT)" if left else ""))
