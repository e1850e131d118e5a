"""ONNX import: ``load`` an ONNX model as an RLX Graph (opsets 13 to the newest onnx knows).

    graph, params = rlx_ref.onnx.load_with_params("model.onnx")
    outs = rlx_ref.interpret(graph, {"x": x}, params)       # or Session(...).compile

ONNX ops map onto registered RLX kinds, decomposed where RLX has no direct kind (Gemm,
HardSigmoid, Split, Squeeze, LogSoftmax, Resize nearest, Einsum as DotGeneral, ...).
Shape arithmetic (Shape → Gather → Concat → Reshape) is folded at import time, so shape
operands must be static. Float initializers become Params (``weights="params"``, their
values in ``load_with_params``'s dict) or Constants (``weights="constants"``); integer
initializers are always static (they are shapes, axes and indices). A model with any op,
attribute or dtype that does not map raises ``OnnxImportError`` listing every such node
(``.problems``), never a partial graph. Needs the optional ``onnx`` package.
"""
from __future__ import annotations

from .context import Unmappable
from .load import Imported, OnnxImportError, Problem, import_model, max_opset


def load(path_or_model, *, opset: int | None = None, weights: str = "params",
         static_inputs: dict | None = None):
    """The RLX Graph of an ONNX model (a path, bytes or ``onnx.ModelProto``).

    ``opset`` overrides the model's default-domain opset; ``weights`` is "params" or
    "constants"; ``static_inputs`` gives import-time values for graph inputs that RLX
    needs in a payload (a Reshape's shape fed as an input). With ``weights="params"``
    use ``load_with_params`` to get the values too.
    """
    return import_model(path_or_model, opset=opset, weights=weights,
                        static_inputs=static_inputs).graph


def load_with_params(path_or_model, *, opset: int | None = None, weights: str = "params",
                     static_inputs: dict | None = None):
    """``(graph, params)``: the graph and ``{param name: array}`` to run it with
    (``interpret(graph, inputs, params)`` or ``CompiledGraph.set_param``)."""
    imp = import_model(path_or_model, opset=opset, weights=weights,
                       static_inputs=static_inputs)
    return imp.graph, imp.params


__all__ = ["load", "load_with_params", "import_model", "Imported", "OnnxImportError",
           "Problem", "Unmappable", "max_opset"]
