"""Numba's on-disk kernel cache, made safe for rlx_ref's functions.

Numba trusts its cache files: a truncated or random ``.nbi``/``.nbc`` raises inside every
later compile of that function, and a flipped bit in the stored machine code is not noticed
at all. For functions defined by rlx_ref (its modules and its generated kernel modules)
each cache file carries a SHA-256 of its payload, checked on load; a bad entry is deleted
and the function recompiled. A cache location that cannot be written (read-only, full
disk, no locator) makes the function compile in memory instead of failing. Each of the two
events warns once per process (``KernelCacheWarning``).
"""
from __future__ import annotations

import hashlib
import io
import os
import pickle
import threading
import warnings
from pathlib import Path

from numba.core import caching, dispatcher

from ..._atomic import write_bytes

MAGIC = b"RLXNBC1\n"                 # format tag of a checked cache payload
_WARNED: set = set()
_LOCK = threading.Lock()


class KernelCacheWarning(RuntimeWarning):
    """A kernel cache entry was discarded, or the cache could not be used."""


def warn_once(event: str, message: str) -> None:
    """Warn about ``event`` ("corrupt" or "unwritable") the first time it happens here."""
    with _LOCK:
        if event in _WARNED:
            return
        _WARNED.add(event)
    warnings.warn(f"rlx_ref kernel cache: {message}", KernelCacheWarning, stacklevel=3)


def warn_corrupt(path, why: str) -> None:
    warn_once("corrupt", f"discarded the damaged entry {path} ({why}); recompiling "
              "(later damaged entries in this process are replaced without a warning)")


def warn_unwritable(where, why, instead: str = "compiling in memory, so the next "
                    "process compiles again") -> None:
    warn_once("unwritable", f"cannot write under {where} ({why}); {instead}")


class CorruptEntry(Exception):
    """A cache file whose checksum, format tag or pickle does not hold."""


def seal(payload: bytes) -> bytes:
    return MAGIC + hashlib.sha256(payload).digest() + payload


def unseal(blob: bytes) -> bytes:
    """The payload of a sealed blob; CorruptEntry when it was damaged."""
    head = len(MAGIC) + 32
    if len(blob) < head or not blob.startswith(MAGIC):
        raise CorruptEntry("missing format tag: truncated or not written by rlx_ref")
    payload = blob[head:]
    if hashlib.sha256(payload).digest() != blob[len(MAGIC):head]:
        raise CorruptEntry("checksum mismatch")
    return payload


def _unsealed(blob: bytes) -> bool:
    """A whole, valid entry in plain Numba's unchecked format (an older rlx_ref wrote it).

    It cannot be verified, so it is replaced, but quietly: it is not damage.
    """
    if blob.startswith(MAGIC):
        return False
    try:
        pickle.loads(blob)
    except Exception:  # noqa: BLE001 - not a pickle: damaged, and reported as such
        return False
    return True


class CheckedCacheFile(caching.IndexDataCacheFile):
    """Numba's index + data files, each sealed with a checksum and written atomically."""

    def _load_index(self):
        try:
            blob = Path(self._index_path).read_bytes()
        except FileNotFoundError:
            return {}
        try:
            f = io.BytesIO(blob)
            version = pickle.load(f)
            if version != self._version:
                return {}                      # another Numba version's entry: not damage
            rest = f.read()
            if _unsealed(rest):
                self.discard(self._index_path, "", quiet=True)
                return {}
            stamp, overloads = pickle.loads(unseal(rest))
            if not isinstance(overloads, dict):
                raise CorruptEntry("index is not a mapping")
        except Exception as e:  # noqa: BLE001 - any unreadable index is a damaged entry
            self.discard(self._index_path, e)
            return {}
        if stamp != self._source_stamp:
            return {}
        # an entry whose data file is not named by its key was written in the older
        # numbered layout, where racing writers could cross signatures: recompile it
        return {k: v for k, v in overloads.items() if v == self._entry_name(k)}

    def _entry_name(self, key) -> str:
        """The data file of ``key``: named by its hash (see ``save``)."""
        digest = hashlib.sha256(str(key).encode()).hexdigest()[:20]
        return f"{self._index_name[:-len('.nbi')]}.{digest}.nbc"      # numba: base.N.nbc

    def save(self, key, data):
        """Save ``data`` in a file named by ``key``'s hash, then index it.

        Numba numbers a function's data files; two processes adding overloads of one
        function at once can pick the same number, and the loser's index entry then names
        the other signature's machine code ("can't unbox array", or a crash). Named by the
        key, two signatures never share a file; a racing index write can only drop an
        entry (a cache miss: that signature compiles again). The data is written first, so
        an index entry never names a file that is not yet whole."""
        name = self._entry_name(key)
        self._save_data(name, data)
        overloads = self._load_index()
        if overloads.get(key) != name:
            overloads[key] = name
            self._save_index(overloads)

    def _save_index(self, overloads):
        payload = self._dump((self._source_stamp, overloads))
        write_bytes(self._index_path, pickle.dumps(self._version, protocol=-1) + seal(payload),
                    mkdir=False)

    def _load_data(self, name):
        path = self._data_path(name)
        blob = Path(path).read_bytes()             # OSError: numba treats it as a miss
        if _unsealed(blob):
            self.discard(path, "", quiet=True)
            raise FileNotFoundError(path)
        try:
            return pickle.loads(unseal(blob))
        except Exception as e:  # noqa: BLE001 - any unreadable data file is damage
            self.discard(path, e)
            raise FileNotFoundError(path) from None

    def _save_data(self, name, data):
        write_bytes(self._data_path(name), seal(self._dump(data)), mkdir=False)

    def discard(self, path, why, quiet: bool = False) -> None:
        """Delete this function's index and data files (every signature recompiles)."""
        if not quiet:
            warn_corrupt(path, why if isinstance(why, str) else
                         f"{type(why).__name__}: {why}".rstrip(": "))
        base = Path(self._index_path).name[:-len(".nbi")]
        for p in [Path(self._index_path), *Path(self._cache_path).glob(f"{base}.*.nbc")]:
            try:
                p.unlink()
            except FileNotFoundError:
                pass
            except OSError:
                warn_unwritable(self._cache_path, "cannot delete a damaged entry")


class CheckedFunctionCache(caching.FunctionCache):
    """A FunctionCache over CheckedCacheFile whose failures never fail a compile."""

    def __init__(self, py_func):
        super().__init__(py_func)
        old = self._cache_file
        self._cache_file = CheckedCacheFile(old._cache_path, self._impl.filename_base,
                                            old._source_stamp)

    def load_overload(self, sig, target_context):
        try:
            return super().load_overload(sig, target_context)
        except Exception as e:  # noqa: BLE001 - a cache that cannot load is a miss
            self._cache_file.discard(self._cache_file._index_path, e)
            return None

    def save_overload(self, sig, data):
        try:
            super().save_overload(sig, data)
        except OSError as e:
            warn_unwritable(self._cache_path, e.strerror or e)
            self.disable()                     # this function stays in memory from now on


def owned(py_func) -> bool:
    """Functions defined by rlx_ref modules or its generated kernel modules."""
    return (getattr(py_func, "__module__", None) or "").startswith("rlx_ref")


_ORIGINAL = dispatcher.Dispatcher.enable_caching


def _enable_caching(self):
    if not owned(self.py_func):
        return _ORIGINAL(self)
    try:
        self._cache = CheckedFunctionCache(self.py_func)
    except (RuntimeError, OSError) as e:      # no writable cache location at all
        where = getattr(self.py_func, "__code__", None)
        warn_unwritable(os.path.dirname(where.co_filename) if where else "?", e)
        self._cache = caching.NullCache()


def install() -> None:
    """Route caching of rlx_ref's Numba functions through the checked cache (idempotent)."""
    dispatcher.Dispatcher.enable_caching = _enable_caching


install()
