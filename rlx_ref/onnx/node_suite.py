"""Running ONNX's node tests in worker processes, the differences ledger and the summary.

Each case runs in a worker process (``--jobs`` of them); a worker that dies takes only
its case with it: the pool is rebuilt and the cases it held are re-run one at a time, so
the one that crashed is marked ``fail`` ("worker died") and the run goes on.
"""
from __future__ import annotations

import fnmatch
import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from .node_tests import DIFFERS, FAIL, NOT_MAPPABLE, PASS, STATUSES, collect, run_case

LEDGER = Path(__file__).with_name("differences.toml")
RESULTS = "docs/results/onnx-node-tests.json"


def load_ledger(path=LEDGER) -> list:
    """The documented RLX-vs-ONNX differences: ``[{pattern, backends, reason}]``."""
    import tomllib

    with open(path, "rb") as f:
        data = tomllib.load(f)
    out = []
    for e in data.get("difference", []):
        if not e.get("reason"):
            raise ValueError(f"{path}: entry {e.get('pattern')!r} has no reason")
        out.append({"pattern": e["pattern"], "reason": e["reason"],
                    "backends": tuple(e.get("backends", ("*",)))})
    return out


def ledger_entry(ledger: list, name: str, backend: str):
    """The ledger entry covering ``name`` on ``backend``, or None."""
    for e in ledger:
        if fnmatch.fnmatchcase(name, e["pattern"]) and any(
                fnmatch.fnmatchcase(backend, b) for b in e["backends"]):
            return e
    return None


def _work(args):
    fn, rest = args[0], args[1:]
    return rest[0], fn(*rest)


def _pool(jobs: int):
    return ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn"))


def run_cases(cases: list, backends: tuple, jobs: int = 1, progress=None,
              fn=run_case) -> dict:
    """``{case name: {backend: (status, detail)}}`` for every case; survives crashes.
    ``fn`` runs one case (a module-level function, so workers can import it)."""
    results: dict = {}
    todo = [(fn, n, mb, ins, outs, backends) for n, mb, ins, outs in cases]
    if jobs <= 1:
        for t in todo:
            results[t[1]] = fn(*t[1:])
            if progress:
                progress(t[1], results[t[1]])
        return results
    lost_before: set = set()
    while todo:
        lost = []
        with _pool(jobs) as ex:
            futs = {ex.submit(_work, t): t for t in todo}
            for f, t in futs.items():
                try:
                    name, res = f.result()
                except BrokenProcessPool:
                    lost.append(t)
                    continue
                results[name] = res
                if progress:
                    progress(name, res)
        # a pool that breaks loses every case in flight: retry them together once, then
        # alone, so a second death names the case that kills its worker
        todo = [t for t in lost if t[1] not in lost_before]
        for t in (t for t in lost if t[1] in lost_before):
            results[t[1]] = _alone(t, backends)
            if progress:
                progress(t[1], results[t[1]])
        lost_before.update(t[1] for t in todo)
    return results


def _alone(t, backends) -> dict:
    try:
        with _pool(1) as ex:
            return ex.submit(_work, t).result()[1]
    except BrokenProcessPool:
        return {b: (FAIL, {"error": "the worker process died"}) for b in backends}


def statuses(results: dict, ledger: list) -> dict:
    """Apply the ledger: a failing case it covers is ``differs``."""
    out = {}
    for name, per in results.items():
        out[name] = {}
        for b, (st, detail) in per.items():
            if st == FAIL and ledger_entry(ledger, name, b):
                st = DIFFERS
            out[name][b] = st
    return out


def summary(results: dict, ledger: list, backends: tuple) -> dict:
    """The results file (schema in docs/results; deterministic: no times or hosts)."""
    import onnx

    from .load import max_opset

    st = statuses(results, ledger)
    counts = {b: {s: 0 for s in STATUSES} for b in backends}
    nm_ops: dict = {}
    failures: dict = {}
    for name in sorted(results):
        for b in backends:
            s, detail = results[name][b]
            counts[b][st[name][b]] += 1
            if st[name][b] == FAIL:
                failures.setdefault(name, {})[b] = _fail_text(detail)
        first = results[name][backends[0]]
        if first[0] == NOT_MAPPABLE:
            for op in first[1]["ops"]:
                nm_ops[op] = nm_ops.get(op, 0) + 1
    return {"onnx_version": onnx.__version__, "max_opset": max_opset(),
            "total": len(results), "backends": counts, "not_mappable_ops": nm_ops,
            "cases": st, "failures": failures}


def _fail_text(detail: dict) -> str:
    parts = []
    if detail.get("max_abs") is not None:
        parts.append(f"max abs {detail['max_abs']:.3g}, max rel {detail['max_rel']:.3g}")
    if detail.get("error"):
        parts.append(detail["error"].splitlines()[0][:300])
    return "; ".join(parts)


def stale_entries(results: dict, ledger: list, backends: tuple) -> list:
    """Ledger entries that cover no failing case: the ledger must not go stale."""
    stale = []
    for e in ledger:
        hit = any(ledger_entry([e], n, b) and results[n][b][0] == FAIL
                  for n in results for b in backends if b in results[n])
        if not hit:
            stale.append(e["pattern"])
    return stale


def write_summary(path, data: dict) -> None:
    """Atomically, with sorted keys."""
    import json

    from .._atomic import write_text

    write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def run_suite(backends=("reference",), op_glob=None, subset=None, jobs=1, progress=None):
    """Collect, run and summarize; returns (summary, raw results)."""
    cases = collect(op_glob, subset)
    results = run_cases(cases, tuple(backends), jobs, progress)
    return summary(results, load_ledger(), tuple(backends)), results


__all__ = ["run_suite", "run_cases", "summary", "load_ledger", "ledger_entry", "statuses",
           "stale_entries", "write_summary", "PASS", "FAIL", "DIFFERS", "NOT_MAPPABLE",
           "RESULTS"]
