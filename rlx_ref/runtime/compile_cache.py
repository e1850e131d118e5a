"""Compile caches (RLX's ``compile_cache.rs``): ``CompileCache``, one compiled graph per
caller key with FIFO eviction, and ``BucketedCompileCache``, one compiled graph per bucket
of a dynamic dim (compiled at the bucket's upper bound), with ``run_padded`` padding inputs
up to the bucket and slicing outputs back.

Both are safe from many threads: a key (a bucket) is compiled once even when several
threads ask for it at the same time, and different keys compile in parallel. Params set on
a cached executable stay with it, as in RLX.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from .session import Session


class _Pending:
    """A compile in flight: later askers wait for it instead of compiling again."""

    def __init__(self):
        self.done = threading.Event()
        self.value = None
        self.error = None


def _once(lock, pending: dict, key, lookup, compile_fn, store):
    """``lookup(key)``, else compile once (other threads wait) and ``store`` the result."""
    with lock:
        hit = lookup(key)
        if hit is not None:
            return hit
        job = pending.get(key)
        owner = job is None
        if owner:
            job = pending[key] = _Pending()
    if not owner:
        job.done.wait()
        if job.error is not None:
            raise job.error
        return job.value
    try:
        value = compile_fn()
    except BaseException as e:
        with lock:
            pending.pop(key, None)
        job.error = e
        job.done.set()
        raise
    with lock:
        store(key, value)
        pending.pop(key, None)
    job.value = value
    job.done.set()
    return value


class CompileCache:
    """One compiled graph per caller key (``CompileCache(device, capacity)``); at capacity
    the oldest inserted entry is evicted first (FIFO: hits do not refresh an entry)."""

    def __init__(self, device="cpu", capacity: int = 8, options=None):
        if int(capacity) < 1:
            raise ValueError("CompileCache capacity must be ≥ 1")
        self.device, self.capacity, self.options = device, int(capacity), options
        self._session = Session(device)
        self._entries: OrderedDict = OrderedDict()      # insertion order = eviction order
        self._pending: dict = {}
        self._lock = threading.Lock()

    def get_or_compile(self, key, build):
        """The executable for ``key``; on a miss ``build()`` makes the graph to compile."""
        return _once(self._lock, self._pending, key, self._entries.get,
                     lambda: self._session.compile(build(), self.options), self._insert)

    def _insert(self, key, exe) -> None:
        while len(self._entries) >= self.capacity:
            self._entries.popitem(last=False)
        self._entries[key] = exe

    def contains(self, key) -> bool:
        """Whether ``key`` is cached (does not change the eviction order)."""
        return key in self._entries

    __contains__ = contains

    def keys(self) -> list:
        """Cached keys, oldest first (the next evicted is ``keys()[0]``)."""
        with self._lock:
            return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def is_empty(self) -> bool:
        return not self._entries

    def clear(self) -> None:
        """Drop every cached executable."""
        with self._lock:
            self._entries.clear()


def _bucket_text(b: range) -> str:
    return f"{b.start}..{b.stop}"


class BucketedCompileCache:
    """One compiled graph per bucket (a half-open ``range`` of key values), compiled
    lazily at the bucket's upper bound ``range.stop - 1`` by ``build(upper)``."""

    def __init__(self, device="cpu", buckets=(), options=None):
        buckets = [b if isinstance(b, range) else range(*b) for b in buckets]
        if not buckets:
            raise ValueError("BucketedCompileCache needs ≥1 bucket")
        for i, b in enumerate(buckets):
            if b.start >= b.stop:
                raise ValueError(f"bucket {i} ({_bucket_text(b)}) is empty")
            if i + 1 < len(buckets) and b.stop > buckets[i + 1].start:
                raise ValueError(f"buckets {i} ({_bucket_text(b)}) and {i + 1} "
                                 f"({_bucket_text(buckets[i + 1])}) overlap")
        self.device, self.options = device, options
        self._session = Session(device)
        self._buckets = buckets
        self._compiled: dict = {}                       # bucket index -> executable
        self._pending: dict = {}
        self._lock = threading.Lock()

    @classmethod
    def power_of_two_ladder(cls, device, min: int, max: int, options=None):
        """Buckets ``1..m+1, m+1..2m+1, ...`` with extents ``m, 2m, 4m, ...`` up to the
        first power of two ≥ ``max`` (``m`` = ``min`` rounded up to a power of two): padding
        wastes at most 2× outside the smallest bucket, as RLX's ladder."""
        if min < 1:
            raise ValueError(f"power_of_two_ladder: min must be ≥ 1, got {min}")
        if max < min:
            raise ValueError(f"power_of_two_ladder: max ({max}) must be ≥ min ({min})")
        buckets, start, extent = [], 1, 1 << (int(min) - 1).bit_length()
        while True:
            buckets.append(range(start, extent + 1))
            if extent >= max:
                break
            start, extent = extent + 1, extent * 2
        return cls(device, buckets, options)

    def bucket_for(self, key: int):
        """Index of the bucket holding ``key``, or None when no bucket does."""
        return next((i for i, b in enumerate(self._buckets) if key in b), None)

    def bucket_upper_for_key(self, key: int):
        """The compile extent (``stop - 1``) of ``key``'s bucket, or None."""
        i = self.bucket_for(key)
        return None if i is None else self._buckets[i].stop - 1

    def buckets(self) -> list:
        return list(self._buckets)

    def total_buckets(self) -> int:
        return len(self._buckets)

    def compiled_count(self) -> int:
        """How many buckets have been compiled so far."""
        return len(self._compiled)

    def compiled_for_key(self, key: int):
        """The executable of ``key``'s bucket when it has been compiled, else None."""
        i = self.bucket_for(key)
        return None if i is None else self._compiled.get(i)

    def get_or_compile(self, key: int, build):
        """``(upper, executable)`` for ``key``'s bucket (``build(upper)`` on first use), or
        None when ``key`` is in no bucket (``build`` is then not called)."""
        return self._ensure(key, lambda upper: (build(upper), {}))

    def ensure_graph_with_params(self, key: int, build):
        """Like ``get_or_compile``, ``build(upper)`` returning ``(graph, {name: value})``:
        the params are set once, when the bucket is compiled."""
        return self._ensure(key, build)

    def _ensure(self, key: int, build):
        i = self.bucket_for(key)
        if i is None:
            return None
        upper = self._buckets[i].stop - 1

        def compile_bucket():
            graph, params = build(upper)
            exe = self._session.compile(graph, self.options)
            for name, value in params.items():
                exe.set_param(name, value)
            return exe

        exe = _once(self._lock, self._pending, i, self._compiled.get, compile_bucket,
                    self._compiled.__setitem__)
        return upper, exe

    def run_padded(self, key: int, actual_rows: int, build, inputs: dict,
                   slice_outputs=True, unpadded=()):
        """RLX's "compile at max, run at less": ``(upper, outputs)`` for ``key``'s bucket,
        or None when no bucket holds ``key``. Every input not named in ``unpadded`` is
        zero-padded along axis 0 to ``upper`` rows; outputs are cut back to
        ``actual_rows`` rows: all of them (``slice_outputs=True``), or those whose entry in
        a per-output sequence of flags is true (outputs past its end stay whole, as RLX's
        ``output_inners``)."""
        found = self.get_or_compile(key, build)
        if found is None:
            return None
        upper, exe = found
        if actual_rows > upper:
            raise ValueError(f"pad_rows: actual rows {actual_rows} exceed upper bound {upper}")
        feeds = {k: (v if k in unpadded else pad_rows(v, upper)) for k, v in inputs.items()}
        exe.set_active_extent((actual_rows, upper))
        try:
            outs = exe.run(feeds)
        finally:
            exe.set_active_extent(None)
        flags = [slice_outputs] * len(outs) if isinstance(slice_outputs, bool) else \
            list(slice_outputs) + [False] * max(len(outs) - len(slice_outputs), 0)
        return upper, [slice_rows(o, actual_rows) if f else o for o, f in zip(outs, flags)]

    def evict_except(self, keep: int) -> None:
        """Drop every compiled bucket but the one at index ``keep``."""
        with self._lock:
            for i in [i for i in self._compiled if i != keep]:
                del self._compiled[i]

    def clear_compiled(self) -> None:
        """Drop every compiled bucket."""
        with self._lock:
            self._compiled.clear()


def pad_rows(data, upper: int) -> np.ndarray:
    """``data`` zero-padded along axis 0 to ``upper`` rows (RLX's ``pad_rows``)."""
    arr = np.asarray(data)
    if arr.ndim == 0:
        raise ValueError("pad_rows: a 0-d array has no rows to pad")
    rows = arr.shape[0]
    if rows > upper:
        raise ValueError(f"pad_rows: actual rows {rows} exceed upper bound {upper}")
    if rows == upper:
        return arr
    out = np.zeros((upper,) + arr.shape[1:], arr.dtype)
    out[:rows] = arr
    return out


def slice_rows(data, actual: int) -> np.ndarray:
    """The first ``actual`` rows of ``data`` along axis 0 (RLX's ``slice_rows``), as an
    array of their own (a view would keep the padded rows alive)."""
    arr = np.asarray(data)
    if arr.ndim == 0:
        raise ValueError("slice_rows: a 0-d array has no rows to slice")
    if actual > arr.shape[0]:
        raise ValueError(f"slice_rows: actual rows {actual} exceed upper {arr.shape[0]}")
    return arr if actual == arr.shape[0] else arr[:actual].copy()


__all__ = ["BucketedCompileCache", "CompileCache", "pad_rows", "slice_rows"]
