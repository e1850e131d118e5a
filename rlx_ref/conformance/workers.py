"""Isolated case workers: each case runs in a long-lived child process that may die.

A backend's native compiler can abort (SIGABRT, SIGSEGV) or hang; neither may take the run
down with it. The parent sends each worker cases over a pipe (a few queued ahead when cases
are fast, so the pipe's latency stays hidden), the worker answers them in order, and the
parent waits with a deadline on the oldest unanswered one. A worker that dies (a signal or
an exit) or overruns that deadline is killed and replaced: the case it was running becomes
a ``crash`` or ``timeout`` result with a repro, the cases queued behind it are sent again.

Workers come from a forkserver (spawn where there is none): the server imports the runner
and the backend's module once, so a replacement starts quickly and never inherits a
driver's threads from the parent. Workers live until the run ends; only a dead or stuck
one is replaced, so the cost over an in-process run is one start per worker and the
pickling of each case and result.
"""
from __future__ import annotations

import multiprocessing as mp
import pickle
import signal
import threading
import time
from collections import deque
from multiprocessing.connection import wait

from .model import CRASH, ERROR, TIMEOUT, CaseResult

DEFAULT_CASE_TIMEOUT = 300.0     # seconds; a worker's first case gets twice this
PIPE_BYTES = 32 * 1024           # queued case bytes per worker (well under a pipe's buffer)
MAX_DEPTH = 32                   # cases queued per worker at most
QUEUE_SECONDS = 0.05             # ...or about this much work, whichever is fewer
MAX_DEAD_STARTS = 3              # workers in a row dying before the backend is built: give up


class WorkerSetupError(RuntimeError):
    """A worker could not build the backend (the message says why)."""


def _context():
    methods = mp.get_all_start_methods()
    return mp.get_context("forkserver" if "forkserver" in methods else "spawn")


def start_server(modules=()) -> None:
    """Start the forkserver now, preloading the runner and ``modules`` (backend modules), so
    its start overlaps the caller's other work (building the cases)."""
    ctx = _context()
    if ctx.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        ctx.set_forkserver_preload(["rlx_ref.conformance.runner", *modules])
        forkserver.ensure_running()


def _make_backend(spec: str, backend):
    """The worker's backend: rebuilt by name, or the pickled object when it has none."""
    if backend is not None:
        return backend
    from ..backends.registry import get_backend

    return get_backend(spec)


def _serve(conn, spec: str, backend, ledger, repro_dir) -> None:
    """Worker loop: build the backend, then answer (index, case) with a result dict."""
    from .runner import run_case

    try:
        backend = _make_backend(spec, backend)
    except Exception as e:  # noqa: BLE001 - sent to the parent, which reports it
        conn.send(("fatal", f"{type(e).__name__}: {e}"))
        return
    conn.send(("ready",))
    while True:
        try:
            blob = conn.recv_bytes()
        except (EOFError, OSError):       # the parent is gone: nothing left to answer
            return
        if not blob:                      # the parent's request to stop
            return
        idx, case = pickle.loads(blob)
        try:
            res = run_case(backend, case, ledger, repro_dir=repro_dir, spec=spec).to_json()
        except Exception as e:  # noqa: BLE001 - the runner itself failed on this case
            res = _result(case, backend.name, ERROR, f"{type(e).__name__}: {e}",
                          bool(getattr(backend, "emulated", False))).to_json()
        conn.send(("result", idx, res))


def _result(case, backend_name: str, status: str, message: str, emulated: bool) -> CaseResult:
    return CaseResult(case.id, case.op, case.dtype, tuple(case.tags), backend_name, status,
                      message, emulated=emulated)


def death_message(exitcode: int | None) -> str:
    """How a worker ended, e.g. 'killed by SIGABRT' or 'exited with status 3'."""
    if exitcode is None:
        return "stopped answering"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exited with status {exitcode}"


def _picklable(backend) -> bool:
    try:
        pickle.dumps(backend)
    except Exception:  # noqa: BLE001 - any failure means: rebuild it by name instead
        return False
    return True


def backend_for_workers(backend, spec: str):
    """What a worker receives: None when ``spec`` rebuilds the backend, else the object."""
    from ..backends.base import BackendUnavailable
    from ..backends.registry import get_backend

    try:
        if type(get_backend(spec)) is type(backend):
            return None
    except BackendUnavailable:
        pass
    if not _picklable(backend):
        raise WorkerSetupError(f"backend {backend.name!r} cannot be sent to a worker: "
                               f"{spec!r} does not name it and it does not pickle; name it "
                               "as module:object or run in-process")
    return backend


class Worker:
    """One child process serving cases in order; ``queue`` holds the indices sent to it,
    the first being the case it runs now."""

    def __init__(self, ctx, spec, backend, ledger, repro_dir):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, spec, backend, ledger, repro_dir),
                                daemon=True, name=f"rlx-ref case worker ({spec})")
        self.proc.start()
        child.close()
        self.queue: deque = deque()     # (case index, pickled size), in the order sent
        self.queued = 0                 # pickled bytes of the queue's cases
        self.deadline = self.started = 0.0      # of the head of the queue
        self.answered = 0
        self.ready = False              # the backend was built: a later death is the case's

    @property
    def task(self) -> int | None:
        """The case the worker is running (the oldest one sent and not answered)."""
        return self.queue[0][0] if self.queue else None

    def can_take(self, size: int, depth: int) -> bool:
        """Whether a case of ``size`` pickled bytes may be sent now without blocking.

        An idle, ready worker sits in recv, so any size goes through; otherwise only what
        fits the pipe's buffer may wait there, so the parent never blocks on a stuck worker.
        """
        if not self.queue:
            return self.ready or size <= PIPE_BYTES
        return len(self.queue) < depth and self.queued + size <= PIPE_BYTES

    def send(self, idx: int, blob: bytes, timeout: float) -> None:
        self.conn.send_bytes(blob)
        self.queue.append((idx, len(blob)))
        self.queued += len(blob)
        if len(self.queue) == 1:
            self.restart_clock(timeout)

    def restart_clock(self, timeout: float) -> None:
        """The head case's deadline: a first case gets twice ``timeout`` (it pays for
        warm-up compiles), and a worker still starting gets ``timeout`` more."""
        self.started = time.monotonic()
        self.deadline = self.started + timeout * (1 if self.answered else
                                                  2 if self.ready else 3)

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join()
        self.conn.close()

    def close(self) -> None:
        """Ask the worker to stop; kill it if it does not within a few seconds."""
        try:
            self.conn.send_bytes(b"")
        except (BrokenPipeError, OSError):
            pass
        self.proc.join(timeout=5)
        self.kill()


class WorkerPool:
    """``jobs`` isolated workers for one backend; ``run`` yields (index, result dict)."""

    def __init__(self, backend, spec: str, ledger, *, jobs: int = 1, repro_dir=None,
                 case_timeout: float | None = None):
        self.spec, self.ledger, self.repro_dir = spec, ledger, repro_dir
        self.name = backend.name
        self.emulated = bool(getattr(backend, "emulated", False))
        self.jobs = max(1, jobs)
        self.timeout = DEFAULT_CASE_TIMEOUT if case_timeout is None else float(case_timeout)
        if not self.timeout > 0:
            raise ValueError(f"--case-timeout must be a positive number of seconds, "
                             f"got {case_timeout}")
        self._payload = backend_for_workers(backend, spec)
        self._ctx = _context()
        if self._ctx.get_start_method() == "forkserver":
            self._ctx.set_forkserver_preload(["rlx_ref.conformance.runner",
                                              type(backend).__module__])
        self.workers: list[Worker] = []
        self.replaced = 0            # workers started to replace a dead or stuck one
        self._dead_starts = 0
        self._fatal = ""
        self._lock = threading.Lock()
        self._secs = self._answers = 0.0     # for the queue depth: cases per ~50 ms

    def _start(self) -> Worker:
        w = Worker(self._ctx, self.spec, self._payload, self.ledger, self.repro_dir)
        self.workers.append(w)
        return w

    def _retire(self, w: Worker, kill: bool) -> None:
        w.kill() if kill else w.close()
        self.workers.remove(w)

    def close(self, kill: bool = False) -> None:
        """Stop every worker (``kill``: at once, e.g. when the run was interrupted)."""
        for w in list(self.workers):
            self._retire(w, kill=kill or bool(w.queue))

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        self.close(kill=exc_type is not None)

    def _depth(self) -> int:
        """Cases a worker may hold: enough to hide the pipe's latency behind fast cases,
        one at a time (plus one waiting) where cases are slow, so no worker idles at the end."""
        if not self._answers:
            return 2
        per_case = self._secs / self._answers
        return max(2, min(MAX_DEPTH, int(QUEUE_SECONDS / max(per_case, 1e-6))))

    def _lost(self, w: Worker, case, status: str, why: str) -> dict:
        """The result of the case a dead or stuck worker held (with its repro)."""
        from .runner import finish_lost_case

        if not w.ready:
            why += " (before the backend was built)"
            self._dead_starts += 1
        if self._dead_starts >= MAX_DEAD_STARTS:
            why += (f"; {MAX_DEAD_STARTS} workers in a row died before the backend was "
                    "built, so the remaining cases are not run")
        res = _result(case, self.name, status, why, self.emulated)
        res.seconds = time.monotonic() - w.started
        return finish_lost_case(res, case, self.ledger, self.repro_dir, self.spec).to_json()

    def run_one(self, case) -> CaseResult:
        """Run one case in a worker (kept for the next call) and return its result; callers
        on several threads take turns (a pool's pipes serve one run at a time)."""
        with self._lock:
            ((_, res),) = list(self.run([case]))
        return CaseResult.from_json(res)

    def _busy(self) -> list:
        return [w for w in self.workers if w.queue]

    def run(self, cases: list):
        """Run ``cases``; yields ``(index, result dict)`` as results arrive."""
        todo = list(range(len(cases)))[::-1]      # popped from the end: case order
        blobs: dict = {}
        while todo or self._busy():
            if self._fatal or self._dead_starts >= MAX_DEAD_STARTS:
                status, why = (ERROR, self._fatal) if self._fatal else (
                    CRASH, f"not run: {MAX_DEAD_STARTS} workers in a row died at start")
                while todo:
                    i = todo.pop()
                    yield i, _result(cases[i], self.name, status, why, self.emulated).to_json()
                if not self._busy():
                    return
            self._feed(cases, todo, blobs)
            for i, res in self._collect(cases):
                if res is None:             # sent but not run: its worker was lost
                    todo.append(i)
                    continue
                blobs.pop(i, None)
                yield i, res

    def _feed(self, cases: list, todo: list, blobs: dict) -> None:
        """Send cases to workers (starting them up to ``jobs``) while any may take one."""
        depth = self._depth()
        for w in [w for w in self.workers if not w.queue and not w.proc.is_alive()]:
            self._retire(w, kill=True)              # died idle, after its last answer
        while todo:
            i = todo[-1]
            if i not in blobs:
                blobs[i] = pickle.dumps((i, cases[i]), protocol=pickle.HIGHEST_PROTOCOL)
            open_ = [w for w in self.workers if w.can_take(len(blobs[i]), depth)]
            if not open_ and len(self.workers) < self.jobs:
                open_ = [self._start()]
            if not open_:
                return
            w = min(open_, key=lambda w: len(w.queue))
            todo.pop()
            try:
                w.send(i, blobs[i], self.timeout)
            except (BrokenPipeError, OSError):
                w.queue.append((i, 0))     # its death is recorded by _collect
                return

    def _collect(self, cases: list):
        """Wait for answers, deaths or a deadline among the busy workers; yields
        (index, result) and (index, None) for a case to send again."""
        busy = self._busy()
        left = max(0.0, min(w.deadline for w in busy) - time.monotonic())
        ready = wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], timeout=left)
        for w in busy:
            while w.conn in ready and w.queue:
                try:
                    if not w.conn.poll():
                        break
                    msg = w.conn.recv()
                except (EOFError, OSError):
                    break               # died mid-answer: handled as a death below
                if msg[0] == "ready":
                    w.ready = True
                    self._dead_starts = 0
                    w.restart_clock(self.timeout)
                elif msg[0] == "result":
                    w.queued -= w.queue.popleft()[1]
                    w.answered += 1
                    self._answers += 1
                    self._secs += msg[2].get("seconds") or 0.0
                    if w.queue:
                        w.restart_clock(self.timeout)
                    yield msg[1], msg[2]
                elif msg[0] == "fatal":
                    self._fatal = f"backend {self.spec!r} failed to start in a worker: {msg[1]}"
                    for i, _ in w.queue:
                        yield i, _result(cases[i], self.name, ERROR, self._fatal,
                                         self.emulated).to_json()
                    w.queue.clear()
                    self._retire(w, kill=True)
            if not w.queue:
                continue
            if w.proc.sentinel in ready or not w.proc.is_alive():
                yield from self._replace(w, cases, CRASH, f"worker process "
                                         f"{death_message(w.proc.exitcode)} while running it")
            elif time.monotonic() >= w.deadline:
                limit = (f"{self.timeout:g} s (--case-timeout)" if w.answered else
                         f"{2 * self.timeout:g} s (twice --case-timeout {self.timeout:g}, "
                         "for a worker's first case)")
                yield from self._replace(w, cases, TIMEOUT,
                                         f"no result within {limit}; the worker was killed")

    def _replace(self, w: Worker, cases: list, status: str, why: str):
        """Kill ``w``; its head case gets ``status``, the cases queued behind go back."""
        head, *rest = [i for i, _ in w.queue]
        w.queue.clear()
        self._retire(w, kill=True)
        self.replaced += 1
        for i in reversed(rest):
            yield i, None
        yield head, self._lost(w, cases[head], status, why)
