"""``cuda``: kernels generated for NVIDIA GPUs through numba.cuda (numba-cuda)."""
from .backend import NumbaCudaBackend

__all__ = ["NumbaCudaBackend"]
