"""Conformance runs across machines: the selected cases go to a ``dask.distributed`` cluster.

Each case for backend X is a task that asks for one unit of the resource ``backend-X``
(``dask_worker.py``), so it runs only on a worker that advertises X. Tasks are idempotent
and retried; Dask re-runs the tasks of a worker that dies on another worker. The results
come back in the local runner's order (backend by backend, cases in selection order), so
the results file equals a local run's with the same selection (timings and, without
``--machine``, the host details aside).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from .dask_worker import describe_backend, resource_name, run_cases, spec_of
from .model import CRASH

MAX_CHUNK = 8               # cases per task at most: few tasks, yet fine-grained retries
POLL_SECONDS = 2.0          # how often a stalled run checks that its backends have workers


class DistributedError(RuntimeError):
    """The cluster cannot run the selection (unreachable, or no worker for a backend)."""


def import_distributed():
    """The ``distributed`` module; DistributedError naming the extra when it is missing."""
    try:
        import distributed
    except ImportError as e:
        raise DistributedError(
            f"runs on a Dask cluster need dask.distributed ({e}); install the `dist` extra: "
            "pip install 'rlx-ref[dist]' (or pip install 'dask[distributed]')") from None
    return distributed


@dataclass
class Described:
    """A backend as a worker described it (what ``results_document`` reads)."""

    name: str
    info: dict

    def describe(self) -> dict:
        return self.info


@dataclass
class DistributedRun:
    """A finished run: backends (in order), result dicts (local order), where each ran."""

    backends: list
    results: list
    placement: dict = field(default_factory=dict)   # (backend name, case id) -> address


def connect(address: str, timeout: float):
    """A Client of the scheduler at ``address``; DistributedError naming it if unreachable."""
    dist = import_distributed()
    try:
        return dist.Client(address, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as e:
        raise DistributedError(f"cannot reach the Dask scheduler at {address} within "
                               f"{timeout:g} s: {type(e).__name__}: {e}") from None


def advertised(client) -> dict:
    """{worker address: [backend specs it advertises]} of the workers connected now."""
    workers = client.scheduler_info(n_workers=-1).get("workers", {})
    return {addr: sorted(s for s in map(spec_of, w.get("resources") or {}) if s)
            for addr, w in workers.items()}


def _no_worker(specs: list, workers: dict, address: str) -> str:
    offered = sorted({s for ss in workers.values() for s in ss})
    listing = "; ".join(f"{a} ({', '.join(ss) or 'no backends'})"
                        for a, ss in sorted(workers.items())) or "none"
    return (f"no Dask worker at {address} advertises backend(s) {', '.join(specs)} "
            f"(resource {', '.join(map(resource_name, specs))}); backends advertised: "
            f"{', '.join(offered) or 'none'}; workers: {listing}. Start one where the backend "
            f"runs: rlx-ref worker --scheduler {address}")


def _chunks(cases: list, workers: int) -> list:
    """(start, cases) slices: about four tasks per worker per backend, at most MAX_CHUNK."""
    size = max(1, min(MAX_CHUNK, len(cases) // max(1, 4 * workers)))
    return [(i, cases[i:i + size]) for i in range(0, len(cases), size)]


def _lost(spec: str, name: str, emulated: bool, cases: list, ledger, repro_dir, status: str,
          why: str) -> list:
    """Results for cases whose task failed for good (its workers kept dying)."""
    from .runner import finish_lost_case
    from .workers import _result

    return [finish_lost_case(_result(c, name, status, why, emulated), c, ledger, repro_dir,
                             spec).to_json() for c in cases]


class _Watch:
    """Fails a run whose pending backends have had no worker for ``grace`` seconds."""

    def __init__(self, client, address: str, grace: float):
        self.client, self.address, self.grace = client, address, grace
        self.since: dict = {}

    def check(self, pending_specs: set) -> None:
        workers = advertised(self.client)
        have = {s for ss in workers.values() for s in ss}
        now = time.monotonic()
        for spec in pending_specs:
            if spec in have:
                self.since.pop(spec, None)
            elif now - self.since.setdefault(spec, now) > self.grace:
                raise DistributedError("the workers left mid-run: " + _no_worker(
                    sorted(pending_specs - have), workers, self.address))


def run_distributed(address: str, specs, cases: list, ledger, *, repro_dir=None,
                    case_timeout=None, retries: int = 2, connect_timeout: float = 10.0,
                    worker_wait: float = 30.0, progress: bool = True,
                    client=None) -> DistributedRun:
    """Run ``cases`` on backends ``specs`` (None: every backend a worker advertises) on the
    cluster at ``address`` (or through ``client``, from ``connect``, which is closed)."""
    dist = import_distributed()
    client = client or connect(address, connect_timeout)
    try:
        try:
            client.wait_for_workers(1, timeout=worker_wait)
        except TimeoutError:
            raise DistributedError(f"no Dask worker joined the scheduler at {address} within "
                                   f"{worker_wait:g} s (--worker-wait)") from None
        workers = advertised(client)
        specs = list(specs) if specs else sorted({s for ss in workers.values() for s in ss})
        missing = [s for s in specs if not any(s in ss for ss in workers.values())]
        if missing or not specs:
            raise DistributedError(_no_worker(missing or ["(any)"], workers, address))
        return _run(client, dist, address, specs, cases, ledger, repro_dir, case_timeout,
                    retries, worker_wait, progress, len(workers))
    finally:
        client.close()


def _submit(client, fn, spec, *args, retries=0):
    return client.submit(fn, spec, *args, resources={resource_name(spec): 1},
                         retries=retries, pure=False)


def _run(client, dist, address, specs, cases, ledger, repro_dir, case_timeout, retries,
         worker_wait, progress, nworkers) -> DistributedRun:
    from .runner import Progress

    tasks = {}                  # future -> (backend index, start, cases); cases None: describe
    for b, spec in enumerate(specs):
        tasks[_submit(client, describe_backend, spec, retries=retries)] = (b, 0, None)
        for start, chunk in _chunks(cases, nworkers):
            fut = _submit(client, run_cases, spec, chunk, ledger, repro_dir, case_timeout,
                          retries=retries)
            tasks[fut] = (b, start, chunk)
    got: dict = {}                          # future -> its result, or the error it raised
    bar = Progress("dask", len(cases) * len(specs), progress)
    left = {b: sum(1 for t in tasks.values() if t[0] == b) for b in range(len(specs))}
    watch, idle = _Watch(client, address, worker_wait), time.monotonic()
    with client.as_current():
        done = dist.as_completed(list(tasks))
    while not done.is_empty():
        batch = done.next_batch(block=False)
        if not batch:       # nothing new: fail rather than hang when a backend lost its workers
            if time.monotonic() - idle > POLL_SECONDS:
                watch.check({specs[b] for b, n in left.items() if n})
                idle = time.monotonic()
            time.sleep(0.05)
            continue
        idle = time.monotonic()
        for fut in batch:
            left[tasks[fut][0]] -= 1
            try:
                got[fut] = fut.result()
            except Exception as e:  # noqa: BLE001 - judged below, per kind of task
                got[fut] = e
            if tasks[fut][2] is not None and not isinstance(got[fut], Exception):
                bar.update(got[fut]["results"])
    names = [_described(specs[b], got[f]) for f, (b, _, c) in tasks.items() if c is None]
    _check_names(specs, names)
    slots: list = [[None] * len(cases) for _ in specs]
    placement: dict = {}
    for fut, (b, start, chunk) in tasks.items():
        if chunk is None:
            continue
        rows, where = _outcome(got[fut], specs[b], names[b], chunk, ledger, repro_dir)
        for k, row in enumerate(rows):
            slots[b][start + k] = row
            placement[(names[b].name, row["case_id"])] = where
    results = [r for per_backend in slots for r in per_backend]
    return DistributedRun(names, results, placement)


def _described(spec: str, got) -> Described:
    if isinstance(got, Exception):          # the backend cannot be built on its workers
        raise DistributedError(f"backend {spec!r} failed on its Dask worker: "
                               f"{type(got).__name__}: {got}")
    return Described(*got)


def _outcome(got, spec: str, backend: Described, chunk: list, ledger, repro_dir):
    """(result dicts, worker address) of a finished task; a task that failed for good
    (Dask's retries and worker restarts ran out) gives its cases ``crash`` results."""
    if not isinstance(got, Exception):
        return got["results"], got["worker"]
    why = f"the Dask task failed on every try: {type(got).__name__}: {got}"
    return _lost(spec, backend.name, bool(backend.info.get("emulated")), chunk, ledger,
                 repro_dir, CRASH, why), ""


def _check_names(specs: list, names: list) -> None:
    seen: dict = {}
    for spec, d in zip(specs, names):
        if d.name in seen:      # results are keyed by name, as in a local run
            raise DistributedError(f"backends {seen[d.name]!r} and {spec!r} both record "
                                   f"results as {d.name!r}: run each with its own --out")
        seen[d.name] = spec


def placement_summary(run: DistributedRun) -> list[str]:
    """One line per worker: how many cases of each backend it ran."""
    per: dict = {}
    for (name, _), addr in run.placement.items():
        counts = per.setdefault(addr or "(failed)", {})
        counts[name] = counts.get(name, 0) + 1
    return [f"{addr}: " + ", ".join(f"{n} {k}" for n, k in sorted(c.items()))
            for addr, c in sorted(per.items())]


def run_from_cli(args, cases: list, ledger, client=None) -> tuple[list, list]:
    """``rlx-ref conformance --scheduler``: ([(spec, backend)], result dicts) as a local run
    gives them; prints where the cases ran."""
    import sys

    specs = [s.strip() for s in args.backend.split(",")] if args.backend else None
    run = run_distributed(args.scheduler, specs, cases, ledger, repro_dir=args.repro_dir,
                          case_timeout=args.case_timeout, retries=args.retries,
                          connect_timeout=args.connect_timeout, worker_wait=args.worker_wait,
                          progress=not args.quiet, client=client)
    if not args.quiet:
        for line in placement_summary(run):
            print(line, file=sys.stderr)
    return [(b.name, b) for b in run.backends], run.results
