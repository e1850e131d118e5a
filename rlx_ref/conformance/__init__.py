"""The conformance suite: cases from the registry, a float64 comparator, a ledger of
expected outcomes, a runner with repros, and the op-coverage report."""
