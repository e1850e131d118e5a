"""RLX's ``ExecutableCapabilities``: the advisory bits every compiled graph reports.

The bits say which optional methods do real work; the methods stay the source of truth
(RLX: "capabilities can lag a backend that forgot to override them"). The record is also
a read-only mapping (``caps["typed_io"]``, ``dict(caps)``), the form ``capabilities()``
returned before, so callers written against the dict keep working.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

FIELDS = ("clone", "moe", "persistent_handles", "gpu_handles", "kv_resident", "typed_io",
          "async_pipeline", "active_extent")


@dataclass(frozen=True, eq=False)
class ExecutableCapabilities(Mapping):
    """Advisory feature flags of an executable (RLX's field names and meanings)."""

    clone: bool = False               # clone() makes an independent executable
    moe: bool = False                 # MoE residency / TopK capture hooks
    persistent_handles: bool = False  # bind_handle / read_handle
    gpu_handles: bool = False         # device-resident inputs and outputs
    kv_resident: bool = False         # device-resident KV row feeds
    typed_io: bool = False            # set_param_typed / run_typed beyond f32
    async_pipeline: bool = False      # commit_no_wait / run_pipelined do async work
    active_extent: bool = False       # set_active_extent makes kernels skip rows

    def enabled_names(self) -> list:
        """Names of the bits that are set, in RLX's order (what device_report lists)."""
        return [f for f in FIELDS if getattr(self, f)]

    def replace(self, **bits) -> ExecutableCapabilities:
        """A copy with ``bits`` changed (unknown names are an error)."""
        return dataclasses.replace(self, **bits)

    def to_dict(self) -> dict:
        return {f: getattr(self, f) for f in FIELDS}

    def __getitem__(self, name: str) -> bool:
        if name not in FIELDS:
            raise KeyError(f"{name!r} is not an executable capability; capabilities: "
                           f"{', '.join(FIELDS)}")
        return getattr(self, name)

    def __iter__(self):
        return iter(FIELDS)

    def __len__(self) -> int:
        return len(FIELDS)

    def __eq__(self, other) -> bool:
        if isinstance(other, Mapping):
            return self.to_dict() == dict(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, f) for f in FIELDS))

    def __repr__(self) -> str:
        return f"ExecutableCapabilities({', '.join(self.enabled_names()) or 'none'})"


ExecutableCapabilities.NONE = ExecutableCapabilities()

__all__ = ["ExecutableCapabilities", "FIELDS"]
