"""``FlexibleSession`` (the device is picked per graph at compile time) and
``DeviceRouter`` (every viable device compiled up front, then runs with fallback), as
RLX's ``flexible_session.rs`` and ``device_router.rs``.

RLX's router re-warms when the hardware reports thermal throttling (``HwSnapshot``);
rlx_ref reads no hardware sensors, so the router asks a ``throttle_probe`` callable
(default: never throttled) and re-warms when it says yes and re-benchmarking is on.
"""
from __future__ import annotations

import threading

from .graph_devices import GraphDevices
from .policy import DevicePolicy, resolve_device


class FlexibleSession:
    """Compile settings without a fixed device (``FlexibleSession(policy=None)``)."""

    def __init__(self, policy: DevicePolicy | None = None, float64: bool = False):
        self._policy = policy or DevicePolicy.all()
        self.float64 = float64

    @classmethod
    def from_env(cls) -> FlexibleSession:
        return cls(DevicePolicy.from_env())

    def with_device_policy(self, policy: DevicePolicy) -> FlexibleSession:
        return FlexibleSession(policy, self.float64)

    def device_policy(self) -> DevicePolicy:
        return self._policy

    def session_on(self, device):
        """A ``Session`` for ``device``."""
        from .session import Session

        return Session(device, float64=self.float64)

    def compile_on(self, graph, device, options=None):
        """Compile ``graph`` for ``device``."""
        return self.session_on(device).compile(graph, options)

    def compile_with_on(self, graph, device, options):
        return self.compile_on(graph, device, options)

    def compile_resolved(self, graph, device=None, options=None):
        """Compile for ``resolve_device(graph, device, policy)``."""
        return self.compile_on(graph, resolve_device(graph, device, self._policy), options)

    def compile_resolved_with(self, graph, device, options):
        return self.compile_resolved(graph, device, options)

    def __repr__(self) -> str:
        return f"<FlexibleSession policy={self._policy}>"


def _never_throttled() -> bool:
    return False


class DeviceRouter:
    """Serving wrapper: ``warm_all`` on construction, then ``run`` / ``run_chain`` /
    ``run_on``. Thread-safe: one re-warm at a time; a run during one compiles lazily."""

    def __init__(self, graph, policy: DevicePolicy | None = None, throttle_probe=None):
        self.runner = GraphDevices(graph, policy or DevicePolicy.all())
        self.runner.warm_all()
        self.rebench_on_throttle = True
        self.throttle_probe = throttle_probe or _never_throttled
        self._rewarm = threading.Lock()
        self.rewarms = 0

    @classmethod
    def from_env(cls, graph) -> DeviceRouter:
        return cls(graph, DevicePolicy.from_env())

    def with_rebench_on_throttle(self, enabled: bool = True) -> DeviceRouter:
        self.rebench_on_throttle = bool(enabled)
        return self

    def set_rebench_on_throttle(self, enabled: bool) -> None:
        self.rebench_on_throttle = bool(enabled)

    def _maybe_rewarm(self) -> None:
        if self.rebench_on_throttle and self.throttle_probe():
            with self._rewarm:                  # one re-warm at a time
                self.runner.invalidate_cache()
                self.runner.warm_all()
                self.rewarms += 1

    def run_on(self, device, inputs: dict) -> list:
        """Run on ``device``."""
        self._maybe_rewarm()
        return self.runner.run(device, inputs)

    def run(self, inputs: dict, device=None) -> tuple:
        """``(label, outputs)`` on the hint, ``RLX_DEVICE``, or the policy's pick."""
        self._maybe_rewarm()
        dev = self.runner.resolve_with_inputs(inputs, device)
        return dev.label, self.runner.run(dev, inputs)

    def run_chain(self, inputs: dict, device=None) -> tuple:
        """``(label, outputs)`` along ``RLX_DEVICE_CHAIN`` (or on ``device``)."""
        self._maybe_rewarm()
        return self.runner.run_chain(inputs, device)

    def set_param(self, name: str, data) -> None:
        self.runner.set_param(name, data)

    def set_param_typed(self, name: str, data: bytes, dtype: str) -> None:
        self.runner.set_param_typed(name, data, dtype)

    def devices(self) -> list:
        return self.runner.devices()

    def __repr__(self) -> str:
        return f"<DeviceRouter devices={self.devices()}>"


__all__ = ["DeviceRouter", "FlexibleSession"]
