"""PoCL's kernel cache, owned by rlx_ref so that a crashed build cannot break later runs.

PoCL caches every program it builds under ``POCL_CACHE_DIR`` (default
``~/.cache/pocl/kcache``). When its kernel compiler aborts the process mid-build (LLVM's
"Cannot select" errors do), the half-written entry stays: later runs get
``clCreateKernel failed: INVALID_KERNEL_NAME``, or stale binaries. Unless the user set
``POCL_CACHE_DIR``, rlx_ref points PoCL at ``RLX_REF_CACHE_DIR/pocl`` (default
``~/.cache/rlx_ref/pocl``; PoCL keys entries by its own build and device, so two PoCLs
share it safely). Every process using it leaves a marker there that a normal exit removes:
PoCL compiles kernels at build time and again at first launch, and an abort in either
leaves the marker, so a marker whose process no longer exists means the cache may hold a
half-written entry, and the next process clears the cache before PoCL reads it (a
process that was killed costs a cold cache, nothing worse). ``program.py`` recovers from
a broken entry met anyway by rebuilding under a fresh key. The setup must run before
PoCL starts (``devices._cl`` runs it before importing pyopencl); a program that started
PoCL earlier keeps PoCL's default cache.
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import warnings
from pathlib import Path

from ...env_registry import get

_STATE: dict = {"dir": None, "done": False}
_LOCK = threading.Lock()
MARKERS = ".rlx_ref_running"


def _root() -> Path:
    root = get("RLX_REF_CACHE_DIR")
    return Path(root) if root else Path(os.path.expanduser("~")) / ".cache" / "rlx_ref"


def owned_dir() -> Path | None:
    """The PoCL cache directory rlx_ref owns in this process (None: the user's own)."""
    own_pocl_cache()
    return _STATE["dir"]


def own_pocl_cache() -> None:
    """Point PoCL's cache at rlx_ref's directory (once, before PoCL starts), clearing it if
    a process that used it ended without exiting."""
    with _LOCK:
        if _STATE["done"]:
            return
        _STATE["done"] = True
        if get("POCL_CACHE_DIR"):
            return                  # the user's choice: theirs to manage
        path = _root() / "pocl"
        try:
            (path / MARKERS).mkdir(parents=True, exist_ok=True)
        except OSError:
            path = Path(tempfile.gettempdir()) / "rlx_ref_pocl"
            (path / MARKERS).mkdir(parents=True, exist_ok=True)
        crashed = [m for m in (path / MARKERS).iterdir() if not _alive(m.name)]
        if crashed:
            _clear(path, crashed)
        _mark_running(path / MARKERS / str(os.getpid()))
        os.environ["POCL_CACHE_DIR"] = str(path)
        _STATE["dir"] = path


def _mark_running(marker: Path) -> None:
    """Leave ``marker`` while this process runs; a normal exit (also of a multiprocessing
    worker, which skips atexit) removes it."""
    import multiprocessing.util

    pid = os.getpid()

    def unmark():
        if os.getpid() == pid:          # not a forked child's exit
            marker.unlink(missing_ok=True)
    try:
        marker.touch()
    except OSError:
        return
    atexit.register(unmark)
    multiprocessing.util.Finalize(None, unmark, exitpriority=0)


def _alive(marker: str) -> bool:
    """Whether the process that wrote ``marker`` (its pid) still runs."""
    try:
        pid = int(marker)
        os.kill(pid, 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:         # someone else's live process
        return True
    return True


def _clear(path: Path, crashed: list) -> None:
    """Empty the cache at ``path`` (markers of live processes stay) and say so."""
    for entry in path.iterdir():
        if entry.name != MARKERS:
            shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(
                missing_ok=True)
    for m in crashed:
        m.unlink(missing_ok=True)
    warnings.warn(f"PoCL's kernel cache {path} was in use by a process that ended without "
                  f"exiting (pid {crashed[0].name}: a compiler crash, or killed); cleared it",
                  RuntimeWarning, stacklevel=3)


def reset_for_tests() -> None:
    """Forget the once-per-process setup (tests that point the cache elsewhere)."""
    with _LOCK:
        _STATE.update(dir=None, done=False)
