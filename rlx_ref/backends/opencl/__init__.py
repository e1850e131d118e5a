"""The OpenCL backend: generated OpenCL C kernels on any OpenCL device."""
from .backend import OpenCLBackend

__all__ = ["OpenCLBackend"]
