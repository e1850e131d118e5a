"""Float payload fields keep ±inf, NaN and -0.0 through print -> parse, for every kind."""
import dataclasses
import math

import numpy as np
import pytest

from rlx_ref import Graph, TextParseError, parse
from rlx_ref.ir.graph import Op
from rlx_ref.ops import codec as C
from rlx_ref.ops.opdef import all_opdefs

SPECIALS = [math.inf, -math.inf, math.nan, -0.0, 0.0, 1e-45, -3.4028235e38]


def _float_slot(codec):
    """How to put a float into a field of this codec, or None if it holds no float."""
    if isinstance(codec, C._Float):
        return lambda v: v
    if isinstance(codec, C.Optional):
        return _float_slot(codec.item)
    if isinstance(codec, C.Enum):
        for tag, inner in codec.data.items():
            if isinstance(inner, C._Float):
                return lambda v, t=tag: (t, v)
    return None


def _cases():
    out = []
    for d in all_opdefs():
        if d.attrs is None or d.samples is None:
            continue
        for f in dataclasses.fields(d.attrs):
            slot = _float_slot(f.metadata["codec"])
            if slot is not None:
                out.append(pytest.param(d, f.name, slot, id=f"{d.kind}.{f.name}"))
    return out


CASES = _cases()


def test_every_float_field_is_covered():
    kinds = {p.values[0].kind for p in CASES}
    assert {"Clamp", "LayerNorm", "RmsNorm", "GroupNorm", "Pad", "Attention"} <= kinds


def _first_float(v):
    return v[1] if isinstance(v, tuple) else v


@pytest.mark.parametrize("d,field,slot", CASES)
def test_special_floats_round_trip(d, field, slot):
    sample = next(s for s in d.samples(np.random.default_rng(0)) if s.attrs is not None)
    for special in SPECIALS:
        attrs = dataclasses.replace(sample.attrs, **{field: slot(special)})
        g = Graph("f")
        x = g.input("x", [2])
        g.add_node_unchecked(Op(d.kind, attrs), [x], g.nodes[x].shape)
        text = g.to_text()
        assert f'"{field}":null' not in text      # serde_json's lossy spelling
        back = parse(text)
        got = _first_float(getattr(back.nodes[1].attrs, field))
        want = float(np.float32(special))
        if math.isnan(special):
            assert math.isnan(got)
        else:
            assert got == want and math.copysign(1, got) == math.copysign(1, want)
        assert back.to_text() == text


def test_written_forms():
    from rlx_ref.ops.elementwise import ClampAttrs

    g = Graph("c")
    x = g.input("x", [2])
    g.op("Clamp", [x], ClampAttrs(-math.inf, math.inf))
    assert '{"Clamp":{"min":"-inf","max":"inf"}}' in g.to_text()
    g2 = parse('graph @c {\n  %0 = {"Clamp":{"min":"nan","max":-0.0}} : [2] f32\n}')
    a = g2.nodes[0].attrs
    assert math.isnan(a.min) and math.copysign(1, a.max) == -1


@pytest.mark.parametrize("bad,msg", [
    ('"Infinity"', 'expected a number (f32) or one of "inf", "-inf", "nan"'),
    ("null", "expected a number (f32)"),
    ("1e39", "1e+39 is out of range for f32"),
    ("-Infinity", "-Infinity is not JSON"),
])
def test_other_spellings_are_rejected(bad, msg):
    with pytest.raises(TextParseError, match="line 2: ") as e:
        parse('graph @c {\n  %0 = {"Clamp":{"min":' + bad + ',"max":1.0}} : [2] f32\n}')
    assert msg in e.value.message
