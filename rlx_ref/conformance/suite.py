"""The conformance test that ``pytest -p rlx_ref.conformance.pytest_plugin`` collects.

Not named ``test_*.py``: pytest collects it only when the plugin adds it (or it is named
on the command line with the plugin loaded), never while collecting rlx_ref itself.
"""


def test_conformance(conformance_check, conformance_backend, conformance_case):
    """One conformance case on one backend, judged under the ledger."""
    conformance_check(conformance_backend, conformance_case)
