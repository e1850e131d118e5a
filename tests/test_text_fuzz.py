"""Bounded fuzzing of the text parser and the verifier: only their own errors escape.

Inputs: mutations and truncations of valid printed one-op graphs (every registered kind),
random JSON payloads, deep nesting, and random payload values handed to the verifier.
RLX_REF_FUZZ_EXAMPLES raises the per-test example count for a longer hunt.
"""
import dataclasses
import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from rlx_ref import GraphVerifyError, TextParseError, parse, verify, verify_or_raise
from rlx_ref.env_registry import get
from rlx_ref.ir.text import op_to_json, print_graph
from rlx_ref.ops import codec as C
from rlx_ref.ops.codec import dumps
from rlx_ref.ops.opdef import all_opdefs, kinds
from rlx_ref.ops.single import single_op_graph

N = get("RLX_REF_FUZZ_EXAMPLES")
FUZZ = settings(max_examples=N, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _seed_graphs():
    """(kind, sample, graph) for the first buildable sample of every kind with samples."""
    out = []
    for d in all_opdefs():
        if d.samples is None:
            continue
        for s in d.samples(np.random.default_rng(0)):
            try:
                g = single_op_graph(d.kind, s.attrs, s.inputs, s.out)
            except (ValueError, TypeError):
                continue
            if not verify(g):
                out.append((d.kind, s, g))
                break
    return out


SEEDS = _seed_graphs()
TEXTS = [print_graph(g) for _, _, g in SEEDS]
PAYLOAD_SEEDS = [(k, s, g) for k, s, g in SEEDS if s.attrs is not None]


def test_seeds_cover_the_registry():
    assert len(SEEDS) >= 0.9 * len([d for d in all_opdefs() if d.samples is not None])


def _parses_or_fails_cleanly(text: str):
    """parse(text) returns a graph that re-prints stably, or raises TextParseError."""
    try:
        g = parse(text)
    except TextParseError as e:
        assert isinstance(e.line, int) and 1 <= e.line <= text.count("\n") + 1
        assert str(e).startswith(f"line {e.line}: ") and e.message
        return None
    errors = verify(g)                       # must not raise, whatever the payload
    assert all(str(x).startswith("at %") or "output" in str(x) for x in errors)
    printed = print_graph(g)
    assert print_graph(parse(printed)) == printed
    return g


_TOKENS = ["{", "}", "[", "]", '"', ",", ":", "%", "%99", "%0", "-1", "0", "1e400", "-0.0",
           "18446744073709551616", "4294967296", "9" * 40, "NaN", "Infinity", '"inf"',
           '"nan"', "null", "true", "\\", " ", "\n", "#", "?", "?7", "f32", "bool", '"op"',
           '"Static"', '"dims":[]', "return ", "graph @g {", "//", "\u2028", "é", "\t"]


@st.composite
def mutated_texts(draw):
    text = draw(st.sampled_from(TEXTS))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        how = draw(st.sampled_from(["insert", "delete", "number", "swap"]))
        if how == "insert":
            tok = draw(st.sampled_from(_TOKENS) | st.text(max_size=4))
            text = text[:i] + tok + text[i:]
        elif how == "delete":
            text = text[:i] + text[i + draw(st.integers(1, 8)):]
        elif how == "number":
            digits = [k for k, c in enumerate(text) if c.isdigit()]
            if digits:
                k = draw(st.sampled_from(digits))
                big = draw(st.sampled_from([2**32, 2**63, 2**64, 10**30, 0, 2**31 - 1]))
                text = text[:k] + str(big) + text[k + 1:]
        else:
            j = draw(st.integers(0, len(text)))
            text = text[:min(i, j)] + text[max(i, j):] + text[min(i, j):max(i, j)]
    return text


@FUZZ
@given(mutated_texts())
def test_mutated_texts_raise_only_text_parse_errors(text):
    _parses_or_fails_cleanly(text)


@settings(max_examples=N * 3 // 5, deadline=None)
@given(st.sampled_from(TEXTS), st.data())
def test_truncated_texts_raise_only_text_parse_errors(text, data):
    cut = data.draw(st.integers(0, len(text)))
    _parses_or_fails_cleanly(text[:cut])


_WORDS = ["inf", "-inf", "nan", "F32", "I64", "Relu", "Sum", "Constant", "Reflect", "None",
          "SlidingWindow", "Input", "x", ""]
_KEYS = ["name", "nodes", "outputs", "op", "shape", "dims", "dtype", "Static", "Dynamic",
         "id", "inputs", "origin", "Constant", "Input", "Step"]
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70)
    | st.sampled_from([2**32, 2**63, 2**64, -2**63 - 1, -1, 0, 1])
    | st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(_WORDS),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(_KEYS) | st.text(max_size=3), inner, max_size=4),
    max_leaves=20)


@st.composite
def random_payload_lines(draw):
    from rlx_ref.ops.opdef import get

    if draw(st.booleans()):      # a valid payload with one field replaced
        kind, _, graph = draw(st.sampled_from(PAYLOAD_SEEDS))
        payload = op_to_json(graph.nodes[-1].op)[kind]
        if isinstance(payload, dict):
            payload[draw(st.sampled_from(sorted(payload)))] = draw(_JSON)
        else:
            payload = draw(_JSON)
        return (f'graph @g {{\n  %0 = {{"Input":{{"name":"x"}}}} : [2] f32\n'
                f'  %1 = {dumps({kind: payload})}(%0) : [2] f32\n}}\n')
    kind = draw(st.sampled_from(kinds() + ["Nonsense"]))
    d = get(kind) if kind != "Nonsense" else None
    if d is not None and d.attrs is not None and draw(st.booleans()):
        names = [f.name for f in dataclasses.fields(d.attrs)]
        payload = {n: draw(_JSON) for n in names if draw(st.integers(0, 4))}
    else:
        payload = draw(_JSON)
    op = json.dumps({kind: payload}) if draw(st.integers(0, 5)) else json.dumps(kind)
    return f'graph @g {{\n  %0 = {{"Input":{{"name":"x"}}}} : [2] f32\n  %1 = {op}(%0) : [2] f32\n}}\n'


@FUZZ
@given(random_payload_lines())
def test_random_json_payloads_raise_only_text_parse_errors(text):
    g = _parses_or_fails_cleanly(text)
    if g is None:
        with pytest.raises(TextParseError) as e:
            parse(text)
        assert e.value.line == 3


@settings(max_examples=N * 2 // 5, deadline=None)
@given(st.integers(1, 5000), st.sampled_from(["[", "{\"a\":"]), st.sampled_from(["op", "label",
                                                                             "body"]))
def test_deep_nesting_is_bounded(depth, opener, where):
    closer = "]" if opener == "[" else "}"
    nest = opener * depth + "1" + closer * depth
    if where == "op":
        line = f'%1 = {{"Reshape":{{"new_shape":{nest}}}}}(%0) : [2] f32'
    elif where == "label":
        line = f"%1 = {{\"Activation\":\"Relu\"}}(%0) : [2] f32 #{nest}"
    else:
        line = ('%1 = {"If":{"then_branch":{"name":"b","nodes":[{"op":' + nest
                + ',"shape":{"dims":[],"dtype":"F32"}}],"outputs":[0]},"else_branch":'
                '{"name":"b","nodes":[],"outputs":[]}}}(%0) : [] f32')
    text = 'graph @g {\n  %0 = {"Input":{"name":"x"}} : [2] f32\n  ' + line + "\n}\n"
    if (depth, opener, where) == (1, "[", "op"):         # new_shape [1]: well formed
        assert parse(text).nodes[1].attrs.new_shape == (1,)
        return
    with pytest.raises(TextParseError) as e:
        parse(text)
    assert e.value.line == 3
    if depth > 130:
        assert "nested deeper than 128 levels" in e.value.message


_VALUES = st.one_of(
    st.sampled_from([2**32, 2**31, 2**63, 2**64, 2**70, -1, -2**63 - 1, 0, 1, True, None,
                     math.inf, -math.inf, math.nan, 1e39, -0.0, 0.5, "x", "", b"\x00", ()]),
    st.integers(-2**80, 2**80), st.floats(), st.text(max_size=3),
    st.lists(st.integers(-2**70, 2**70) | st.floats() | st.none(), max_size=3).map(tuple),
    st.tuples(st.sampled_from(["Constant", "SlidingWindow", "Input", "bogus"]),
              st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=2)))


def _out_of_int_range(codec, v) -> bool:
    return (isinstance(codec, C._Int) and isinstance(v, int) and not isinstance(v, bool)
            and not codec.lo <= v <= codec.hi)


@FUZZ
@given(st.sampled_from(PAYLOAD_SEEDS), st.data())
def test_verifier_reports_any_payload_value_as_an_error(seed, data):
    kind, sample, graph = seed
    field = data.draw(st.sampled_from(dataclasses.fields(sample.attrs)))
    value = data.draw(_VALUES)
    attrs = dataclasses.replace(sample.attrs, **{field.name: value})
    g = graph.copy()
    g.nodes[-1].op = type(g.nodes[-1].op)(kind, attrs)
    errors = [str(e) for e in verify(g)]                 # a list, never an exception
    if _out_of_int_range(field.metadata["codec"], value):
        assert any(f"field {field.name} = " in e and "out of range for" in e for e in errors)
    try:
        verify_or_raise(g)
    except GraphVerifyError as e:
        assert e.errors
