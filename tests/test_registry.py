"""Every registered OpDef is complete, and every one of its samples runs on the oracle."""
import dataclasses

import numpy as np
import pytest

from rlx_ref.ir.text import parse, print_graph
from rlx_ref.ir.verify import verify
from rlx_ref.ops.opdef import Caps, all_opdefs, get
from rlx_ref.ops.single import run_sample, single_op_graph

OPDEFS = all_opdefs()
KINDS = [d.kind for d in OPDEFS]


@pytest.mark.parametrize("kind", KINDS)
def test_opdef_is_complete(kind):
    d = get(kind)
    assert d.doc and len(d.doc) > 40, "a semantics paragraph is required"
    assert d.constraints and all(c.startswith(f"C{i + 1}:") for i, c in
                                 enumerate(d.constraints)), "numbered constraints C1.."
    assert d.reference is not None
    assert d.samples is not None
    assert isinstance(d.caps, Caps)
    if d.attrs is not None:
        for f in dataclasses.fields(d.attrs):
            assert "codec" in f.metadata, f"{kind}.{f.name} needs a codec"


def _samples(kind):
    return get(kind).samples(np.random.default_rng(0))


@pytest.mark.parametrize("kind", KINDS)
def test_samples_run_verify_and_round_trip(kind):
    samples = _samples(kind)
    assert samples, "at least one sample"
    for s in samples:
        g = single_op_graph(kind, s.attrs, s.inputs, s.out)
        assert verify(g) == [], f"{kind} sample {s.tags}: {verify(g)}"
        text = print_graph(g)
        back = parse(text)
        assert back == g and print_graph(back) == text
        if kind in ("Input", "Param"):
            continue
        out = run_sample(kind, s)
        assert out.shape == tuple(g.nodes[-1].shape.dims)
        if s.expect is not None:
            np.testing.assert_array_equal(out, np.asarray(s.expect), err_msg=f"{kind} {s.tags}")
        out64 = run_sample(kind, s, float64=True)
        assert out64.shape == out.shape


def test_samples_cover_edge_cases_across_registry():
    tags = set()
    for d in OPDEFS:
        for s in d.samples(np.random.default_rng(0)):
            tags.update(s.tags)
    assert {"empty", "0-d", "broadcast"} <= tags
