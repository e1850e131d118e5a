"""rlx_ref: the Python reference stack for the RLX ML IR.

Public API: the IR (``DType``, ``Shape``, ``Dyn``, ``Graph``, ``Op``), the DSL
(``graph``), text form (``parse``), verifier (``verify``), oracle (``interpret``,
``Session``) and the op registry (``opdefs``, ``opdef``).
"""
from .ir.dtype import DType
from .ir.shape import Dyn, Shape, ShapeError
from .ir.graph import Graph, Node, Op

__version__ = "0.1.0"

__all__ = ["DType", "Dyn", "Shape", "ShapeError", "Graph", "Node", "Op", "__version__"]
