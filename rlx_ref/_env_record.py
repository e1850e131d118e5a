"""The record of one environment variable (the registry is ``rlx_ref.env_registry``)."""
from __future__ import annotations

from dataclasses import dataclass

KINDS = ("flag", "int", "str", "enum", "path")
STABILITIES = ("public", "bisect", "internal", "external")


@dataclass(frozen=True)
class EnvVar:
    """One variable: how it is parsed, who it is for, and what it does."""

    name: str
    group: str                  # device, compile, backend, cache, debug, tooling, external
    kind: str                   # one of KINDS
    summary: str
    default: object = None      # the value when unset (None: off / no value)
    stability: str = "public"   # public: documented for users; bisect: escape hatch;
    #                             internal: tests and tooling; external: another library's
    choices: tuple = ()         # the accepted words of an enum
    rlx: bool = False           # RLX reads a variable of the same name and meaning

    def describe_kind(self) -> str:
        """``flag``, ``enum(auto|gpu|cpu)``, ..."""
        return f"enum({'|'.join(self.choices)})" if self.kind == "enum" else self.kind
