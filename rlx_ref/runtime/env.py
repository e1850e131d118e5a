"""A typed snapshot of the variables the compile pipeline reads (``rlx_ref.env_registry``
holds every variable; this is the view ``Session`` and the reports use).

``RLX_DISPATCH_REPORT`` and ``RLX_VERBOSE`` are RLX's; the ``RLX_REF_*`` ones are
rlx_ref's own. ``rlx-ref env`` lists them all with their current values.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..env_registry import REGISTRY, get, parse, raw


def truthy(value: str | None) -> bool:
    """RLX's flag words (unset, empty, 0/false/off/no: off; 1/true/yes/on, n > 0: on)."""
    return parse(REGISTRY["RLX_VERBOSE"], value)


@dataclass(frozen=True)
class RlxEnv:
    """The parsed compile-time variables."""

    dispatch_report: bool = False
    verbose: bool = False
    verify: bool = False
    dump_kernels: str | None = None
    pure_python: bool = False
    cache_dir: str | None = None

    @property
    def print_dispatch_report(self) -> bool:
        """RLX prints the report when either RLX_DISPATCH_REPORT or RLX_VERBOSE is on."""
        return self.dispatch_report or self.verbose


_FIELDS = {"dispatch_report": "RLX_DISPATCH_REPORT", "verbose": "RLX_VERBOSE",
           "verify": "RLX_REF_VERIFY", "dump_kernels": "RLX_REF_DUMP_KERNELS",
           "pure_python": "RLX_REF_PURE_PYTHON", "cache_dir": "RLX_REF_CACHE_DIR"}


def read_env(environ=None) -> RlxEnv:
    """The snapshot from ``environ`` (default: code overrides, then ``os.environ``)."""
    return RlxEnv(**{f: parse(REGISTRY[n], raw(n, environ)) for f, n in _FIELDS.items()})


def env() -> RlxEnv:
    """The snapshot now (read on every call: overrides and the environment may change)."""
    return read_env()


def refresh_env() -> RlxEnv:
    """Kept for callers that re-read after changing ``os.environ``; reads are live."""
    return read_env()


__all__ = ["RlxEnv", "env", "get", "read_env", "refresh_env", "truthy"]
