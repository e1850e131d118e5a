"""Kernel variants: what a backend may run for a kind, what selects it, and which ran.

A backend declares its variants once (``declare``): each has a stable name
``"<backend>:<family>.<variant>"`` (e.g. ``"numba-cpu:transpose.tiled"``), the kinds it
serves, the selection rule in words, the threshold option the rule compares against (if
any) and the device type it runs on (``"cpu"``, ``"gpu"`` or None for any). Size
thresholds are named options with a default and a floor (the least value the kernel is
correct at); ``threshold(name)`` reads the value in force: a compile's
``CompileOptions(thresholds={...})``, else ``RLX_REF_THRESHOLDS=name=value,...``, else the
default. Lowering code calls ``chose(name)`` where it picks a variant; a backend's plan
collects those names (``lowering``) and its executable reports them as ``variants_run()``.
"""
from __future__ import annotations

import contextvars
import importlib
from contextlib import contextmanager
from dataclasses import dataclass

from ..env_registry import get

ENV = "RLX_REF_THRESHOLDS"
LOWERED_TAG = "lowered-thresholds"      # cases run with every threshold at its floor
# where each backend's declarations live (imported on first use; they import no driver)
_MODULES = {"numba-cpu": "rlx_ref.backends.numba_cpu.variant_table",
            "opencl": "rlx_ref.backends.opencl.variant_table"}


@dataclass(frozen=True)
class Variant:
    """One kernel path: ``name`` (backend-qualified), the kinds it serves, its rule."""

    name: str
    kinds: tuple
    rule: str
    threshold: str | None = None    # the threshold option the rule compares against
    device: str | None = None       # "cpu" / "gpu": runs only on that device type

    @property
    def backend(self) -> str:
        return self.name.split(":", 1)[0]


@dataclass(frozen=True)
class Threshold:
    """A size threshold that selects variants: default, floor (least correct value) and
    the value of the ``lowered-thresholds`` pass (None: the floor; the default where the
    floor would hide the variant below the threshold from every small case)."""

    name: str
    default: int
    floor: int
    rule: str
    lowered: int | None = None


class VariantError(ValueError):
    """A threshold option or variant name that is not declared, or a bad value."""


_VARIANTS: dict = {}        # backend -> {name: Variant}
_THRESHOLDS: dict = {}      # backend -> {name: Threshold}
_OVERRIDES = contextvars.ContextVar("rlx_ref_thresholds", default=None)
_RECORDER = contextvars.ContextVar("rlx_ref_variants", default=None)


def declare(backend: str, variants, thresholds=()) -> None:
    """Register ``backend``'s variants and threshold options (names must carry the
    ``backend:`` prefix and be unique)."""
    vs = _VARIANTS.setdefault(backend, {})
    ts = _THRESHOLDS.setdefault(backend, {})
    for item, table in [(t, ts) for t in thresholds] + [(v, vs) for v in variants]:
        if not item.name.startswith(backend + ":"):
            raise VariantError(f"{item.name!r} is declared for {backend} but lacks the "
                               f"'{backend}:' prefix")
        if item.name in table:
            raise VariantError(f"{item.name!r} is declared twice")
        table[item.name] = item
    for v in variants:
        if v.threshold is not None and v.threshold not in ts:
            raise VariantError(f"{v.name} compares against {v.threshold!r}, which "
                               f"{backend} does not declare")


def _load(backend: str) -> None:
    mod = _MODULES.get(backend)
    if mod is not None and backend not in _VARIANTS:
        importlib.import_module(mod)


def backends() -> list:
    """Backends that declare variants."""
    return sorted(_MODULES)


def declared(backend: str) -> dict:
    """``{name: Variant}`` of ``backend`` (empty for a backend that declares none)."""
    _load(backend)
    return dict(_VARIANTS.get(backend, {}))


def thresholds(backend: str) -> dict:
    """``{name: Threshold}`` of ``backend``."""
    _load(backend)
    return dict(_THRESHOLDS.get(backend, {}))


def serving(backend: str, kind: str) -> list:
    """The declared variants of ``backend`` that serve op ``kind`` (declaration order)."""
    return [v for v in declared(backend).values() if kind in v.kinds]


def applicable(backend: str, device_types=("cpu",)) -> dict:
    """The declared variants that can run on devices of ``device_types``."""
    return {n: v for n, v in declared(backend).items()
            if v.device is None or v.device in device_types}


def lowered(backend: str) -> dict:
    """The thresholds ``lowered-thresholds`` cases compile with: each at its floor (or its
    declared ``lowered`` value)."""
    return {n: t.floor if t.lowered is None else t.lowered
            for n, t in thresholds(backend).items()}


def parse_values(text: str, where: str = ENV) -> dict:
    """``"a=1,b=2"`` -> ``{"a": 1, "b": 2}`` (sizes may be written ``64k``/``1m``)."""
    out = {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        name, eq, value = part.partition("=")
        v = value.strip().lower()
        scale = {"k": 1 << 10, "m": 1 << 20}.get(v[-1:], 1)
        digits = v[:-1] if scale > 1 else v
        if not eq or not digits.isdigit():
            raise VariantError(f"{where}: {part!r} is not name=integer "
                               "(e.g. numba-cpu:ew.par_min=64)")
        out[name.strip()] = int(digits) * scale
    return out


def check_values(values: dict, where: str = "thresholds") -> dict:
    """``values`` checked: every name a declared threshold, every value at or above its
    floor (below it the kernel would be wrong)."""
    out = {}
    for name, value in (values or {}).items():
        backend = str(name).split(":", 1)[0]
        known = thresholds(backend)
        if name not in known:
            raise VariantError(f"{where}: unknown threshold {name!r}; {backend} declares "
                               f"{', '.join(sorted(known)) or 'none'}")
        if not isinstance(value, int) or isinstance(value, bool) or value < known[name].floor:
            raise VariantError(f"{where}: {name} must be an integer >= "
                               f"{known[name].floor} (its floor), got {value!r}")
        out[name] = value
    return out


def threshold(name: str) -> int:
    """The value of threshold ``name`` in force (compile option, environment, default)."""
    over = _OVERRIDES.get()
    if over and name in over:
        return over[name]
    env = get(ENV)
    if env:
        vals = check_values(parse_values(env), ENV)
        if name in vals:
            return vals[name]
    backend = name.split(":", 1)[0]
    t = thresholds(backend).get(name)
    if t is None:
        raise VariantError(f"unknown threshold {name!r}")
    return t.default


def chose(name: str) -> None:
    """Record that the plan being lowered uses variant ``name`` (which must be declared:
    an undeclared path could never be checked for coverage)."""
    backend = name.split(":", 1)[0]
    if name not in _VARIANTS.get(backend, ()):
        raise VariantError(f"kernel variant {name!r} is not declared by {backend} "
                           f"(add it to the backend's variant_table)")
    rec = _RECORDER.get()
    if rec is not None:
        rec.add(name)


@contextmanager
def lowering(options=None):
    """Lower inside: the options' thresholds are in force and ``chose`` records into the
    yielded set (nested plans' choices reach the enclosing plan's set too)."""
    given = options.get("thresholds") if isinstance(options, dict) else \
        getattr(options, "thresholds", None)
    values = check_values(given or {}, "CompileOptions.thresholds")
    outer = _RECORDER.get()
    rec: set = set()
    t_over = _OVERRIDES.set({**(_OVERRIDES.get() or {}), **values}) if values else None
    t_rec = _RECORDER.set(rec)
    try:
        yield rec
    finally:
        _RECORDER.reset(t_rec)
        if t_over is not None:
            _OVERRIDES.reset(t_over)
        if outer is not None:
            outer.update(rec)


def undeclared(backend: str, names) -> list:
    """The names in ``names`` that ``backend`` does not declare (a lowering bug)."""
    known = declared(backend)
    return sorted(n for n in names if n not in known)
