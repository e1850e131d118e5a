"""Runs conformance cases on backends and records one CaseResult per (backend, case).

Each case runs the oracle twice (float64, and in the case dtype), runs the backend on the
same inputs, compares with the op's accuracy contract, then applies the ledger: declared
unsupported, expected failures (an unexpected pass fails) and tolerance overrides.
Failures leave a standalone repro.
"""
from __future__ import annotations

import gzip
import json
import platform
import sys
import time

import numpy as np

from .._atomic import write_bytes, write_json
from ..interpret import Interpreter
from .model import (ERROR, MISMATCH, OK, PASSING, UNSUPPORTED, XFAIL, XPASS, CaseResult)

FORMAT = "rlx-ref-conformance/1"


class OracleError(RuntimeError):
    """The oracle itself failed on a case: the case is wrong, not the backend."""


def oracle_outputs(case) -> tuple[list, list]:
    """(outputs in float64, outputs in the case dtype) of the oracle."""
    try:
        o64 = Interpreter(case.graph, float64=True).run(case.inputs, case.params)
        oc = Interpreter(case.graph).run(case.inputs, case.params)
    except Exception as e:  # noqa: BLE001 - reported as the case's own error
        raise OracleError(f"the oracle failed on case {case.id}: {e}") from e
    return o64, oc


def _oracle_raises(case) -> tuple:
    """An error case's oracle run: (its error message, None); OracleError if it does not
    raise as the case expects (then the case is wrong, not the backend)."""
    from .errors import describe, error_matches

    try:
        Interpreter(case.graph).run(case.inputs, case.params)
    except Exception as e:  # noqa: BLE001 - the expected outcome
        if error_matches(e, case.expect_error):
            return str(e).splitlines()[0], None
        raise OracleError(f"error case {case.id}: the oracle raised {type(e).__name__}: {e}, "
                          f"which does not mention {describe(case.expect_error)}") from e
    raise OracleError(f"error case {case.id}: the oracle ran without the expected error "
                      f"({describe(case.expect_error)})")


def _no_error(case, oracle_message: str) -> str:
    from .errors import describe

    return (f"no error raised: the backend returned values where the oracle raises an error "
            f"mentioning {describe(case.expect_error)} ({oracle_message})")


def _judge(case, outs, o64, oc, overrides, promises=()):
    """Compare backend outputs with the oracle under the case's accuracy contract (tightened
    by the backend's accumulation ``promises``); returns (verdict, the contract's text)."""
    from .accuracy import case_accuracy
    from .compare import compare_outputs

    acc = case_accuracy(case, overrides, promises)
    declared = [case.graph.nodes[o].shape for o in case.graph.outputs]
    return compare_outputs(outs, o64, oc, declared, acc), acc.describe()


def compile_options(backend, case):
    """The case's compile options: every threshold of the backend at its floor for a
    ``lowered-thresholds`` case (small inputs then take the large-size kernels); a faulted
    backend (``numba-cpu+fault:NAME``) lowers the thresholds of the backend it wraps."""
    from ..backends import variants
    from ..backends.faults import split_spec

    if variants.LOWERED_TAG not in case.tags:
        return None
    from ..runtime.options import CompileOptions

    return CompileOptions(thresholds=variants.lowered(split_spec(backend.name)[0]))


def _run_backend(backend, case, res) -> list:
    exe = backend.compile(case.graph, compile_options(backend, case))
    for k, v in case.params.items():
        exe.set_param(k, v)
    feeds = case.feeds()
    _poison_free_blocks(case)
    try:
        return [np.asarray(o) for o in exe.run(feeds)]
    finally:
        res.variants = list(exe.variants_run()) if hasattr(exe, "variants_run") else []


POISON_BLOCKS = 8            # numpy keeps up to 7 freed small blocks per size


def _poison_free_blocks(case) -> None:
    """Leave freed blocks of each output's byte size filled with 0xFF (NaN as a float, -1
    as an integer): an output element the backend never writes then shows, where it would
    otherwise read back an earlier result of the same size (the allocator hands out the
    block the oracle's output just left)."""
    sizes = {case.graph.nodes[o].shape.size_bytes for o in case.graph.outputs} - {None, 0}
    blocks = [np.empty(n, np.uint8) for n in sorted(sizes) for _ in range(POISON_BLOCKS)]
    for b in blocks:
        b.fill(0xFF)
    del blocks


def run_case(backend, case, ledger, *, repro_dir=None, spec=None, oracle=None) -> CaseResult:
    """Run one case on one backend and apply the ledger."""
    from .ledger import Entry  # noqa: F401  (type of ledger entries)

    t0 = time.perf_counter()
    res = CaseResult(case.id, case.op, case.dtype, tuple(case.tags), backend.name, OK,
                     emulated=bool(getattr(backend, "emulated", False)))
    declared = backend.unsupported_nodes(case.graph) if hasattr(
        backend, "unsupported_nodes") else []
    if declared:
        res.status, res.message = UNSUPPORTED, declared[0]
        res.seconds = time.perf_counter() - t0
        return res
    unsup = ledger.find("unsupported", backend.name, case)
    xfail = ledger.find("xfail", backend.name, case)
    try:
        o64, oc = oracle or (_oracle_raises(case) if case.expect_error else
                             oracle_outputs(case))
    except OracleError as e:
        res.status, res.message = ERROR, str(e)
        res.seconds = time.perf_counter() - t0
        return res
    try:
        outs = _run_backend(backend, case, res)
        if case.expect_error:
            res.status, res.message = MISMATCH, _no_error(case, o64)
        else:
            promises = backend.accumulation() if hasattr(backend, "accumulation") else ()
            v, res.contract = _judge(case, outs, o64, oc,
                                     ledger.overrides(backend.name, case), promises)
            res.status, res.message = v.status, v.message
            res.max_abs, res.max_rel, res.max_ulp = v.max_abs, v.max_rel, v.max_ulp
            res.worst_index, res.budget_ratio = v.worst_index, v.budget_ratio
    except Exception as e:  # noqa: BLE001 - any backend failure is the case's error
        from ..backends.base import UnsupportedOp
        from .errors import describe, error_matches

        res.status = UNSUPPORTED if isinstance(e, UnsupportedOp) and unsup else ERROR
        res.message = f"{type(e).__name__}: {e}"
        if case.expect_error and not isinstance(e, UnsupportedOp):
            if error_matches(e, case.expect_error):
                res.status, res.message = OK, f"raised as expected: {res.message}"
            else:
                res.message = (f"raised an error that does not mention "
                               f"{describe(case.expect_error)}: {res.message}")
    _apply_ledger(res, unsup, xfail)
    _write_repro(res, case, repro_dir, spec or backend.name)
    res.seconds = time.perf_counter() - t0
    return res


def _write_repro(res: CaseResult, case, repro_dir, spec: str) -> None:
    if res.status not in PASSING and res.status != XPASS and repro_dir is not None:
        from .repro import write_repro

        res.repro = write_repro(repro_dir, spec, case, res)


def finish_lost_case(res: CaseResult, case, ledger, repro_dir, spec: str) -> CaseResult:
    """A case whose worker crashed or timed out: apply the ledger, leave a repro."""
    _apply_ledger(res, ledger.find("unsupported", res.backend, case),
                  ledger.find("xfail", res.backend, case))
    _write_repro(res, case, repro_dir, spec)
    return res


def _apply_ledger(res: CaseResult, unsup, xfail) -> None:
    failing = res.status not in PASSING
    entry = unsup or xfail
    if entry is None or res.status == UNSUPPORTED:
        return
    if not failing:
        res.status = XPASS
        res.message = (f"unexpected pass: delete {entry.where()} ({entry.describe()}; "
                       f"reason was: {entry.reason})")
        return
    if unsup is not None:
        res.status, res.message = UNSUPPORTED, f"{unsup.reason} ({unsup.where()})"
        return
    if xfail.status == res.status and (not xfail.error or xfail.error in res.message):
        res.message = f"{xfail.reason} ({xfail.where()}): {res.message}"
        res.status = XFAIL
    else:
        res.message += (f"\n  (the ledger expects {xfail.status}"
                        f"{' with ' + repr(xfail.error) if xfail.error else ''} at "
                        f"{xfail.where()})")


# ── running many cases ─────────────────────────────────────────────────────

def shard_cases(cases: list, shard: str | None) -> list:
    """Cases of shard ``i/n`` (1-based i): every n-th case by id, starting at the i-th."""
    if not shard:
        return cases
    try:
        i, n = (int(p) for p in shard.split("/"))
    except ValueError:
        raise ValueError(f"--shard must look like i/n (e.g. 2/4), got {shard!r}") from None
    if not 1 <= i <= n:
        raise ValueError(f"--shard {shard}: i must be in 1..{n}")
    ordered = sorted(cases, key=lambda c: c.id)
    return ordered[i - 1::n]


class Progress:
    """A one-line progress report on stderr (every ~2 s, and at the end)."""

    def __init__(self, label: str, total: int, enabled: bool = True):
        self.label, self.total, self.enabled = label, total, enabled
        self.done = self.failing = 0
        self.t0 = self.last = time.monotonic()

    def update(self, results: list) -> None:
        self.done += len(results)
        self.failing += sum(r["status"] not in PASSING for r in results)
        now = time.monotonic()
        if self.enabled and (now - self.last > 2 or self.done == self.total):
            self.last = now
            print(f"[{self.label}] {self.done}/{self.total} cases, {self.failing} failing, "
                  f"{now - self.t0:.1f}s", file=sys.stderr, flush=True)


def run_backend(backend, cases: list, ledger, *, jobs: int = 1, repro_dir=None,
                spec: str | None = None, progress: bool = True, in_process: bool = False,
                case_timeout: float | None = None) -> list[dict]:
    """All cases on one backend; result dicts in case order.

    Cases run in ``jobs`` isolated worker processes (``workers.WorkerPool``): a backend
    that kills or hangs its process costs that case a ``crash`` or ``timeout`` result, not
    the run. ``in_process`` runs them here instead, for debugging (a crash ends the run).
    """
    spec = spec or backend.name
    bar = Progress(backend.name, len(cases), progress)
    out: list = [None] * len(cases)
    if in_process:
        for i, case in enumerate(cases):
            out[i] = run_case(backend, case, ledger, repro_dir=repro_dir, spec=spec).to_json()
            bar.update([out[i]])
        return out
    from .workers import WorkerPool

    with WorkerPool(backend, spec, ledger, jobs=jobs, repro_dir=repro_dir,
                    case_timeout=case_timeout) as pool:
        for i, res in pool.run(cases):
            out[i] = res
            bar.update([res])
    return out


def results_document(backends: list, results: list, machine: str | None = None) -> dict:
    """The results file: format tag, machine, each backend's declared table, all results.

    ``machine`` replaces the recorded host details by a fixed label (used for the committed
    report, which must not depend on the machine that regenerated it).
    """
    info = {"host": machine} if machine else {
        "host": platform.node(), "platform": platform.platform(),
        "python": platform.python_version(), "numpy": np.__version__}
    return {
        "format": FORMAT,
        "machine": info,
        "backends": {b.name: _describe(b) for b in backends},
        "results": results,
    }


def _describe(backend) -> dict:
    """What the results file records about a backend: its own ``describe()``, or for one
    that only has the protocol's methods, what ``Backend.describe`` would say of its
    ``supported_ops()`` (without its claims every cell of its column would read as
    unclaimed, however its cases went)."""
    if hasattr(backend, "describe"):
        return backend.describe()
    from ..backends.base import ALL

    table = backend.supported_ops()
    return {"emulated": bool(getattr(backend, "emulated", False)),
            "device": str(getattr(backend, "device", "")),
            "declared": {k: (v if v == ALL else sorted(str(d) for d in v))
                         for k, v in sorted(table.items())},
            "paths": {k: "native" for k in sorted(table)}}


def write_results(doc: dict, path) -> None:
    """Write the results file atomically: an interrupted run keeps the previous file.

    A path ending ``.gz`` gets the compact, reproducible form that is committed for the
    published report: gzip without a timestamp, no per-case timings, one line per case."""
    if not str(path).endswith(".gz"):
        write_json(path, doc, indent=1, sort_keys=False)
        return
    rows = [{k: v for k, v in r.items() if k != "seconds"} for r in doc.get("results", ())]
    head = json.dumps({k: v for k, v in doc.items() if k != "results"}, ensure_ascii=False)
    lines = ",\n".join(json.dumps(r, ensure_ascii=False, sort_keys=True) for r in rows)
    text = f'{head[:-1]}{", " if len(head) > 2 else ""}"results": [\n{lines}\n]}}\n'
    write_bytes(path, gzip.compress(text.encode("utf-8"), mtime=0))


def summarize(results: list[dict]) -> dict:
    counts: dict = {}
    for r in results:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return counts


def failing(results: list[dict]) -> list[dict]:
    return [r for r in results if r["status"] not in PASSING]


__all__ = ["run_case", "run_backend", "oracle_outputs", "results_document", "write_results",
           "shard_cases", "summarize", "failing", "OracleError", "MISMATCH", "XFAIL"]
