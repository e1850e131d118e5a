"""Which devices a process may use and which one runs a graph (RLX's ``device_policy.rs``):
``DevicePolicy`` (allow, deny, prefer, pick), ``resolve_device`` (hint, then
``RLX_DEVICE``, then the cheapest), ``resolve_device_chain`` and ``device_report``.

Where RLX ignores a device variable it cannot parse, rlx_ref raises an ``EnvError`` naming
the variable, so a typo is not silently a different device.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..env_registry import EnvError, get, raw
from .devices import (DeviceParseError, availability, backend_for, is_available,
                      parse_device, parse_device_list, priority, probe_set)
from .graph_support import advisory_capabilities, first_unsupported_op


@dataclass(frozen=True)
class DevicePickStrategy:
    """How a device is picked without a hint: ``cost_model`` or ``benchmark`` (``runs``)."""

    kind: str = "cost_model"
    runs: int = 0

    @classmethod
    def cost_model(cls):
        return cls()

    @classmethod
    def benchmark(cls, runs: int):
        return cls("benchmark", max(int(runs), 1))


def _devices(devices) -> tuple:
    return tuple(parse_device_list(list(devices))) if devices else ()


@dataclass(frozen=True)
class DevicePolicy:
    """Which devices may be used: ``allow`` (None: all), ``deny``, ``prefer`` (tie-break
    order) and the ``pick`` strategy. Builders return a new policy, as pyrlx's do."""

    allow: tuple | None = None
    deny: tuple = ()
    prefer: tuple = ()
    pick: DevicePickStrategy = field(default_factory=DevicePickStrategy)

    @classmethod
    def all(cls) -> DevicePolicy:
        """Every device (the default)."""
        return cls()

    @classmethod
    def only(cls, devices) -> DevicePolicy:
        """Only ``devices`` (names or Devices)."""
        return cls(allow=tuple(parse_device_list(list(devices))) if devices else ())

    def with_deny(self, devices) -> DevicePolicy:
        return DevicePolicy(self.allow, self.deny + _devices(devices), self.prefer, self.pick)

    def with_prefer(self, devices) -> DevicePolicy:
        return DevicePolicy(self.allow, self.deny, self.prefer + _devices(devices), self.pick)

    def with_benchmark_pick(self, runs: int) -> DevicePolicy:
        """Pick by a one-time micro-benchmark of ``runs`` runs (at least 1)."""
        return DevicePolicy(self.allow, self.deny, self.prefer,
                            DevicePickStrategy.benchmark(runs))

    def pick_strategy(self) -> DevicePickStrategy:
        return self.pick

    @classmethod
    def from_env(cls) -> DevicePolicy:
        """The policy in ``RLX_DEVICES``, ``RLX_DENY_DEVICES``, ``RLX_PREFER_DEVICES`` and
        ``RLX_BENCHMARK_PICK``."""
        return cls._from_values(
            ("RLX_DEVICES", get("RLX_DEVICES")), ("RLX_DENY_DEVICES", get("RLX_DENY_DEVICES")),
            ("RLX_PREFER_DEVICES", get("RLX_PREFER_DEVICES")), get("RLX_BENCHMARK_PICK"))

    @classmethod
    def from_env_key(cls, prefix: str) -> DevicePolicy:
        """``PREFIX_DEVICES`` and the rest (each must be registered in the env registry)."""
        if prefix == "RLX":
            return cls.from_env()
        names = [f"{prefix}_{s}" for s in ("DEVICES", "DENY_DEVICES", "PREFER_DEVICES")]
        runs = raw(f"{prefix}_BENCHMARK_PICK")
        try:
            runs = int(runs) if runs not in (None, "") else None
        except ValueError:
            raise EnvError(f"{prefix}_BENCHMARK_PICK={runs!r} is not an integer") from None
        return cls._from_values(*[(n, raw(n)) for n in names], runs)

    @classmethod
    def _from_values(cls, allow, deny, prefer, runs) -> DevicePolicy:
        lists = [env_device_list(name, text) for name, text in (allow, deny, prefer)]
        pick = DevicePickStrategy.benchmark(runs) if runs is not None else DevicePickStrategy()
        return cls(tuple(lists[0]) if lists[0] is not None else None,
                   tuple(lists[1] or ()), tuple(lists[2] or ()), pick)

    def probe_set(self) -> list:
        """The devices reports show: the allow-list, else every device rlx_ref knows."""
        return list(self.allow) if self.allow is not None else probe_set()

    def apply(self, candidates) -> list:
        """``candidates`` allowed, not denied, ordered by (prefer position, platform)."""
        out = [parse_device(d) for d in candidates]
        if self.allow is not None:
            out = [d for d in out if d in self.allow]
        out = [d for d in out if d not in self.deny]
        return sorted(out, key=self._rank)

    def _rank(self, device) -> tuple:
        pref = self.prefer.index(device) if device in self.prefer else len(self.prefer)
        return (pref, priority(device))


def env_device_list(name: str, text):
    """``text`` of variable ``name`` as a device list (None when unset or blank)."""
    if text is None or not str(text).strip():
        return None
    try:
        return parse_device_list(text)
    except DeviceParseError as e:
        raise EnvError(f"{name}={text!r}: {e}") from None


def device_from_env():
    """The hint in ``RLX_DEVICE``, or None."""
    text = get("RLX_DEVICE")
    if text is None:
        return None
    try:
        return parse_device(text)
    except DeviceParseError as e:
        raise EnvError(f"RLX_DEVICE={text!r}: {e}") from None


def device_chain_from_env() -> list:
    """The fallback chain in ``RLX_DEVICE_CHAIN`` (``cuda,opencl,cpu``), or []."""
    return env_device_list("RLX_DEVICE_CHAIN", get("RLX_DEVICE_CHAIN")) or []


def devices_for_with_policy(graph, policy: DevicePolicy) -> list:
    """Devices here that can run ``graph``, filtered and ordered by ``policy``. The
    allow-list may name devices outside the default probe set (``broken``, plugins)."""
    from .graph_support import supports_graph

    pool = policy.probe_set()
    return policy.apply(d for d in pool if is_available(d) and supports_graph(d, graph))


def devices_for(graph) -> list:
    """Devices here that can run ``graph`` (RLX's ``devices_for``)."""
    return devices_for_with_policy(graph, DevicePolicy.all())


def _labels(devices) -> str:
    return ", ".join(d.label for d in devices)


def _pick_from(device, candidates, source: str):
    if device in candidates:
        return device
    raise DeviceResolveError(f"{source} requested {device} but viable backends are "
                             f"[{_labels(candidates)}]")


class DeviceResolveError(RuntimeError):
    """No device fits the request; the message says which were viable."""


def resolve_device(graph, hint=None, policy: DevicePolicy | None = None):
    """The device to run ``graph`` on: ``hint`` (must be viable), else ``RLX_DEVICE`` when
    viable, else the cheapest (``fastest_device_for``, where ``RLX_FORCE_DEVICE`` pins)."""
    from .device_cost import fastest_device_for

    policy = policy or DevicePolicy.all()
    candidates = devices_for_with_policy(graph, policy)
    if not candidates:
        raise DeviceResolveError("no backend can lower this graph under the current policy "
                                 "— widen DevicePolicy or install additional backends")
    if hint is not None:
        return _pick_from(parse_device(hint), candidates, "hint")
    env = device_from_env()
    if env is not None and env in candidates:
        return env
    return fastest_device_for(graph, policy)


def resolve_device_chain(graph, chain, policy: DevicePolicy | None = None):
    """The first device of ``chain`` that can run ``graph`` under ``policy``."""
    policy = policy or DevicePolicy.all()
    viable = devices_for_with_policy(graph, policy)
    chain = [parse_device(d) for d in chain]
    for dev in chain:
        if dev in viable:
            return dev
    raise DeviceResolveError(f"no device in chain [{_labels(chain)}] can run this graph — "
                             f"viable: [{_labels(viable)}]")


@dataclass(frozen=True)
class DeviceCandidate:
    """One row of ``device_report``."""

    device: object
    label: str
    available: bool
    registered: bool
    supports_graph: bool
    recommended: bool
    blocker: str | None
    capabilities: tuple
    reason: str = ""            # why the device is not available ("" when it is)


def device_report(graph, policy: DevicePolicy | None = None) -> list:
    """Per device of the policy's probe set: can it run ``graph``, and if not, why."""
    from .device_cost import fastest_device_for

    policy = policy or DevicePolicy.all()
    recommended = fastest_device_for(graph, policy)
    rows = []
    for dev in policy.probe_set():
        ok, why = availability(dev)
        blocking = first_unsupported_op(dev, graph) if ok else None
        if not ok:
            blocker = "not available on this host or in this build"
        elif blocking is not None:
            blocker = blocking.text()
        elif dev in policy.deny:
            blocker = "denied by DevicePolicy"
        elif policy.allow is not None and dev not in policy.allow:
            blocker = "not in DevicePolicy allow-list"
        else:
            blocker = None
        rows.append(DeviceCandidate(dev, dev.label, ok, backend_for(dev) is not None,
                                    ok and blocking is None, dev == recommended, blocker,
                                    tuple(advisory_capabilities(dev)), "" if ok else why))
    return rows


__all__ = ["DeviceCandidate", "DevicePickStrategy", "DevicePolicy", "DeviceResolveError",
           "device_chain_from_env", "device_from_env", "device_report", "devices_for",
           "devices_for_with_policy", "env_device_list", "is_available", "resolve_device",
           "resolve_device_chain"]
