"""Fallback chains (RLX's ``run_with_fallback`` / ``DeviceFallbackError``): try devices in
order; a device that fails does not stop the chain, and when all fail the error lists
every attempt with its error."""
from __future__ import annotations

import sys

from ..env_registry import flag
from .devices import parse_device


def error_text(err: BaseException) -> str:
    """One attempt's error: the exception's message, or its type when it has none."""
    text = str(err).strip()
    return text if text else type(err).__name__


class DeviceFallbackError(RuntimeError):
    """Every device of a chain failed; ``attempts`` is ``[(Device, message)]`` in order and
    ``errors`` the exceptions behind them (None for a device skipped as not viable)."""

    def __init__(self, attempts: list, errors: list | None = None):
        self.attempts = list(attempts)
        self.errors = list(errors) if errors is not None else [None] * len(self.attempts)
        super().__init__(self._format())

    def _format(self) -> str:
        lines = ["all backends failed:"]
        for dev, msg in self.attempts:
            body = str(msg).replace("\n", "\n    ")     # a multi-line error stays indented
            lines.append(f"  {parse_device(dev).label}: {body}")
        return "\n".join(lines)


NOT_VIABLE = "not viable for this graph under policy"


def try_chain(chain, viable, run, attempts: list | None = None) -> tuple:
    """``(device, run(device))`` for the first device of ``chain`` in ``viable`` whose run
    returns; else ``DeviceFallbackError`` with every attempt (non-viable ones included).
    ``attempts``, when given, receives the failed attempts even on success, so a caller
    can show that work left its first device (RLX_VERBOSE prints it)."""
    attempts = attempts if attempts is not None else []
    errors = []
    for dev in (parse_device(d) for d in chain):
        if dev not in viable:
            attempts.append((dev, NOT_VIABLE))
            errors.append(None)
            continue
        try:
            value = run(dev)
        except Exception as e:  # noqa: BLE001 - any failure moves on to the next device
            attempts.append((dev, error_text(e)))
            errors.append(e)
            continue
        if attempts and flag("RLX_VERBOSE"):
            tried = "; ".join(f"{d.label}: {m}" for d, m in attempts)
            print(f"rlx-ref: ran on {dev.label} after the chain skipped {tried}",
                  file=sys.stderr)
        return dev, value
    if not attempts:
        attempts.append((parse_device("cpu"), "empty fallback chain"))
        errors.append(None)
    raise DeviceFallbackError(attempts, errors)


def run_with_fallback(graph, policy, chain, run) -> tuple:
    """Try ``chain`` in order: ``(device, run(device))`` for the first device that is
    viable for ``graph`` under ``policy`` and whose ``run`` does not raise."""
    from .policy import DevicePolicy, devices_for_with_policy

    viable = devices_for_with_policy(graph, policy or DevicePolicy.all())
    return try_chain(chain, viable, run)


__all__ = ["DeviceFallbackError", "NOT_VIABLE", "error_text", "run_with_fallback",
           "try_chain"]
