"""JUnit XML of conformance results: a testsuite per report column, a testcase per case."""
from __future__ import annotations

from collections import Counter
from xml.etree import ElementTree as ET

from ._report_text import first_line
from .model import CRASH, ERROR, MISMATCH, MISSING, OK, TIMEOUT, UNSUPPORTED, XFAIL, XPASS

_FAILURE = (MISMATCH, MISSING, ERROR, CRASH, TIMEOUT, XPASS)
_SKIPPED = (UNSUPPORTED, XFAIL)


def junit_xml(results: list, suite_name: str, column_label) -> str:
    """JUnit XML for CaseResults: failure for MISMATCH/MISSING/error/crash/timeout/xpass (and
    any status it does not know), skipped for unsupported/xfail."""
    suites: dict = {}
    for r in results:
        suites.setdefault(column_label(r.backend, r.emulated), []).append(r)
    root = ET.Element("testsuites", name=suite_name)
    totals = Counter()
    for label in sorted(suites):
        group = sorted(suites[label], key=lambda r: (r.op, r.case_id))
        fails = sum(r.status not in (OK,) + _SKIPPED for r in group)
        skips = sum(r.status in _SKIPPED for r in group)
        secs = sum(r.seconds or 0.0 for r in group)
        suite = ET.SubElement(root, "testsuite", name=label, tests=str(len(group)),
                              failures=str(fails), errors="0", skipped=str(skips),
                              time=f"{secs:.3f}")
        for r in group:
            case = ET.SubElement(suite, "testcase", classname=r.op, name=r.case_id,
                                 time=f"{r.seconds or 0.0:.3f}")
            msg = first_line(r.message) or r.status
            if r.status in _SKIPPED:
                ET.SubElement(case, "skipped", message=f"{r.status}: {msg}")
            elif r.status != OK:
                kind = r.status if r.status in _FAILURE else f"unknown status {r.status}"
                el = ET.SubElement(case, "failure", type=kind, message=msg)
                el.text = "\n".join(x for x in (r.message, f"repro: {r.repro}" if r.repro
                                                else "") if x)
        totals.update(tests=len(group), failures=fails, skipped=skips)
    for k in ("tests", "failures", "skipped"):
        root.set(k, str(totals[k]))
    root.set("errors", "0")
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, "unicode") + "\n"
