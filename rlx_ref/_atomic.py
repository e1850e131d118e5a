"""Atomic file writes: every file rlx_ref writes goes through here.

A write goes to a fresh temp file in the target's directory, is flushed and fsynced, then
``os.replace``-d over the target and the directory is fsynced. Readers (and a crash, a full
disk or a SIGTERM at any moment) see either the previous file or the complete new one,
never a truncated mix; the temp file is removed when the write fails. Several threads or
processes writing one path each use their own temp file, so the last rename wins whole.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path


def _read_umask() -> int:
    mask = os.umask(0o022)        # the only portable way to read it: set, then restore
    os.umask(mask)
    return mask


_UMASK = _read_umask()            # read once at import, before any writer threads exist


def _check_target(path: Path) -> None:
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a directory (expected a file path)",
                                str(path))


def _fsync_dir(directory: Path) -> None:
    """Make the rename durable; some filesystems refuse fsync on a directory (fine)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_open(path, mode: str = "wb", encoding: str | None = None, mkdir: bool = True):
    """Open a temp file beside ``path`` for writing; on a clean exit it replaces ``path``.

    For writers that take a file object (``np.savez(f, ...)``, ``json.dump``). On any
    exception (including SystemExit from a signal) the temp file is removed and ``path`` is
    left as it was.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open mode must be 'w' or 'wb', not {mode!r}")
    path = Path(path)
    _check_target(path)
    if mkdir:
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:            # name the file asked for, not the temp file beside it
        raise type(e)(e.errno, e.strerror, str(path)) from None
    try:
        with os.fdopen(fd, mode, encoding=encoding if "b" not in mode else None) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        # mkstemp makes 0600 files; give the result the mode a plain open() would have
        try:
            mode_bits = os.stat(path).st_mode & 0o7777
        except OSError:
            mode_bits = 0o666 & ~_UMASK
        os.chmod(tmp, mode_bits)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def write_bytes(path, data: bytes, mkdir: bool = True) -> None:
    """Atomically replace ``path`` with ``data``."""
    with atomic_open(path, "wb", mkdir=mkdir) as f:
        f.write(data)


def write_text(path, text: str, encoding: str = "utf-8", mkdir: bool = True) -> None:
    """Atomically replace ``path`` with ``text``."""
    write_bytes(path, text.encode(encoding), mkdir=mkdir)


def write_json(path, obj, **dumps_kw) -> None:
    """Atomically replace ``path`` with ``json.dumps(obj, **dumps_kw)`` and a newline."""
    write_text(path, json.dumps(obj, **dumps_kw) + "\n")


def exit_on_sigterm() -> None:
    """Make SIGTERM raise SystemExit(143) so writes in flight clean up their temp files.

    Only in the main thread and only when SIGTERM still has its default action (an
    embedding program's own handler is left alone).
    """
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def _raise(signum, frame):
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, _raise)


__all__ = ["atomic_open", "write_bytes", "write_text", "write_json", "exit_on_sigterm"]
