"""What every backend's quant lowering asks the same way: a product's (m, k, n) and which
GGUF schemes its decoders cover (the rest run the reference on the host)."""
from __future__ import annotations

import math

from ..ops import _quant_scheme as S
from ..quant import QuantError, all_schemes, get_scheme


def product_dims(node, ins) -> tuple:
    """(m, k, n) of a product ``x[..., m, k] -> out[..., m, n]`` (m over every row)."""
    x = tuple(ins[0].dims)
    return math.prod(x[:-1]), x[-1], node.shape.dims[-1]


def kernel_decodes(scheme, decoders) -> bool:
    """Whether ``decoders`` (GGUF names) hold one for ``scheme`` (an RLX QuantScheme)."""
    try:
        return get_scheme(S.name_of(scheme)).name in decoders
    except QuantError:
        return False


def host_gguf(decoders) -> list:
    """GGUF names of the schemes rlx_ref decodes and ``decoders`` does not."""
    return sorted(s.name for s in all_schemes()
                  if s.kind == "gguf" and s.rlx and s.name not in decoders)
