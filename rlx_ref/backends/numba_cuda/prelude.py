"""What generated CUDA kernels share: the device helpers they import and the numpy calls
Numba's CUDA target cannot type, with the helper each is rendered as instead."""

# every kernel module starts with this import (the helpers live in ``device_fns``)
PRELUDE = "from rlx_ref.backends.numba_cuda.device_fns import *  # noqa: F403\n"

NUMPY_SUBSTITUTES = {"np.rint(": "_rint(", "np.floor(": "_floor(", "np.ceil(": "_ceil(",
                     "np.fmod(": "math.fmod("}
