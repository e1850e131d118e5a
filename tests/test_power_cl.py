"""The planted-fault backends run ``lowered-thresholds`` cases as their real backend does."""
import pytest

from rlx_ref.backends import variants
from rlx_ref.backends.base import BackendUnavailable
from rlx_ref.backends.registry import get_backend
from rlx_ref.conformance.cases import build_cases
from rlx_ref.conformance.runner import compile_options


@pytest.mark.parametrize("spec", ["numba-cpu+fault:reduce-cols-short",
                                  "opencl+fault:cl-reduce-cols-stride"])
def test_a_faulted_backend_lowers_its_real_backends_thresholds(spec):
    try:
        faulty = get_backend(spec)
    except BackendUnavailable as e:
        pytest.skip(str(e))
    base = spec.split("+fault:")[0]
    cases = build_cases(["Reduce"])
    lowered = next(c for c in cases if variants.LOWERED_TAG in c.tags)
    plain = next(c for c in cases if variants.LOWERED_TAG not in c.tags)
    want = variants.lowered(base)
    assert want and compile_options(faulty, lowered).thresholds == want
    assert compile_options(get_backend(base), lowered).thresholds == want
    assert compile_options(faulty, plain) is None
