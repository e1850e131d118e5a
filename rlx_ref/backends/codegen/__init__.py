"""Code generation shared by the Numba (Python source) and OpenCL/CUDA (C source) renderers."""
