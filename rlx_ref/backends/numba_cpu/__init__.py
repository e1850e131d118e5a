"""The Numba CPU backend: kernels generated from the registry, njit-compiled and cached."""
from .backend import NumbaCpuBackend

__all__ = ["NumbaCpuBackend"]
