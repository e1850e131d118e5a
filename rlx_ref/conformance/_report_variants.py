"""Kernel-variant coverage of a merged report: per backend, the declared variants (those
for the device types its results ran on) that some case exercised, and the rest.

A backend's columns count together: OpenCL's CPU-style and GPU-style runs (``opencl`` and
``opencl/gpu-kernels``) each reach only their own style's variants, and both are needed
for all of them."""
from __future__ import annotations

from ..backends import variants


def _by_name(columns) -> dict:
    """Columns grouped by backend name, in order of first appearance."""
    out: dict = {}
    for col in columns:
        out.setdefault(col.name, []).append(col)
    return out


def variant_coverage(columns) -> list:
    """One row per backend that declares variants (``Column`` objects in order), its
    columns' device types and exercised variants united."""
    out = []
    for name, cols in _by_name(columns).items():
        declared = variants.declared(name)
        if not declared:
            continue
        types = tuple(sorted(set().union(*(c.device_types for c in cols)))) or ("cpu", "gpu")
        expected = variants.applicable(name, types)
        seen = set().union(*(c.variants for c in cols))
        out.append({"column": " + ".join(c.label for c in cols), "name": name,
                    "device_types": list(types),
                    "declared": len(declared), "applicable": len(expected),
                    "exercised": len(seen & set(expected)),
                    "unexercised": sorted(set(expected) - seen),
                    "other_devices": sorted(set(declared) - set(expected)),
                    "undeclared": sorted(seen - set(declared))})
    return out


def unexercised_problems(rows: list) -> list:
    """``--check`` problems: a declared variant no result exercised, or a result naming a
    variant its backend does not declare."""
    problems = []
    for r in rows:
        if r["unexercised"]:
            problems.append(f"backend {r['column']!r}: {len(r['unexercised'])} declared kernel "
                            f"variant(s) never exercised: {', '.join(r['unexercised'])}; add "
                            "cases that reach them (lowered-thresholds or large)")
        if r["undeclared"]:
            problems.append(f"backend {r['column']!r}: results name undeclared kernel "
                            f"variant(s) {', '.join(r['undeclared'])}")
    return problems


def variant_blocks(rows: list) -> list:
    """The report section (blocks, see _report_blocks)."""
    out = [("h", 2, "Kernel variants"),
           ("p", "Each backend declares the kernel variants it can run and the size, shape "
                 "or device rule that selects each (`rlx-ref variants`); a variant is "
                 "exercised when some case ran it. Variants for other device types than "
                 "the results ran on are not expected.")]
    if not rows:
        return out + [("p", "No backend in these results declares kernel variants.")]
    out.append(("table", ["Backend", "Device types", "Exercised", "Applicable", "Declared"],
                [[f"**{r['column']}**", ", ".join(r["device_types"]), str(r["exercised"]),
                  str(r["applicable"]), str(r["declared"])] for r in rows], "llrrr", None,
                None))
    for r in rows:
        if r["unexercised"]:
            out.append(("p", f"Not exercised on **{r['column']}**: "
                        + ", ".join(f"`{n}`" for n in r["unexercised"]) + "."))
    return out
