"""Pytest plugin: one test per (backend, conformance case).

    pytest conformance --backend reference          # from a checkout
    pytest -p rlx_ref.conformance.pytest_plugin --backend my_pkg:Backend ...

Options: ``--backend`` (comma list or module:object), ``--conformance-op`` (kind or glob),
``--conformance-dtype``, ``--conformance-ledger``, ``--repro-dir``, ``--case-timeout``,
``--in-process``. Works with pytest-xdist (case ids are content hashes, so every worker
collects the same tests).

Each backend's cases run in one long-lived isolated worker process per pytest process
(``workers.WorkerPool``): a backend that aborts or hangs fails that test (``crash`` with
the signal, or ``timeout``) with a repro, and the next test gets a fresh worker.
"""
from __future__ import annotations

import pytest

_CACHE: dict = {}


def pytest_addoption(parser):
    g = parser.getgroup("rlx-ref conformance")
    g.addoption("--backend", default="reference",
                help="backend(s) to check: NAME[,NAME] or module:object (default reference)")
    g.addoption("--conformance-op", default=None, help="only ops matching this kind/glob")
    g.addoption("--conformance-dtype", default=None, help="only these dtypes, e.g. f32,f16")
    g.addoption("--conformance-ledger", default=None, help="expectations file")
    g.addoption("--repro-dir", default="repros", help="where failing cases leave repros")
    g.addoption("--case-timeout", type=float, default=None, metavar="SECONDS",
                help="fail a case whose worker runs longer (default 300; twice that for a "
                "worker's first case)")
    g.addoption("--in-process", action="store_true", default=False,
                help="run cases in the pytest process, not in an isolated worker (debugging)")


def _cases(config):
    if "cases" not in _CACHE:
        from .cases import build_cases, filter_cases

        dt = config.getoption("conformance_dtype")
        _CACHE["cases"] = filter_cases(build_cases(), config.getoption("conformance_op"),
                                       dt.split(",") if dt else None, None)
    return _CACHE["cases"]


def _backend(spec: str):
    if spec not in _CACHE:
        from ..backends.registry import get_backend

        _CACHE[spec] = get_backend(spec)
    return _CACHE[spec]


def pytest_generate_tests(metafunc):
    if "conformance_case" not in metafunc.fixturenames:
        return
    specs = [s.strip() for s in metafunc.config.getoption("backend").split(",") if s.strip()]
    cases = _cases(metafunc.config)
    params = [(s, c) for s in specs for c in cases]
    metafunc.parametrize(("conformance_backend", "conformance_case"), params,
                         ids=[f"{s}::{c.id}" for s, c in params])


def _isolated(config, backend, spec: str, repro_dir):
    """This process's worker pool for ``spec`` (one worker, replaced when it dies)."""
    key = ("pool", spec)
    if key not in _CACHE:
        import atexit

        from .workers import WorkerPool

        pool = WorkerPool(backend, spec, _CACHE["ledger"], jobs=1, repro_dir=repro_dir,
                          case_timeout=config.getoption("case_timeout"))
        atexit.register(pool.close)
        _CACHE[key] = pool
    return _CACHE[key]


def check_case(request, spec: str, case) -> None:
    """Run one case and turn its status into a pytest outcome."""
    from .ledger import load_ledger
    from .model import OK, UNSUPPORTED, XFAIL
    from .runner import run_case

    if "ledger" not in _CACHE:
        _CACHE["ledger"] = load_ledger(request.config.getoption("conformance_ledger"))
    backend = _backend(spec)
    ok, why = backend.availability()
    if not ok:
        pytest.skip(f"backend {spec} unavailable: {why}")
    repro_dir = request.config.getoption("repro_dir")
    if request.config.getoption("in_process"):
        res = run_case(backend, case, _CACHE["ledger"], repro_dir=repro_dir, spec=spec)
    else:
        res = _isolated(request.config, backend, spec, repro_dir).run_one(case)
    if res.status == OK:
        return
    if res.status == UNSUPPORTED:
        pytest.skip(res.message)
    if res.status == XFAIL:
        pytest.xfail(res.message)
    where = f"\nrepro: python {res.repro}/repro.py" if res.repro else ""
    pytest.fail(f"{case.op} {case.dtype} [{', '.join(case.tags)}] on {spec}: "
                f"{res.status}: {res.message}{where}", pytrace=False)


@pytest.fixture
def conformance_check(request):
    """``conformance_check(spec, case)`` runs one case under the ledger."""
    return lambda spec, case: check_case(request, spec, case)
