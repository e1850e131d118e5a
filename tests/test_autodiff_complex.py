"""The complex kinds' VJP rules against finite differences of the real and imaginary parts,
in RLX's Wirtinger convention (the cotangent is ∂L/∂z̄ = (∂L/∂x + i·∂L/∂y) / 2)."""
import numpy as np

from rlx_ref import Graph
from rlx_ref.autodiff import SEED, grad
from rlx_ref.interpret import interpret
from rlx_ref.ir.dtype import DType


def _loss_graph(conjugate_first: bool):
    g = Graph("c")
    z, w = g.input("z", [4], DType.C64), g.input("w", [4], DType.F32)
    v = g.op("Conjugate", (z,)) if conjugate_first else z
    n = g.op("Binary", (g.op("ComplexNormSq", (v,)), w), op="Mul")
    g.set_outputs([g.op("Reduce", (n,), op="Sum", axes=(0,), keep_dim=False)])
    return g


def _loss(g, z, w):
    return float(interpret(g, {"z": z, "w": w}, {}, float64=True)[0])


def test_wirtinger_gradient_matches_finite_differences():
    rng = np.random.default_rng(3)
    z = (rng.standard_normal(4) + 1j * rng.standard_normal(4)).astype(np.complex64)
    w = rng.uniform(0.5, 2.0, 4).astype(np.float32)
    for conj in (False, True):
        g = _loss_graph(conj)
        (dz,) = interpret(grad(g, ["z"]), {"z": z, "w": w, SEED: np.float32(1)}, {})
        h = 1e-3
        want = np.zeros(4, np.complex128)
        for i in range(4):
            e = np.zeros(4, np.complex64)
            e[i] = h
            dx = (_loss(g, z + e, w) - _loss(g, z - e, w)) / (2 * h)
            dy = (_loss(g, z + 1j * e, w) - _loss(g, z - 1j * e, w)) / (2 * h)
            want[i] = (dx + 1j * dy) / 2
        np.testing.assert_allclose(dz, want, rtol=2e-3, atol=1e-3)
