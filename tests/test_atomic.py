"""Atomic writes: a killed, failing or concurrent writer never leaves a partial file."""
import errno
import os
import re
import signal
import stat
import subprocess
import sys
import threading
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from rlx_ref import _atomic
from rlx_ref._atomic import atomic_open, write_json, write_text

ROOT = Path(__file__).resolve().parents[1]


def _leftovers(d: Path) -> list:
    return sorted(p.name for p in d.iterdir() if p.name.endswith(".tmp"))


def test_write_replaces_whole_and_keeps_a_plain_files_mode(tmp_path):
    p = tmp_path / "sub" / "r.json"
    write_json(p, {"a": [1, 2]}, indent=1)
    assert p.read_text() == '{\n "a": [\n  1,\n  2\n ]\n}\n'
    assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~_atomic._UMASK
    p.chmod(0o640)
    write_text(p, "new")
    assert p.read_text() == "new" and stat.S_IMODE(p.stat().st_mode) == 0o640
    assert _leftovers(p.parent) == []


def test_failing_writer_keeps_the_previous_file(tmp_path):
    p = tmp_path / "results.json"
    write_text(p, "previous")
    with pytest.raises(OSError, match="No space"):
        with atomic_open(p) as f:
            f.write(b"half of the new")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert p.read_text() == "previous" and _leftovers(tmp_path) == []


def test_directory_target_is_refused(tmp_path):
    with pytest.raises(IsADirectoryError, match="is a directory"):
        write_text(tmp_path, "x")
    assert _leftovers(tmp_path) == []


SLOW_RUN = """
import sys, time
import numpy as np
from rlx_ref import cli

real = np.savez
def slow_savez(f, **arrays):          # write part of the archive, then stall
    f.write(b"PK partial archive")
    f.flush()
    print("writing", flush=True)
    time.sleep(120)
    real(f, **arrays)

np.savez = slow_savez
sys.exit(cli.main(sys.argv[1:]))
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_killed_cli_run_leaves_the_previous_output(tmp_path, sig):
    import rlx_ref

    g = rlx_ref.Graph("t")
    g.set_outputs([g.neg(g.input("x", [3]))])
    (tmp_path / "g.rlx").write_text(g.to_text())
    np.save(tmp_path / "x.npy", np.arange(3, dtype=np.float32))
    out = tmp_path / "out.npz"
    np.savez(out, previous=np.ones(2))
    before = out.read_bytes()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-c", SLOW_RUN, "run", str(tmp_path / "g.rlx"),
                          "--input", f"x={tmp_path / 'x.npy'}", "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        for line in p.stdout:
            if line.strip() == "writing":
                break
        assert _leftovers(tmp_path), "the writer should be mid-write in a temp file"
        p.send_signal(sig)
        p.wait(timeout=60)
    finally:
        p.kill()
    assert out.read_bytes() == before                       # untouched, not truncated
    if sig == signal.SIGTERM:
        assert p.returncode == 128 + signal.SIGTERM
        assert _leftovers(tmp_path) == []                   # cleaned up on the way out


def _write_many(args) -> None:
    path, tag = args
    for k in range(15):
        write_text(path, _payload(tag, k))


def _payload(tag: int, k: int) -> str:
    return f"{tag}:{k}:" + ("x" * (50_000 + 997 * tag)) + ":end\n"


def test_concurrent_writers_leave_one_complete_file(tmp_path):
    p = tmp_path / "shared.txt"
    threads = [threading.Thread(target=_write_many, args=((p, t),)) for t in range(4)]
    with ProcessPoolExecutor(3) as pool:
        jobs = [pool.submit(_write_many, (p, 10 + i)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for j in jobs:
            j.result()
    text = p.read_text()
    m = re.fullmatch(r"(\d+):(\d+):x+:end\n", text)
    assert m and text == _payload(int(m[1]), int(m[2]))
    assert _leftovers(tmp_path) == []


def test_no_module_writes_around_the_helper():
    pattern = re.compile(r"\.write_text\(|\.write_bytes\(|np\.savez?(_compressed)?\((?!f,)|"
                         r"json\.dump\(|open\([^)]*['\"][wax]b?\+?['\"]|shutil\.copy|"
                         r"os\.rename\(")
    offenders = [f"{p.relative_to(ROOT)}:{i}" for p in (ROOT / "rlx_ref").rglob("*.py")
                 for i, line in enumerate(p.read_text().splitlines(), 1)
                 if pattern.search(line) and p.name != "_atomic.py"]
    assert offenders == [], "write through rlx_ref._atomic instead: " + ", ".join(offenders)
