"""The Numba CPU backend: kernels generated from the registry, njit-compiled and cached."""
# first: every @njit(cache=True) below must get the checked cache (see kernel_cache)
from . import kernel_cache  # noqa: F401  isort: skip
from .backend import NumbaCpuBackend

__all__ = ["NumbaCpuBackend"]
