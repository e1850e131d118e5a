"""The worker side of a conformance run on Dask: what a worker advertises, what it runs.

A worker advertises each backend it can run as a Dask worker resource
(``backend-numba-cpu=1``, ``backend-cuda=1``); a case for backend X asks for one unit of
``backend-X``, so the scheduler sends it only to workers that advertise X.

Each case still runs in an isolated child process (``workers.WorkerPool``, one per backend
and thread, kept for the worker's life), so a case that aborts its process becomes a
``crash`` result exactly as in a local run. A daemonic Dask worker (Dask's default) may
not start children: there the cases run in the worker itself, and a crash kills the
worker, whose tasks Dask then re-runs elsewhere. ``rlx-ref worker`` starts workers that
are not daemonic.
"""
from __future__ import annotations

import argparse
import hashlib
import multiprocessing as mp
import pickle
import sys
import threading

RESOURCE_PREFIX = "backend-"
_POOLS: dict = {}                 # (spec, thread) -> (ledger digest and options, pool)
_BACKENDS: dict = {}              # spec -> backend object, built once per worker process
_LOCK = threading.Lock()


def resource_name(spec: str) -> str:
    """The Dask resource that says a worker runs backend ``spec``."""
    return RESOURCE_PREFIX + spec


def spec_of(resource: str) -> str | None:
    """The backend spec a resource advertises, or None for a resource of another kind."""
    return resource[len(RESOURCE_PREFIX):] if resource.startswith(RESOURCE_PREFIX) else None


def worker_resources(specs=None, slots: int = 1) -> dict:
    """The resources of a worker here: ``backend-SPEC: slots`` for every backend usable
    here (``specs``: only these, each checked; an unusable one raises RuntimeError)."""
    from ..backends.base import BackendUnavailable
    from ..backends.registry import available_backends, backend_names, get_backend

    if specs is None:
        names = {b.name for b in available_backends()}
        specs = [n for n in backend_names() if n in names]
    out = {}
    for spec in specs:
        try:
            ok, why = get_backend(spec).availability()
        except BackendUnavailable as e:
            ok, why = False, str(e)
        if not ok:
            raise RuntimeError(f"backend {spec!r} is unavailable on this worker: {why}")
        if any(c in spec for c in " ,="):
            raise RuntimeError(f"backend spec {spec!r} cannot be a Dask resource name "
                               "(no spaces, commas or '=')")
        out[resource_name(spec)] = slots
    return out


def _backend(spec: str):
    with _LOCK:
        if spec not in _BACKENDS:
            from ..backends.registry import get_backend

            _BACKENDS[spec] = get_backend(spec)
        return _BACKENDS[spec]


def _address() -> str:
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):       # called outside a Dask worker (tests, debugging)
        return ""


def describe_backend(spec: str) -> tuple:
    """(name, the results file's entry) of backend ``spec`` on this worker."""
    b = _backend(spec)
    info = b.describe() if hasattr(b, "describe") else {
        "emulated": False, "device": "", "declared": {}, "paths": {}}
    return b.name, info


def _pool(spec: str, ledger, repro_dir, case_timeout):
    """This thread's isolated case workers for ``spec``, started on first use; a run with
    another ledger or options replaces them (a long-lived worker keeps one pool each)."""
    from .workers import WorkerPool

    options = (hashlib.sha256(pickle.dumps(ledger)).hexdigest(), repro_dir, case_timeout)
    key = (spec, threading.get_ident())
    with _LOCK:
        held = _POOLS.get(key)
    if held is not None and held[0] == options:
        return held[1]
    if held is not None:
        held[1].close()
    pool = WorkerPool(_backend(spec), spec, ledger, repro_dir=repro_dir,
                      case_timeout=case_timeout)
    with _LOCK:
        _POOLS[key] = (options, pool)
    return pool


def run_cases(spec: str, cases: list, ledger, repro_dir=None, case_timeout=None) -> dict:
    """Run ``cases`` on backend ``spec`` here: {"worker": address, "results": [dicts]}.

    Idempotent (a case's result depends only on the case), so Dask may run it again on
    another worker when this one dies."""
    if mp.current_process().daemon:         # may not start children: run them here
        from .runner import run_case

        b = _backend(spec)
        results = [run_case(b, c, ledger, repro_dir=repro_dir, spec=spec).to_json()
                   for c in cases]
    else:
        out: list = [None] * len(cases)
        for i, res in _pool(spec, ledger, repro_dir, case_timeout).run(cases):
            out[i] = res
        results = out
    return {"worker": _address(), "results": results}


# ── rlx-ref worker ─────────────────────────────────────────────────────────

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scheduler", required=True, help="the scheduler, e.g. tcp://HOST:8786")
    p.add_argument("--backend", help="advertise only these backends, NAME[,NAME...] "
                   "(default: every backend usable here)")
    p.add_argument("--nthreads", type=int, default=1,
                   help="cases this worker runs at once (default 1)")
    p.add_argument("--name", help="the worker's name (default: Dask's)")
    p.add_argument("--print", action="store_true",
                   help="print the `dask worker` command line and stop")
    p.set_defaults(fn=run_worker)


def worker_arguments(scheduler: str, resources: dict, nthreads: int = 1,
                     name: str | None = None) -> list[str]:
    """The ``dask worker`` arguments of a worker that advertises ``resources``."""
    res = " ".join(f"{k}={v}" for k, v in sorted(resources.items()))
    args = [scheduler, "--nthreads", str(nthreads), "--nworkers", "1", "--resources", res]
    return args + (["--name", name] if name else [])


def recipe(args: list[str]) -> str:
    """The same worker as a shell command of plain Dask (not daemonic: see the module doc)."""
    quoted = [f"'{a}'" if " " in a else a for a in args]
    return "DASK_DISTRIBUTED__WORKER__DAEMON=False dask worker " + " ".join(quoted)


def run_worker(args) -> int:
    """``rlx-ref worker``: become a Dask worker advertising the backends usable here."""
    from .distributed import import_distributed

    import_distributed()
    if args.nthreads < 1:
        print(f"--nthreads must be at least 1, got {args.nthreads}", file=sys.stderr)
        return 2
    specs = [s.strip() for s in args.backend.split(",")] if args.backend else None
    resources = worker_resources(specs, slots=args.nthreads)
    if not resources:
        print("no backend is usable here: nothing to advertise", file=sys.stderr)
        return 2
    argv = worker_arguments(args.scheduler, resources, args.nthreads, args.name)
    if args.print:
        print(recipe(argv))
        return 0
    print(f"advertising {', '.join(sorted(resources))} to {args.scheduler}", file=sys.stderr,
          flush=True)
    import dask
    from distributed.cli import dask_worker

    # Not daemonic, so each case may run in its own child process (see the module doc); the
    # nanny hands this setting on to the worker process it starts (and restarts).
    dask.config.set({"distributed.worker.daemon": False})
    try:
        dask_worker.main(args=argv, prog_name="rlx-ref worker", standalone_mode=False)
    except KeyboardInterrupt:
        pass
    return 0
