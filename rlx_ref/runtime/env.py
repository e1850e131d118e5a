"""Environment variables rlx_ref reads, in one table, parsed once per process.

| Variable                | Value      | Effect                                                   |
|-------------------------|------------|----------------------------------------------------------|
| `RLX_DISPATCH_REPORT`   | flag       | print the dispatch report to stderr on every compile     |
| `RLX_VERBOSE`           | flag       | print the dispatch report and the pass log on compile    |
| `RLX_REF_VERIFY`        | flag       | verify the graph after every compile pass (on in tests)  |
| `RLX_REF_DUMP_KERNELS`  | directory  | write the source of every generated kernel there         |
| `RLX_REF_PURE_PYTHON`   | flag       | use the pure-Python twin of the Cython core              |
| `RLX_REF_CACHE_DIR`     | directory  | where compiled kernels are cached (default: user cache)  |

A flag is on for ``1``, ``true``, ``yes``, ``on`` or any other non-empty value except
``0``, ``false``, ``off`` and ``no`` (case-insensitive), as RLX's ``env::flag`` reads it.

The table is read once, on first use; ``refresh_env()`` reads it again (tests that set
variables call it, and so may a program that changes ``os.environ`` at run time).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

# name -> (kind, meaning); the docstring table above is the same data, for readers.
ENV_VARS = {
    "RLX_DISPATCH_REPORT": ("flag", "print the dispatch report to stderr on every compile"),
    "RLX_VERBOSE": ("flag", "print the dispatch report and the pass log on every compile"),
    "RLX_REF_VERIFY": ("flag", "verify the graph after every compile pass"),
    "RLX_REF_DUMP_KERNELS": ("dir", "write the source of every generated kernel there"),
    "RLX_REF_PURE_PYTHON": ("flag", "use the pure-Python twin of the Cython core"),
    "RLX_REF_CACHE_DIR": ("dir", "where compiled kernels are cached"),
}

_OFF = ("0", "false", "off", "no")


def truthy(value: str | None) -> bool:
    """RLX's flag rule: unset, empty, 0/false/off/no are off; anything else is on."""
    if value is None:
        return False
    v = value.strip().lower()
    return bool(v) and v not in _OFF


@dataclass(frozen=True)
class RlxEnv:
    """The parsed environment (see the module table)."""

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


def read_env(environ=None) -> RlxEnv:
    """Parse ``environ`` (default ``os.environ``) without caching."""
    e = os.environ if environ is None else environ

    def path(name):
        v = e.get(name, "").strip()
        return v or None

    return RlxEnv(
        dispatch_report=truthy(e.get("RLX_DISPATCH_REPORT")),
        verbose=truthy(e.get("RLX_VERBOSE")),
        verify=truthy(e.get("RLX_REF_VERIFY")),
        dump_kernels=path("RLX_REF_DUMP_KERNELS"),
        pure_python=truthy(e.get("RLX_REF_PURE_PYTHON")),
        cache_dir=path("RLX_REF_CACHE_DIR"),
    )


_CACHED: RlxEnv | None = None


def env() -> RlxEnv:
    """The process environment, parsed on first use and then cached."""
    global _CACHED
    if _CACHED is None:
        _CACHED = read_env()
    return _CACHED


def refresh_env() -> RlxEnv:
    """Re-read ``os.environ`` (after a test or program changed it) and return the result."""
    global _CACHED
    _CACHED = read_env()
    return _CACHED


__all__ = ["ENV_VARS", "RlxEnv", "env", "read_env", "refresh_env", "truthy"]
