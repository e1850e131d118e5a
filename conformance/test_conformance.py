"""One test per (backend, case); see rlx_ref/conformance/pytest_plugin.py for options."""


def test_case(conformance_check, conformance_backend, conformance_case):
    conformance_check(conformance_backend, conformance_case)
