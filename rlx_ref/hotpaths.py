"""Selects the compiled ``_core`` when built, else the pure-Python twin.

``RLX_REF_PURE_PYTHON=1`` forces the twin. ``core`` is the selected module;
``load(pure)`` returns either one explicitly (tests run both).
"""
import importlib

from .env_registry import flag


def load(pure: bool):
    """The pure twin when ``pure``; otherwise the compiled module (ImportError if unbuilt)."""
    if pure:
        return importlib.import_module("rlx_ref._core_py")
    return importlib.import_module("rlx_ref._core")


def _select():
    if flag("RLX_REF_PURE_PYTHON"):
        return load(True)
    try:
        return load(False)
    except ImportError:
        return load(True)


core = _select()
COMPILED = bool(getattr(core, "BUILT", False))
