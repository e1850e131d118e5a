"""Which viable device is cheapest for a graph (RLX's ``fastest_device_for``): the hook a
cost model plugs into.

A cost model is any object with ``estimate(graph, device) -> float | None`` (seconds, or
None for "no evidence for this device"). Devices with an estimate are ranked by it, ties
kept in policy order; when no device has one, the policy order decides (RLX's
``DEVICE_PRIORITY`` tie-break): prefer-list first, then ``devices.PRIORITY`` (accelerators,
then the CPU backend, an emulated device, the oracle). The model installed by default is
``cost_model.CalibratedCostModel``: RLX's ``estimate_graph_cost`` over each device's
calibration, measured on first use and cached (``calibration``; ``RLX_REF_CALIBRATION=off``
leaves every device without an estimate). ``PriorityCost`` estimates nothing: installed
through ``set_cost_model``, the policy order alone picks.

The oracle (``reference``, the numpy interpreter) is ranked only when the policy names it
(its allow- or prefer-list) or no other device can run the graph: it is the correctness
reference, not a performance backend, and its cost is not that of a backend (a Python call
per node, float64 upcasts, numpy temporaries per op). RLX ranks only the backends it has a
cost model for; the oracle is rlx_ref's addition, so it is left out the same way.

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
_MODEL: list = [None]            # the calibrated model, made on first use


def _default_model():
    from .cost_model import CalibratedCostModel

    return CalibratedCostModel()


def set_cost_model(model) -> None:
    """Install ``model`` (an object with ``estimate(graph, device)``) for every pick."""
    if not callable(getattr(model, "estimate", None)):
        raise TypeError(f"a cost model needs estimate(graph, device); got {model!r}")
    with _LOCK:
        _MODEL[0] = model


def cost_model():
    """The installed cost model."""
    model = _MODEL[0]
    if model is None:
        with _LOCK:
            if _MODEL[0] is None:
                _MODEL[0] = _default_model()
            model = _MODEL[0]
    return model


def reset_cost_model() -> None:
    """Go back to the default (calibrated) cost model."""
    with _LOCK:
        _MODEL[0] = None


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


UNRANKED_KINDS = ("reference",)   # ranked only when a policy names them


def ranked_candidates(graph, policy=None) -> list:
    """The devices ``fastest_device_for`` ranks for ``graph`` under ``policy``: the viable
    ones, less the oracle unless the policy names it or nothing else is viable."""
    from .policy import DevicePolicy, devices_for_with_policy

    policy = policy or DevicePolicy.all()
    candidates = devices_for_with_policy(graph, policy)
    named = set(policy.allow or ()) | set(policy.prefer)
    ranked = [d for d in candidates if d.kind not in UNRANKED_KINDS or d in named]
    return ranked or candidates


def fastest_device_for(graph, policy=None):
    """The cheapest viable device for ``graph`` under ``policy`` (default: all)."""
    from .devices import available_devices
    from .policy import DevicePolicy

    forced = forced_device()
    if forced is not None:
        return forced
    policy = policy or DevicePolicy.all()
    candidates = ranked_candidates(graph, policy)
    if not candidates:                  # RLX: the best the policy allows, else the CPU
        allowed = policy.apply(available_devices())
        return allowed[0] if allowed else parse_device("cpu")
    return pick_cheapest(graph, candidates)
