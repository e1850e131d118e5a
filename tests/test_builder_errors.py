"""Builder and DSL errors that name what is valid; the DSL's generated methods are listed."""
import pytest

import rlx_ref
from rlx_ref.ir.builder import BuildArgumentError, BuildError
from rlx_ref.ir.text import TextParseError


def _x():
    g = rlx_ref.Graph("m")
    return g, g.input("x", [4, 8])


def test_wrong_keyword_names_the_valid_ones():
    g, x = _x()
    with pytest.raises(BuildArgumentError, match=r"'dim'.*valid keywords: x, axis"):
        g.softmax(x, dim=-1)
    with pytest.raises(TypeError):          # still a TypeError for callers that catch one
        g.softmax(x, dim=-1)


def test_wrong_keyword_in_the_dsl_names_the_valid_ones():
    with pytest.raises(BuildArgumentError, match=r"valid keywords: axis"):
        with rlx_ref.graph("m") as g:
            x = g.input("x", [4, 8])
            x.softmax(dim=-1)
    with pytest.raises(BuildArgumentError, match=r"did you mean 'keep_dim'"):
        with rlx_ref.graph("m") as g:
            g.sum(g.input("x", [4, 8]), [1], keepdim=True)


def test_a_type_error_inside_a_method_is_not_rewritten():
    g, x = _x()
    with pytest.raises(TypeError) as e:
        g.reshape(x, None)                  # bad value, right keywords
    assert not isinstance(e.value, BuildArgumentError)


@pytest.mark.parametrize("spelling", ["GELU", "Gelux", "Sigmoud"])
def test_unknown_activation_suggests_the_close_name(spelling):
    g, x = _x()
    close = {"GELU": "Gelu", "Gelux": "Gelu", "Sigmoud": "Sigmoid"}[spelling]
    if spelling == "GELU":                  # pyrlx spellings ignore case: accepted as is
        assert g.nodes[g.activation(spelling, x)].attrs.op == "Gelu"
        return
    with pytest.raises(BuildError, match=f"did you mean '{close}'"):
        g.activation(spelling, x)


def test_verifier_and_text_form_suggest_the_close_activation():
    from rlx_ref.ops.opdef import OpError, get

    g, x = _x()
    shape = g.nodes[x].shape
    with pytest.raises(OpError, match=r"unknown activation 'GELU'; did you mean 'Gelu'"):
        get("Activation").check([shape], _raw_attrs("GELU"), shape)
    text = g.to_text().replace("return %0", "").rstrip().rstrip("}") + \
        '  %1 = {"Activation":"GELU"}(%0) : [4, 8] f32\n  return %1\n}\n'
    with pytest.raises(TextParseError, match="did you mean 'Gelu'"):
        rlx_ref.parse(text)


def _raw_attrs(op):
    """An ActivationAttrs holding an unchecked spelling, as a hand-built payload would."""
    from rlx_ref.ops.elementwise import ActivationAttrs

    a = ActivationAttrs.__new__(ActivationAttrs)
    object.__setattr__(a, "op", op)
    return a


def test_builder_output_sets_the_outputs():
    g, x = _x()
    y = g.relu(x)
    g.output(y)
    assert g.outputs == [y]
    g.output([x, y])
    assert g.outputs == [x, y]


def test_dir_of_a_dsl_node_lists_its_generated_methods():
    with rlx_ref.graph("m", verify=False) as g:
        x = g.input("x", [4, 8])
        names = dir(x)
    for name in ("layer_norm", "attention", "cast", "gelu", "rms_norm", "scan", "softmax"):
        assert name in names
        assert callable(getattr(x, name))
