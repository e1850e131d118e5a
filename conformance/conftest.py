"""`pytest conformance --backend NAME`: the conformance cases as tests."""
from rlx_ref.conformance.pytest_plugin import (  # noqa: F401  (pytest hooks and fixtures)
    conformance_check, pytest_addoption, pytest_generate_tests,
)
