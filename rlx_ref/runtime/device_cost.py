"""Which viable device is cheapest for a graph (RLX's ``fastest_device_for``): the hook a
cost model plugs into.

A cost model is any object with ``estimate(graph, device) -> float | None`` (seconds, or
None for "no evidence for this device"). Devices with an estimate are ranked by it, ties
kept in policy order; when no device has one, the policy order decides (RLX's
``DEVICE_PRIORITY`` tie-break). The model installed by default, ``PriorityCost``, is a
placeholder that estimates nothing, so the pick is the policy order: prefer-list first,
then ``devices.PRIORITY`` (accelerators, then the CPU backend, an emulated device, the
oracle). The calibrated model replaces it through ``set_cost_model``.

``RLX_FORCE_DEVICE`` pins the pick before any of this, as RLX does, even to a device the
policy or the graph rules out.
"""
from __future__ import annotations

import threading

from ..env_registry import EnvError, get
from .devices import DeviceParseError, parse_device


class PriorityCost:
    """The placeholder: no estimates, so the policy's order ranks the devices."""

    calibrated = False

    def estimate(self, graph, device):
        return None


_LOCK = threading.Lock()
_MODEL = [PriorityCost()]


def set_cost_model(model) -> None:
    """Install ``model`` (an object with ``estimate(graph, device)``) for every pick."""
    if not callable(getattr(model, "estimate", None)):
        raise TypeError(f"a cost model needs estimate(graph, device); got {model!r}")
    with _LOCK:
        _MODEL[0] = model


def cost_model():
    """The installed cost model."""
    return _MODEL[0]


def forced_device():
    """The device ``RLX_FORCE_DEVICE`` pins, or None (a bad name is an error naming it)."""
    text = get("RLX_FORCE_DEVICE")
    if text is None:
        return None
    try:
        return parse_device(text)
    except DeviceParseError as e:
        raise EnvError(f"RLX_FORCE_DEVICE={text!r}: {e}") from None


def pick_cheapest(graph, candidates: list, model=None):
    """The candidate with the lowest estimate; the first candidate when none has one."""
    model = model or cost_model()
    best, best_cost = None, None
    for dev in candidates:
        cost = model.estimate(graph, dev)
        if cost is not None and (best_cost is None or cost < best_cost):
            best, best_cost = dev, cost
    return best if best is not None else candidates[0]


def fastest_device_for(graph, policy=None):
    """The cheapest viable device for ``graph`` under ``policy`` (default: all)."""
    from .policy import DevicePolicy, devices_for_with_policy
    from .devices import available_devices

    forced = forced_device()
    if forced is not None:
        return forced
    policy = policy or DevicePolicy.all()
    candidates = devices_for_with_policy(graph, policy)
    if not candidates:                  # RLX: the best the policy allows, else the CPU
        allowed = policy.apply(available_devices())
        return allowed[0] if allowed else parse_device("cpu")
    return pick_cheapest(graph, candidates)
