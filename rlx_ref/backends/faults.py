"""Planted faults in the real kernels: the seam that measures the conformance suite's power.

A ``Fault`` is one small mutation of a real backend (``numba-cpu`` or ``opencl``): either a
source edit of a generated kernel (``edits``: old text → new text, or a regex), applied where
the backend hands kernel source to its compiler (``rewrite``), or a replaced Python-level
lowering attribute (``patches``: a module attribute such as a read-mode chooser or an
identity function). Nothing is reimplemented: the faulty backend is the real one with one
mutation. A fault is active only inside ``active(fault)``; the backend spec
``numba-cpu+fault:NAME`` (``FaultedBackend``) activates it around every compile and run.
A fault in kernels of one device style names the spec that renders them (``spec``, e.g.
``opencl/gpu-kernels`` for OpenCL's work-group kernels): its selection runs there.

Faulty and real kernels never share a cache entry: edited source hashes to a different
kernel file (Numba) and program (OpenCL), and module-level kernel memos the fault names in
``resets`` are cleared when it is switched on and off.
"""
from __future__ import annotations

import importlib
import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field

SEP = "+fault:"


class FaultError(RuntimeError):
    """A fault that does not apply: unknown name, or its anchor text is gone."""


@dataclass(frozen=True)
class Fault:
    """One planted defect and the conformance selection that must catch it."""

    name: str
    backend: str                    # "numba-cpu" or "opencl"
    bug_class: str                  # e.g. "tail off-by-one", "wrong reduction identity"
    variant: str                    # the kernel variant it sits in (e.g. "elementwise.par")
    doc: str
    ops: str                        # --op pattern of the selection
    dtypes: str | None = None       # --dtype of the selection
    tags: tuple = ()                # keep only cases carrying all of these tags
    attr_op: str = ""               # keep only cases with a node whose attrs.op is this
    limit: int = 12                 # at most this many cases (the first, in suite order)
    kernel: str = ""                # edits apply to kernels whose name starts with this
    edits: tuple = ()               # (old, new) literal or ("re:" + pattern, replacement)
    patches: tuple = ()             # ("module:attr", factory(original) -> replacement)
    resets: tuple = ()              # ("module:attr", value) memos cleared on and off
    gap: str = ""                   # why the current contracts cannot catch it (if so)
    spec: str = ""                  # the backend spec its selection runs on (default backend)
    count: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def run_spec(self) -> str:
        """The spec of the real backend this fault is planted in (``spec`` or ``backend``)."""
        return self.spec or self.backend


_LOCK = threading.RLock()
_ACTIVE: list = []


def current(backend: str):
    """The fault active for ``backend`` now, or None."""
    return next((f for f in _ACTIVE if f.backend == backend), None)


def rewrite(backend: str, name: str, source: str) -> str:
    """``source`` of kernel ``name`` with the active fault's edits (unchanged when none)."""
    f = current(backend)
    if f is None or not f.edits or not name.startswith(f.kernel):
        return source
    for old, new in f.edits:
        if old.startswith("re:"):
            source, n = re.subn(old[3:], new, source)
        else:
            n = source.count(old)
            source = source.replace(old, new)
        f.count[old] = f.count.get(old, 0) + n
    return source


def _resolve(path: str):
    module, _, attr = path.partition(":")
    return importlib.import_module(module), attr


@contextmanager
def active(fault: Fault):
    """Switch ``fault`` on for the duration (one fault per backend at a time)."""
    with _LOCK:
        if current(fault.backend) not in (None, fault):
            raise FaultError(f"another fault is already active on {fault.backend}")
        saved = []
        for path, factory in fault.patches:
            mod, attr = _resolve(path)
            original = getattr(mod, attr)
            saved.append((mod, attr, original))
            setattr(mod, attr, factory(original))
        memos = [(*_resolve(p), v) for p, v in fault.resets]
        for mod, attr, v in memos:
            setattr(mod, attr, v)
        _ACTIVE.append(fault)
    try:
        yield fault
    finally:
        with _LOCK:
            _ACTIVE.remove(fault)
            for mod, attr, original in reversed(saved):
                setattr(mod, attr, original)
            for mod, attr, v in memos:
                setattr(mod, attr, v)


def split_spec(spec: str) -> tuple[str, str | None]:
    """``'numba-cpu+fault:NAME'`` → ('numba-cpu', 'NAME'); a plain spec → (spec, None)."""
    base, sep, name = spec.partition(SEP)
    return (base, name) if sep else (spec, None)


class FaultedExecutable:
    """An executable of the real backend whose every run has the fault active."""

    def __init__(self, inner, fault: Fault):
        self._inner, self._fault = inner, fault

    def __getattr__(self, attr):
        return getattr(self._inner, attr)

    def set_param(self, name, value):
        with active(self._fault):
            return self._inner.set_param(name, value)

    def run(self, inputs):
        with active(self._fault):
            return self._inner.run(inputs)

    def run_flat(self, inputs):
        with active(self._fault):
            return self._inner.run_flat(inputs)


class FaultedBackend:
    """The real backend ``inner`` with ``fault`` planted (compile and run inside it)."""

    test_only = True

    def __init__(self, inner, fault: Fault):
        if fault.backend != inner.name:
            raise FaultError(f"fault {fault.name!r} is planted in {fault.backend}, "
                             f"not in {inner.name}")
        _check_style(inner, fault)
        self._inner, self.fault = inner, fault
        self.name = f"{inner.name}{SEP}{fault.name}"

    def __getattr__(self, attr):
        return getattr(self._inner, attr)

    def compile(self, graph, options=None):
        with active(self.fault):
            return FaultedExecutable(self._inner.compile(graph, options), self.fault)


def _check_style(inner, fault: Fault) -> None:
    """FaultError when ``inner`` (usable) never renders the kernels of the fault's variant:
    the fault would plant nothing."""
    from . import variants

    var = variants.declared(fault.backend).get(fault.variant)
    avail = getattr(inner, "availability", None)
    if var is None or var.device is None or not (avail and avail()[0]):
        return
    types = tuple(getattr(inner, "device_types", ()))
    if var.device not in types:
        raise FaultError(f"fault {fault.name!r} sits in {fault.variant} ({var.device}-style "
                         f"kernels), which this {inner.name} backend ({', '.join(types)}-"
                         f"style) never runs; plant it in {fault.run_spec}{SEP}{fault.name}")


def faulted(inner, name: str) -> FaultedBackend:
    """``inner`` with the catalogued fault ``name`` planted; FaultError names the known."""
    from .fault_catalogue import by_name

    return FaultedBackend(inner, by_name(name))
