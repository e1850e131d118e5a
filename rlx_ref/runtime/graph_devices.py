"""One graph, compiled lazily per device (RLX's ``GraphDevices``, ``warm_all`` and
``benchmark_devices``).

Params given to ``set_param`` / ``set_param_typed`` are kept and mirrored to every
executable compiled so far and to every one compiled later. Safe from many threads: each
device compiles once (a lock per device, so devices compile in parallel), a param update
and a newly compiled executable never miss each other (one lock orders them), and runs go
straight to the executables, which take concurrent runs.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from .devices import backend_for, backend_key, is_available, parse_device
from .fallback import DeviceFallbackError, error_text, try_chain
from .policy import (DevicePolicy, DeviceResolveError, device_chain_from_env, device_report,
                     devices_for_with_policy, resolve_device, resolve_device_chain)


class GraphDevicesError(RuntimeError):
    """A device this runner cannot use (unavailable, or not viable under its policy)."""


@dataclass(frozen=True)
class DeviceBenchResult:
    """One device timed: compile (0 when already compiled) and the median run."""

    device: object
    label: str
    compile_ns: int
    median_exec_ns: int


class GraphDevices:
    """A graph plus lazy per-device executables (``GraphDevices(graph, policy=None)``)."""

    def __init__(self, graph, policy: DevicePolicy | None = None):
        self.graph = graph
        self._lock = threading.Lock()           # orders params, cache and device locks
        self.last_skipped: list = []            # (label, error) the last run_try passed over
        self._set_policy(policy or DevicePolicy.all())

    @classmethod
    def with_policy(cls, graph, policy: DevicePolicy) -> GraphDevices:
        return cls(graph, policy)

    @classmethod
    def from_env(cls, graph) -> GraphDevices:
        return cls(graph, DevicePolicy.from_env())

    def _set_policy(self, policy: DevicePolicy) -> None:
        supported = devices_for_with_policy(self.graph, policy)
        with self._lock:
            self.policy = policy
            self._supported = supported
            self._cache: dict = {}              # backend key -> executable
            self._device_locks: dict = {}
            self._params: dict = getattr(self, "_params", {})
            self._winner = None

    def set_policy(self, policy: DevicePolicy) -> None:
        """Use ``policy`` from now on (drops every executable)."""
        self._set_policy(policy)

    def invalidate_cache(self) -> None:
        """Drop every executable and the benchmark winner; re-probe the devices."""
        self._set_policy(self.policy)

    # ── introspection ──────────────────────────────────────────────────────

    def devices(self) -> list:
        """Labels of the devices that can run the graph under the policy."""
        return [d.label for d in self._supported]

    def report(self) -> list:
        return device_report(self.graph, self.policy)

    def fastest(self) -> str:
        """The cost model's pick (nothing is compiled)."""
        from .device_cost import fastest_device_for

        return fastest_device_for(self.graph, self.policy).label

    def resolve(self, hint=None):
        return resolve_device(self.graph, hint, self.policy)

    def resolve_chain(self, hint=None):
        """``RLX_DEVICE_CHAIN``'s first viable device when set, else ``resolve``."""
        if hint is not None:
            return self.resolve(hint)
        chain = device_chain_from_env()
        return resolve_device_chain(self.graph, chain, self.policy) if chain \
            else self.resolve(None)

    # ── params ─────────────────────────────────────────────────────────────

    def set_param(self, name: str, data) -> None:
        """Bind ``name`` on every executable, now and compiled later."""
        self._put_param(name, ("array", data))

    def set_param_typed(self, name: str, data: bytes, dtype: str) -> None:
        """pyrlx's typed upload (raw little-endian bytes of ``dtype``), mirrored alike."""
        self._put_param(name, ("typed", bytes(data), str(dtype)))

    def _put_param(self, name: str, value: tuple) -> None:
        with self._lock:
            for exe in self._cache.values():
                _apply(exe, name, value)            # a bad value fails before it is kept
            self._params = {**self._params, name: value}

    def sync_params_to_all(self) -> None:
        """Bind every kept param again on every executable."""
        with self._lock:
            for exe in self._cache.values():
                for name, value in self._params.items():
                    _apply(exe, name, value)

    # ── compile and run ────────────────────────────────────────────────────

    def compile(self, device):
        """The executable for ``device``, compiled on first use (once per backend)."""
        dev = parse_device(device)
        key = backend_key(dev)
        exe = self._cache.get(key)
        if exe is not None:
            return exe
        self._ensure_supported(dev)
        with self._lock:
            lock = self._device_locks.setdefault(key, threading.Lock())
        with lock:
            exe = self._cache.get(key)
            if exe is None:
                exe = backend_for(dev).compile(self.graph)
                with self._lock:
                    for name, value in self._params.items():
                        _apply(exe, name, value)
                    self._cache[key] = exe
        return exe

    def _ensure_supported(self, dev) -> None:
        if not is_available(dev):
            raise GraphDevicesError(f"device {dev} is not available — install or enable "
                                    "its backend (see rlx_ref.backends_manifest())")
        if dev not in self._supported:
            raise GraphDevicesError(f"device {dev} cannot lower this graph under the active "
                                    "policy")

    def compiled(self) -> list:
        """Labels of the devices compiled so far, one per backend."""
        return [lbl for lbl in self.devices() if backend_key(lbl) in self._cache]

    def compile_fastest(self):
        return self.compile(self.fastest())

    def compile_resolved(self, hint=None):
        return self.compile(self.resolve(hint))

    def compile_chain(self, hint=None):
        return self.compile(self.resolve_chain(hint))

    def run(self, device, inputs: dict) -> list:
        """Run on ``device`` (compiled on first use)."""
        return self.compile(device).run(inputs)

    def run_resolved(self, inputs: dict, device=None) -> list:
        return self.compile_resolved(device).run(inputs)

    def run_fastest(self, inputs: dict) -> list:
        return self.compile_fastest().run(inputs)

    def run_try(self, chain, inputs: dict) -> tuple:
        """``(label, outputs)`` from the first device of ``chain`` that compiles and runs;
        ``DeviceFallbackError`` lists every attempt when none does. ``last_skipped`` keeps
        the ``(label, error)`` of the devices passed over on the way."""
        skipped: list = []
        dev, outs = try_chain(chain, self._supported, lambda d: self.run(d, inputs), skipped)
        self.last_skipped = [(d.label, msg) for d, msg in skipped]
        return dev.label, outs

    def run_chain(self, inputs: dict, device=None) -> tuple:
        """``device`` alone when given; else ``RLX_DEVICE_CHAIN`` via ``run_try``; else
        the resolved device. Errors are ``DeviceFallbackError``s."""
        if device is None:
            chain = device_chain_from_env()
            if chain:
                return self.run_try(chain, inputs)
            try:
                device = self.resolve(None)
            except DeviceResolveError as e:
                raise DeviceFallbackError([(parse_device("cpu"), str(e))], [e]) from e
        dev = parse_device(device)
        try:
            return dev.label, self.run(dev, inputs)
        except Exception as e:  # noqa: BLE001 - reported as the one attempt
            raise DeviceFallbackError([(dev, error_text(e))], [e]) from e

    def resolve_with_inputs(self, inputs: dict, hint=None):
        """Hint, else the policy's pick: the cost model, or a one-time benchmark."""
        if hint is not None or self.policy.pick.kind != "benchmark":
            return self.resolve(hint)
        with self._lock:
            winner = self._winner
        if winner is None:
            ranked = self.benchmark(inputs, self.policy.pick.runs)
            winner = ranked[0].device if ranked else parse_device(self.fastest())
            with self._lock:
                self._winner = winner
        return winner

    def compile_resolved_with_inputs(self, inputs: dict, device=None):
        return self.compile(self.resolve_with_inputs(inputs, device))

    def run_resolved_with_inputs(self, inputs: dict, device=None) -> list:
        return self.compile_resolved_with_inputs(inputs, device).run(inputs)

    # ── warm and benchmark ─────────────────────────────────────────────────

    def warm_all(self) -> list:
        """Compile every viable device; their labels."""
        for dev in self._supported:
            self.compile(dev)
        return self.devices()

    def benchmark(self, inputs: dict, runs: int) -> list:
        """Compile (if needed) and time every viable device, fastest first."""
        results = []
        for dev in self._supported:
            t0 = time.perf_counter_ns()
            exe = self.compile(dev)
            compile_ns = time.perf_counter_ns() - t0
            samples = []
            for _ in range(max(int(runs), 1)):
                t1 = time.perf_counter_ns()
                exe.run(inputs)
                samples.append(time.perf_counter_ns() - t1)
            samples.sort()
            results.append(DeviceBenchResult(dev, dev.label, compile_ns,
                                             samples[len(samples) // 2]))
        return sorted(results, key=lambda r: r.median_exec_ns)

    def __repr__(self) -> str:
        return f"<GraphDevices @{self.graph.name} devices={self.devices()}>"


def _apply(exe, name: str, value: tuple) -> None:
    if value[0] == "typed":
        exe.set_param_typed(name, value[1], value[2])
    else:
        exe.set_param(name, value[1])


__all__ = ["DeviceBenchResult", "GraphDevices", "GraphDevicesError"]
