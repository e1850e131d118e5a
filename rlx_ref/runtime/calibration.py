"""Per-backend calibration (RLX's ``Calibration::load_or_measure``): the micro-benchmarks
of ``microbench`` measured once per backend and device, cached as JSON.

RLX keeps one file per backend and device name under ``~/.cache/rlx/``
(``cuda-calib-<name>.json``) and uses any file that parses and names the device. Here the
file is ``RLX_REF_CACHE_DIR/calibration/<backend>-calib-<hash of the device key>.json``
(default cache dir ``~/.cache/rlx_ref``), written atomically (``rlx_ref._atomic``), and
checked harder: a file that does not parse (corrupt or truncated), lacks a field or holds a
number that is not finite and positive, carries another schema version, or belongs to
another device (its key differs) is never used: a ``CalibrationWarning`` says why, and the
backend is measured again and the file replaced.

A measurement that stayed skewed by load (``microbench``: a large probe slower per unit
of work than its small twin, even when measured again) is used by the process that made
it, with a warning, and not written: the next process measures again.

``RLX_REF_CALIBRATION`` says when to measure: ``auto`` (read the cache, measure on a
miss), ``cached`` (read the cache, never measure) or ``off`` (no calibration: the cost
model has no evidence and the policy's order picks). Tests ``inject`` numbers instead.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import threading
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

from .._atomic import write_json
from ..env_registry import get

SCHEMA = 1
NUMBERS = ("sgemm_large_gflops", "sgemm_small_gflops", "dispatch_overhead_ns",
           "roundtrip_overhead_ns", "memory_bw_gbps")


class CalibrationWarning(RuntimeWarning):
    """A calibration file was not used (and why), or could not be written."""


@dataclass(frozen=True)
class Calibration:
    """One backend's measured numbers on one device (throughputs in GFLOP/s = FLOP/ns and
    GB/s = bytes/ns, overheads in ns: the units of RLX's ``BackendCostModel``)."""

    backend: str
    device_key: str
    sgemm_large_gflops: float
    sgemm_small_gflops: float
    dispatch_overhead_ns: float
    roundtrip_overhead_ns: float
    memory_bw_gbps: float
    source: str = "measured"            # measured (now or cached) or injected
    schema: int = SCHEMA

    def to_json(self) -> dict:
        out = asdict(self)
        out.pop("source")
        return out


class BadFile(Exception):
    """Why a calibration file cannot be trusted."""


def parse_file(text: str, backend: str, device_key: str) -> Calibration:
    """The Calibration in ``text``; BadFile says why it is not usable for this device."""
    if not text.strip():
        raise BadFile("is empty (truncated)")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        # input that stops inside a string or before a value ends was cut short
        end = e.pos >= len(text.rstrip()) or e.msg.startswith("Unterminated string")
        raise BadFile(f"is {'truncated' if end else 'corrupt'} (not JSON: {e.msg} at "
                      f"char {e.pos})") from None
    if not isinstance(obj, dict):
        raise BadFile(f"is corrupt (a JSON {type(obj).__name__}, not an object)")
    if obj.get("schema") != SCHEMA:
        raise BadFile(f"has schema version {obj.get('schema')!r}, expected {SCHEMA}")
    if obj.get("backend") != backend or obj.get("device_key") != device_key:
        raise BadFile(f"belongs to another device ({obj.get('backend')!r}, "
                      f"{obj.get('device_key')!r}), not ({backend!r}, {device_key!r})")
    values = {}
    for name in NUMBERS:
        if name not in obj:
            raise BadFile(f"is incomplete (truncated): no field {name!r}")
        v = obj[name]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                or v <= 0:
            raise BadFile(f"has a bad value {name}={v!r} (expected a finite number > 0)")
        values[name] = float(v)
    return Calibration(backend, device_key, **values)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown cpu"


def device_key(backend) -> str:
    """What a calibration is valid for: the backend, its device, its kernel style and the
    host (CPU model and count: the host backends run on it, the others are fed by it)."""
    style = getattr(backend, "kernels", None)
    parts = [backend.name, str(backend.device), f"kernels={style}" if style else "",
             f"{platform.machine()} {_cpu_model()} x{os.cpu_count()}"]
    if backend.name == "numba-cpu":
        import numba

        parts.append(f"threads={numba.config.NUMBA_NUM_THREADS}")
    return "; ".join(p for p in parts if p)


def cache_root() -> Path:
    root = get("RLX_REF_CACHE_DIR")
    base = Path(root) if root else Path(os.path.expanduser("~")) / ".cache" / "rlx_ref"
    return base / "calibration"


def cache_path(backend_name: str, key: str) -> Path:
    slug = "".join(c if c.isalnum() else "_" for c in backend_name)
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache_root() / f"{slug}-calib-{digest}.json"


def load_or_measure(backend, measure=None, mode: str | None = None):
    """``backend``'s Calibration: from its cache file when that is sound, else measured
    (``measure(backend)`` → dict of numbers; default the micro-benchmarks) and saved.
    None when ``mode`` (default ``RLX_REF_CALIBRATION``) forbids measuring or the
    backend cannot be measured."""
    from .microbench import CalibrationSkipped
    from .microbench import measure as micro

    mode = mode or get("RLX_REF_CALIBRATION")
    if mode == "off":
        return None
    key = device_key(backend)
    path = cache_path(backend.name, key)
    try:
        return parse_file(path.read_text(encoding="utf-8", errors="replace"),
                          backend.name, key)
    except FileNotFoundError:
        pass
    except (BadFile, OSError) as e:
        then = "measuring again" if mode == "auto" else "not used (RLX_REF_CALIBRATION=cached)"
        _warn(f"calibration file {path} {e}; {then}")
    if mode != "auto":
        return None
    try:
        numbers = (measure or micro)(backend)
    except CalibrationSkipped:
        return None
    except Exception as e:  # noqa: BLE001 - a backend that cannot run the probes: no data
        _warn(f"calibrating {backend.name} failed ({type(e).__name__}: {e}); its device "
              "gets no cost estimate")
        return None
    cal = Calibration(backend.name, key, **{n: float(numbers[n]) for n in NUMBERS})
    skew = numbers.get("skew") or []
    if skew:                            # numbers bent by load: used now, never kept
        _warn(f"calibrating {backend.name} on a busy machine: {'; '.join(skew)}; these "
              "numbers are used by this process only, the next one measures again")
        return cal
    try:
        write_json(path, cal.to_json(), indent=2, sort_keys=True)
    except OSError as e:
        _warn(f"cannot write {path} ({e.strerror or e}); the next process measures again")
    return cal


def _warn(message: str) -> None:
    warnings.warn(f"rlx_ref: {message}", CalibrationWarning, stacklevel=3)


# ── per device, once per process ────────────────────────────────────────────

_LOCK = threading.Lock()
_KNOWN: dict = {}                # backend key -> Calibration, or None (measured: no data)
_KEY_LOCKS: dict = {}


def calibration_for(device):
    """The Calibration of ``device``'s backend (injected, else ``load_or_measure`` once
    per process), or None when there is none (unavailable, off, failed)."""
    from .devices import backend_for, backend_key, is_available

    key = backend_key(device)
    if key in _KNOWN:
        return _KNOWN[key]
    mode = get("RLX_REF_CALIBRATION")
    if mode == "off" or not is_available(device):
        return None
    with _LOCK:
        lock = _KEY_LOCKS.setdefault(key, threading.Lock())
    with lock:                          # two threads asking at once measure once
        if key not in _KNOWN:
            cal = load_or_measure(backend_for(device), mode=mode)
            if cal is None and mode == "cached":
                return None             # a later measurement may still be allowed
            _KNOWN[key] = cal
    return _KNOWN[key]


def inject(device, calibration: Calibration | dict | None) -> None:
    """Use ``calibration`` for ``device`` from now on (a dict of the numbers is enough;
    None means "no data"): what tests use so they never benchmark."""
    from .devices import backend_key, parse_device

    if isinstance(calibration, dict):
        dev = parse_device(device)
        calibration = Calibration(dev.spec or dev.label, "injected", source="injected",
                                  **{n: float(calibration[n]) for n in NUMBERS})
    with _LOCK:
        _KNOWN[backend_key(device)] = calibration


def forget(device=None) -> None:
    """Drop what this process knows about ``device`` (default: every device)."""
    from .devices import backend_key

    with _LOCK:
        if device is None:
            _KNOWN.clear()
        else:
            _KNOWN.pop(backend_key(device), None)


__all__ = ["BadFile", "Calibration", "CalibrationWarning", "NUMBERS", "SCHEMA", "cache_path",
           "calibration_for", "device_key", "forget", "inject", "load_or_measure",
           "parse_file"]
