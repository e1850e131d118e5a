"""``backends_manifest()``: RLX's ``BackendsManifest`` JSON (crate, version, backends),
plus for each backend why it is or is not available here and its op claim.

RLX's ``backends`` lists the Cargo features compiled in; here it lists the backends the
registry knows (test-only ones excluded), each with the device labels that run on it.
"""
from __future__ import annotations

import json

from .devices import PRIORITY, availability, backend_for, parse_device


def _claim(backend) -> dict:
    try:
        table = backend.supported_ops()
    except Exception as e:  # noqa: BLE001 - a backend that cannot even list its claim
        return {"error": f"{type(e).__name__}: {e}"}
    ops = {k: (v if v == "all" else sorted(str(d) for d in v)) for k, v in sorted(table.items())}
    return {"kinds": len(ops), "ops": ops}


def _entry(name: str, labels: list) -> dict:
    from ..backends.base import BackendUnavailable
    from ..backends.registry import get_backend

    primary = next((lbl for lbl in labels if parse_device(lbl).spec == name), None)
    try:
        backend = backend_for(primary) if primary else get_backend(name)
    except BackendUnavailable as e:
        return {"name": name, "labels": labels, "available": False, "reason": str(e)}
    if backend is None:
        return {"name": name, "labels": labels, "available": False,
                "reason": availability(primary)[1]}
    ok, why = backend.availability()
    return {"name": name, "labels": labels, "available": ok, "reason": why,
            "device": str(backend.device), "emulated": bool(ok and backend.emulated),
            "claim": _claim(backend)}


def manifest() -> dict:
    """The manifest as a dict (``backends_manifest()`` is its JSON)."""
    from .. import __version__
    from ..backends.registry import backend_names, get_backend

    by_backend: dict = {}
    for kind in PRIORITY:                   # which labels run on which registry backend
        spec = parse_device(kind).spec or "gpu"
        by_backend.setdefault(spec.partition(":")[0], []).append(kind)
    names = []
    for name in backend_names():
        try:
            if getattr(get_backend(name), "test_only", False):
                continue
        except Exception:  # noqa: BLE001 - listed below with the reason
            pass
        names.append(name)
    entries = [_entry(n, by_backend.get(n, [])) for n in names]
    gpu = availability("gpu")
    return {"crate": "rlx_ref", "version": __version__, "backends": names,
            "available": [e["name"] for e in entries if e["available"]],
            "gpu": {"available": gpu[0], "reason": gpu[1],
                    "backend": str(backend_for("gpu").name) if gpu[0] else None},
            "entries": entries}


def backends_manifest() -> str:
    """JSON: each backend, why it is or is not available here, and its op claim."""
    return json.dumps(manifest(), indent=1)
