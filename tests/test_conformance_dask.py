"""Conformance runs on a Dask cluster: same results as a local run, a killed worker's cases
re-run elsewhere, cases routed by the backends workers advertise, clear errors."""
import functools
import gzip
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed")

import cloudpickle  # noqa: E402  (installed with distributed)
import dask  # noqa: E402
from distributed import Client, LocalCluster, WorkerPlugin  # noqa: E402

from rlx_ref import cli as top_cli  # noqa: E402
from rlx_ref.backends.registry import get_backend  # noqa: E402
from rlx_ref.conformance import dask_worker  # noqa: E402
from rlx_ref.conformance.cases import build_cases, filter_cases  # noqa: E402
from rlx_ref.conformance.distributed import (  # noqa: E402
    Described, DistributedError, _outcome, _Watch, import_distributed, run_distributed)
from rlx_ref.conformance.ledger import load_ledger  # noqa: E402
from rlx_ref.conformance.runner import (  # noqa: E402
    results_document, run_backend, shard_cases, write_results)

ROOT = Path(__file__).resolve().parents[1]
OP, BACKENDS = "ReluBackward", ["reference", "numba-cpu"]
SELECT = ["--op", OP, "--backend", ",".join(BACKENDS), "--machine", "test", "--quiet"]
NUMBA_WORKER = "numba-worker"

cloudpickle.register_pickle_by_value(sys.modules[__name__])     # the plugin travels as is


class ExitOnce(WorkerPlugin):
    """Makes worker ``name`` exit as it starts a case task after finishing one (once:
    ``marker`` records it, so the worker its nanny restarts stays up)."""

    def __init__(self, name, marker: str):
        self.name, self.marker = name, marker

    def setup(self, worker):
        self.worker, self.finished = worker, 0

    def transition(self, key, start, finish, **kwargs):
        if self.worker.name != self.name:
            return
        if finish == "memory":
            self.finished += 1
        elif (finish == "executing" and self.finished and "run_cases" in str(key)
              and not os.path.exists(self.marker)):
            Path(self.marker).write_text(str(key))
            os._exit(1)


@pytest.fixture(scope="module")
def cluster():
    """(client, scheduler address, numba worker address) of a LocalCluster whose two workers
    advertise the oracle and broken-faults (it aborts on Tile), plus an `rlx-ref worker`
    that advertises only numba-cpu."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    # Not daemonic, so each case runs in its own child process as in a local run (also
    # for the worker its nanny restarts, hence the setting stays for the module).
    with dask.config.set({"distributed.worker.daemon": False}), LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0",
            resources=dask_worker.worker_resources(["reference", "broken-faults"])) as lc:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rlx_ref.cli", "worker", "--scheduler",
             lc.scheduler_address, "--backend", "numba-cpu", "--name", NUMBA_WORKER],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            with Client(lc) as client:
                client.wait_for_workers(3, timeout=180)
                workers = client.scheduler_info(n_workers=-1)["workers"]
                (numba,) = [a for a, w in workers.items() if w["name"] == NUMBA_WORKER]
                yield client, lc.scheduler_address, numba
        finally:            # its worker process exits with the nanny (Dask watches for that)
            proc.kill()
            proc.wait(timeout=60)


_built = functools.lru_cache(maxsize=None)(build_cases)       # every case, built once


@functools.lru_cache(maxsize=None)
def _all_cases() -> tuple:
    return tuple(filter_cases(_built(), OP, None, None, None))


def _cases() -> list:
    return list(_all_cases())


def _gz_text(path) -> str:
    return gzip.decompress(Path(path).read_bytes()).decode()


@pytest.fixture(scope="module")
def repros(tmp_path_factory):
    """One repro folder for both runs: a failing case's result records its repro's path."""
    return tmp_path_factory.mktemp("repros")


def _local_file(path, cases, repros, in_process: bool):
    """The results file a local run writes (what `rlx-ref conformance --out` runs)."""
    backends, ledger = [get_backend(b) for b in BACKENDS], load_ledger(None)
    rows = [r for b in backends for r in run_backend(b, cases, ledger, repro_dir=str(repros),
                                                     progress=False, in_process=in_process)]
    write_results(results_document(backends, rows, "test"), path)
    return path


@pytest.fixture(scope="module")
def local_file(tmp_path_factory, repros):
    """A local run's results file, its cases in isolated worker processes (the default)."""
    out = tmp_path_factory.mktemp("local") / "local.json.gz"
    return _local_file(out, _cases(), repros, in_process=False)


@pytest.fixture(scope="module")
def killed_run(cluster, tmp_path_factory, repros):
    """The selection on the cluster while LocalCluster worker 0 exits mid-run."""
    client, address, _ = cluster
    tmp = tmp_path_factory.mktemp("dask")
    marker = tmp / "worker-0-exited"
    client.register_plugin(ExitOnce(0, str(marker)), name="exit-once")
    try:
        run = run_distributed(address, BACKENDS, _cases(), load_ledger(None),
                              repro_dir=str(repros), progress=False)
    finally:
        client.unregister_worker_plugin("exit-once")
    return run, marker, tmp


def test_killed_worker_cases_rerun_and_results_match_local(killed_run, local_file):
    run, marker, tmp = killed_run
    assert marker.exists(), "worker 0 never exited: the run did not lose a worker"
    out = tmp / "dask.json.gz"
    write_results(results_document(run.backends, run.results, "test"), out)
    local, dist = _gz_text(local_file), _gz_text(out)
    assert dist == local
    rows = run.results
    assert [b.name for b in run.backends] == BACKENDS
    assert len(rows) == 2 * len(_cases()) and all(r["status"] == "ok" for r in rows)
    assert [r["case_id"] for r in rows] == [c.id for c in _cases()] * 2


def test_backend_goes_only_to_workers_advertising_it(killed_run, cluster):
    run, _, _ = killed_run
    _, _, numba = cluster
    where = {}
    for (backend, _), addr in run.placement.items():
        where.setdefault(backend, set()).add(addr)
    assert where["numba-cpu"] == {numba}
    assert numba not in where["reference"] and "" not in where["reference"]


def test_cli_shard_on_cluster_matches_local_shard(cluster, tmp_path):
    _, address, _ = cluster
    repros, cases = tmp_path / "repros", shard_cases(_cases(), "2/3")
    _local_file(tmp_path / "local.json.gz", cases, repros, in_process=True)
    assert top_cli.main(["conformance", *SELECT, "--shard", "2/3", "--scheduler", address,
                         "--repro-dir", str(repros),
                         "--out", str(tmp_path / "dask.json.gz")]) == 0
    local = _gz_text(tmp_path / "local.json.gz")
    assert local.count('"case_id"') == 2 * len(cases) > 0
    assert _gz_text(tmp_path / "dask.json.gz") == local


def test_no_worker_for_a_backend_is_a_clear_error(cluster):
    _, address, numba = cluster
    with pytest.raises(DistributedError) as e:
        run_distributed(address, ["opencl"], _cases()[:1],
                        load_ledger(None), progress=False)
    msg = str(e.value)
    assert "opencl" in msg and "backend-opencl" in msg
    assert "broken-faults, numba-cpu, reference" in msg and numba in msg


def test_a_crashing_case_is_a_crash_result_and_the_dask_worker_lives(cluster, tmp_path):
    client, address, _ = cluster
    picked = filter_cases(_built(), "Tile,Transpose", ["f32"], None)
    cases = [c for c in picked if c.op == "Tile"][:2] + [c for c in picked
                                                         if c.op == "Transpose"][:1]
    before = set(client.scheduler_info(n_workers=-1)["workers"])
    run = run_distributed(address, ["broken-faults"], cases, load_ledger(None),
                          repro_dir=str(tmp_path), progress=False)
    assert [r["status"] for r in run.results] == ["crash", "crash", "ok"]
    assert all("killed by SIGABRT" in r["message"] for r in run.results[:2])
    assert set(client.scheduler_info(n_workers=-1)["workers"]) == before
    assert set(run.placement.values()) <= before


class _Workers:
    """A stand-in client whose only worker advertises the oracle."""

    def scheduler_info(self, n_workers=-1):
        return {"workers": {"tcp://w:1": {"resources": {"backend-reference": 1, "GPU": 1}}}}


def test_a_backend_whose_workers_left_fails_the_run_instead_of_hanging():
    watch = _Watch(_Workers(), "tcp://s:1", grace=0.0)
    watch.check({"reference"})
    watch.check({"numba-cpu"})              # the first miss starts the grace period
    with pytest.raises(DistributedError, match=r"left mid-run.*numba-cpu.*tcp://w:1 "
                                               r"\(reference\)"):
        time.sleep(0.01)
        watch.check({"numba-cpu"})


def test_a_task_that_failed_for_good_gives_its_cases_crash_results(tmp_path):
    from types import SimpleNamespace

    from distributed.scheduler import KilledWorker

    backend = Described("numba-cpu", {"emulated": False})
    err = KilledWorker("run_cases-1", SimpleNamespace(address="tcp://w:1"), 3)
    rows, where = _outcome(err, "numba-cpu", backend, _cases()[:2], load_ledger(None),
                           str(tmp_path))
    assert where == "" and [r["status"] for r in rows] == ["crash", "crash"]
    assert [r["case_id"] for r in rows] == [c.id for c in _cases()[:2]]
    assert all("KilledWorker" in r["message"] and r["repro"] for r in rows)


def test_unreachable_scheduler_names_the_address(capsys):
    with socket.socket() as s:          # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        addr = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    rc = top_cli.main(["conformance", *SELECT, "--scheduler", addr, "--connect-timeout", "1"])
    assert rc == 2
    assert f"cannot reach the Dask scheduler at {addr}" in capsys.readouterr().err


def test_missing_distributed_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(DistributedError, match=r"`dist` extra"):
        import_distributed()


def test_worker_resources_and_command(capsys):
    assert dask_worker.worker_resources(["reference", "numba-cpu"], slots=2) == {
        "backend-reference": 2, "backend-numba-cpu": 2}
    with pytest.raises(RuntimeError, match="no-such-backend"):
        dask_worker.worker_resources(["no-such-backend"])
    assert top_cli.main(["worker", "--scheduler", "tcp://h:8786", "--backend", "reference",
                         "--print"]) == 0
    line = capsys.readouterr().out
    assert line.startswith("DASK_DISTRIBUTED__WORKER__DAEMON=False dask worker tcp://h:8786 ")
    assert "--resources backend-reference=1" in line


def test_local_and_cluster_flags_do_not_mix(capsys):
    rc = top_cli.main(["conformance", *SELECT, "--scheduler", "tcp://h:1", "--jobs", "2"])
    assert rc == 2 and "--jobs" in capsys.readouterr().err
