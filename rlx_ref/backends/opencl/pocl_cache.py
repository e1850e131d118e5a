"""PoCL's kernel cache, owned by rlx_ref so that a crashed build cannot break later runs.

PoCL caches every program it builds under ``POCL_CACHE_DIR`` (default
``~/.cache/pocl/kcache``). When its kernel compiler aborts the process mid-build (LLVM's
"Cannot select" errors do), the half-written entry stays: later runs get
``clCreateKernel failed: INVALID_KERNEL_NAME``, or stale binaries. Unless the user set
``POCL_CACHE_DIR``, rlx_ref points PoCL at ``RLX_REF_CACHE_DIR/pocl`` (default
``~/.cache/rlx_ref/pocl``; PoCL keys entries by its own build and device, so two PoCLs
share it safely) and marks every build it runs there; a marker left by a process that no
longer exists means a build crashed, and the next process clears the cache before PoCL
reads it. ``program.py`` recovers from a broken entry met anyway by rebuilding under a
fresh key.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import tempfile
import threading
import warnings
from pathlib import Path

_STATE: dict = {"dir": None, "done": False}
_LOCK = threading.Lock()
_COUNTER = itertools.count()
MARKERS = ".rlx_ref_building"


def _root() -> Path:
    root = os.environ.get("RLX_REF_CACHE_DIR", "").strip()
    return Path(root) if root else Path(os.path.expanduser("~")) / ".cache" / "rlx_ref"


def owned_dir() -> Path | None:
    """The PoCL cache directory rlx_ref owns in this process (None: the user's own)."""
    own_pocl_cache()
    return _STATE["dir"]


def own_pocl_cache() -> None:
    """Point PoCL's cache at rlx_ref's directory (once, before PoCL starts), clearing it if
    an earlier build crashed there."""
    with _LOCK:
        if _STATE["done"]:
            return
        _STATE["done"] = True
        if os.environ.get("POCL_CACHE_DIR", "").strip():
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
        os.environ["POCL_CACHE_DIR"] = str(path)
        _STATE["dir"] = path


def _alive(marker: str) -> bool:
    """Whether the process that wrote ``marker`` (``<pid>-<n>``) still runs."""
    try:
        pid = int(marker.split("-")[0])
        os.kill(pid, 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:         # someone else's live process
        return True
    return True


def _clear(path: Path, crashed: list) -> None:
    for entry in path.iterdir():
        if entry.name != MARKERS:
            shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(
                missing_ok=True)
    for m in crashed:
        m.unlink(missing_ok=True)
    warnings.warn(f"PoCL's kernel cache {path} was left by a build that crashed (process "
                  f"{crashed[0].name.split('-')[0]}); cleared it", RuntimeWarning,
                  stacklevel=3)


@contextlib.contextmanager
def building():
    """Mark a build in the owned cache while it runs (a crash leaves the mark)."""
    path = owned_dir()
    if path is None:
        yield
        return
    marker = path / MARKERS / f"{os.getpid()}-{next(_COUNTER)}"
    try:
        marker.touch()
    except OSError:
        marker = None
    try:
        yield
    finally:
        if marker is not None:
            marker.unlink(missing_ok=True)


def reset_for_tests() -> None:
    """Forget the once-per-process setup (tests that point the cache elsewhere)."""
    with _LOCK:
        _STATE.update(dir=None, done=False)
