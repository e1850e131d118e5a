"""Pytest plugin: one test per (backend, conformance case).

    pytest conformance --backend reference          # from a checkout
    pytest -p rlx_ref.conformance.pytest_plugin --backend my_pkg:Backend ...

Options: ``--backend`` (comma list or module:object), ``--conformance-op`` (kind or glob),
``--conformance-dtype``, ``--ledger`` (as in ``rlx-ref conformance``; ``--conformance-ledger``
is its older alias), ``--repro-dir``, ``--case-timeout``, ``--in-process``. Works with
pytest-xdist (case ids are content hashes, so every worker collects the same tests).

Loaded with ``-p``, the plugin brings its own test (``suite.py``): no test function needs
writing. A test of one's own that takes ``conformance_case`` replaces it (the shipped one
is then dropped, so no case runs twice).

Each backend's cases run in one long-lived isolated worker process per pytest process
(``workers.WorkerPool``): a backend that aborts or hangs fails that test (``crash`` with
the signal, or ``timeout``) with a repro, and the next test gets a fresh worker.
"""
from __future__ import annotations

import os

import pytest

_CACHE: dict = {}
SUITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "suite.py")


def pytest_addoption(parser):
    g = parser.getgroup("rlx-ref conformance")
    g.addoption("--backend", default="reference",
                help="backend(s) to check: NAME[,NAME] or module:object (default reference)")
    g.addoption("--conformance-op", default=None, help="only ops matching this kind/glob")
    g.addoption("--conformance-dtype", default=None, help="only these dtypes, e.g. f32,f16")
    g.addoption("--ledger", "--conformance-ledger", dest="conformance_ledger", default=None,
                help="expectations file (default: the packaged one); the same option as "
                "`rlx-ref conformance --ledger`")
    g.addoption("--repro-dir", default="repros", help="where failing cases leave repros")
    g.addoption("--case-timeout", type=float, default=None, metavar="SECONDS",
                help="fail a case whose worker runs longer (default 300; twice that for a "
                "worker's first case)")
    g.addoption("--in-process", action="store_true", default=False,
                help="run cases in the pytest process, not in an isolated worker (debugging)")


def pytest_configure(config):
    """Collect the shipped test module besides the paths given (loaded with ``-p`` only)."""
    if config.pluginmanager.get_plugin("rlx_ref.conformance.pytest_plugin") is None:
        return          # imported by a conftest: that project writes its own test
    if SUITE not in config.args:
        config.args.append(SUITE)


def pytest_collection_modifyitems(session, config, items):
    """Drop the shipped test when another test already takes ``conformance_case``."""
    mine = [str(getattr(i, "path", "")) == SUITE for i in items]
    theirs = any(not m and "conformance_case" in getattr(i, "fixturenames", ())
                 for i, m in zip(items, mine))
    if theirs and any(mine):
        items[:] = [i for i, m in zip(items, mine) if not m]


def _cases(config):
    if "cases" not in _CACHE:
        from .cases import build_cases, filter_cases

        op, dt = config.getoption("conformance_op"), config.getoption("conformance_dtype")
        dts = dt.split(",") if dt else None
        # building only the selected kinds, as `rlx-ref conformance --op` does
        _CACHE["cases"] = filter_cases(build_cases(kinds=op, dtypes=dts), op, dts, None)
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
    from .ledger import load_ledger, warn_name_mismatch
    from .model import OK, UNSUPPORTED, XFAIL
    from .runner import run_case

    if "ledger" not in _CACHE:
        _CACHE["ledger"] = load_ledger(request.config.getoption("conformance_ledger"))
    backend = _backend(spec)
    if ("named", spec) not in _CACHE:   # once per backend: entries under the other name
        _CACHE[("named", spec)] = True
        warn_name_mismatch(_CACHE["ledger"], spec, backend.name)
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
