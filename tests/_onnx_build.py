"""Tiny ONNX models for the importer tests: build one from nodes, import it, run the oracle.

Import after ``pytest.importorskip("onnx")``: this module needs the onnx package."""
from onnx import helper, numpy_helper

import rlx_ref
from rlx_ref.onnx import load_with_params


def model(nodes, inputs, outputs, inits=(), opset=21, ir_version=10):
    """A model of ``nodes``; inputs ``(name, type, shape)``, outputs ``(name, type)``."""
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info(n, t, s)
                                       for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
                          initializer=[numpy_helper.from_array(a, n) for n, a in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir_version
    return m


def run(onnx_model, feeds, static=None):
    """The imported graph's outputs on the oracle, fed by name."""
    graph, params = load_with_params(onnx_model, static_inputs=static)
    names = [n.attrs.name for n in graph.input_nodes()]
    return rlx_ref.interpret(graph, {k: feeds[k] for k in names}, params)
