"""Every environment variable rlx_ref reads, registered once and read only through here.

A variable is one ``EnvVar`` record (name, kind, stability, default, summary), as RLX's
``env_registry`` keeps them. Reads resolve as RLX's ``env::var`` does: a code override
(``set_override`` / the ``overrides(...)`` context manager) wins over the process
environment. Values are parsed by kind and a bad value is an ``EnvError`` naming the
variable and what it accepts; reading a name that is not registered is an error too, so
every variable the code reads is in ``rlx-ref env`` and ``docs/env-vars.md``.

Flags take RLX's words: ``1 true yes on`` (or any other positive integer) are on, ``0 false
no off`` and the empty string are off. RLX also reads any other non-empty word as on;
here it is an error, so a typo such as ``RLX_VERBOSE=ture`` is not silently on.

This module imports only the standard library, so every layer may read the environment.
"""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager

from ._env_record import KINDS, STABILITIES, EnvVar
from ._env_vars import VARS

_ON = ("1", "true", "yes", "on")
_OFF = ("", "0", "false", "no", "off")


class EnvError(ValueError):
    """A variable holds a value its kind does not accept, or is not registered."""


REGISTRY: dict[str, EnvVar] = {}


def register(var: EnvVar) -> EnvVar:
    """Add ``var`` to the registry (a name is registered once)."""
    if var.name in REGISTRY:
        raise ValueError(f"environment variable {var.name} is registered twice")
    if var.kind not in KINDS or var.stability not in STABILITIES:
        raise ValueError(f"{var.name}: kind {var.kind!r} / stability {var.stability!r}; "
                         f"expected one of {KINDS} / {STABILITIES}")
    if (var.kind == "enum") != bool(var.choices):
        raise ValueError(f"{var.name}: an enum needs choices, other kinds take none")
    REGISTRY[var.name] = var
    return var


def lookup(name: str) -> EnvVar:
    """The record of ``name``; EnvError when it is not registered."""
    var = REGISTRY.get(name)
    if var is None:
        raise EnvError(f"environment variable {name} is not registered; add an EnvVar for "
                       "it in rlx_ref/env_registry.py (see `rlx-ref env --all`)")
    return var


# ── code overrides (win over the process environment, as RLX's env::set) ─────────

_LOCK = threading.Lock()
_OVERRIDES: dict[str, str] = {}


def set_override(name: str, value) -> None:
    """Make reads of ``name`` see ``value`` (``"0"`` forces a flag off) until unset."""
    lookup(name)
    with _LOCK:
        _OVERRIDES[name] = str(value)


def unset_override(name: str) -> None:
    """Drop the override of ``name``; reads fall back to the process environment."""
    with _LOCK:
        _OVERRIDES.pop(name, None)


def clear_overrides() -> None:
    """Drop every code override."""
    with _LOCK:
        _OVERRIDES.clear()


@contextmanager
def overrides(**values):
    """Override variables for the ``with`` block (``None`` removes an override), then
    restore what was there. Overrides are process-wide, as RLX's: every thread sees them."""
    for name in values:
        lookup(name)
    with _LOCK:
        saved = {name: _OVERRIDES.get(name) for name in values}
        for name, value in values.items():
            _put(name, value)
    try:
        yield
    finally:
        with _LOCK:
            for name, value in saved.items():
                _put(name, value)


def _put(name: str, value) -> None:
    if value is None:
        _OVERRIDES.pop(name, None)
    else:
        _OVERRIDES[name] = str(value)


# ── reading ──────────────────────────────────────────────────────────────────

def raw(name: str, environ=None) -> str | None:
    """The text of ``name``: its override, else the environment (``environ``, default the
    process's); None when neither sets it."""
    lookup(name)
    with _LOCK:
        if name in _OVERRIDES:
            return _OVERRIDES[name]
    return (os.environ if environ is None else environ).get(name)


def parse(var: EnvVar, text: str | None):
    """``text`` parsed as ``var``'s kind (its default when unset or blank)."""
    if text is None or not text.strip():
        return var.default if var.kind != "flag" else bool(var.default)
    v = text.strip()
    if var.kind == "flag":
        low = v.lower()
        if low in _ON or (low.isdigit() and int(low) > 0):
            return True
        if low in _OFF or (low.isdigit() and int(low) == 0):
            return False
        raise EnvError(f"{var.name}={text!r} is not a flag value; expected one of "
                       f"{', '.join(_ON)} (on) or {', '.join(_OFF[1:])} or empty (off)")
    if var.kind == "int":
        try:
            return int(v)
        except ValueError:
            raise EnvError(f"{var.name}={text!r} is not an integer; expected a whole number "
                           f"(default {var.default})") from None
    if var.kind == "enum":
        if v.lower() not in var.choices:
            raise EnvError(f"{var.name}={text!r} is not a valid value; expected one of "
                           f"{', '.join(var.choices)}")
        return v.lower()
    return v                                # str, path


def get(name: str, environ=None):
    """The parsed value of ``name`` (override, else environment, else its default)."""
    return parse(lookup(name), raw(name, environ))


def flag(name: str, environ=None) -> bool:
    """Whether flag ``name`` is on."""
    var = lookup(name)
    if var.kind != "flag":
        raise EnvError(f"{name} is a {var.kind} variable, not a flag")
    return parse(var, raw(name, environ))


def check_all(environ=None) -> list[str]:
    """One message per registered variable whose current value does not parse."""
    bad = []
    for var in REGISTRY.values():
        try:
            parse(var, raw(var.name, environ))
        except EnvError as e:
            bad.append(str(e))
    return bad


for _var in VARS:
    register(_var)
