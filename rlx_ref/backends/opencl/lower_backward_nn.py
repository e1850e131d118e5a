"""Backward (training) kinds of rope, scans, gathers, pooling, convolution, losses and
attention: claimed through their decompositions, which the compile pipeline rewrites into
kinds this backend lowers natively (``backends/backward_claims.py``)."""
from __future__ import annotations

from ..backward_claims import claim
from .lowering import TABLE

claim(TABLE)
