"""Numba source of ``gemm_view``: a BLAS product on strided row-major views, no copies.

Numba's ``np.dot`` takes only contiguous operands (it copies any other), so a product of a
column block, ``b[:, c0:c1]`` into ``out[:, c0:c1]``, would copy its block first. The BLAS
call under ``np.dot`` (``numba_xxgemm`` in Numba's helper library: the OpenBLAS that
``blas_serial`` holds) takes leading dimensions, so views whose rows are contiguous are
passed as they are. Splitting a product by output columns lets threads share a small-M
product (a transformer's 128 tokens, a late conv layer's 49 positions) with each thread
packing only its part of the large operand, where blocks of rows would each pack all of it.
"""
from __future__ import annotations

GEMM_HEAD = '''
from numba import types as _nbt

_XXGEMM = _nbt.ExternalFunction("numba_xxgemm", _nbt.int32(
    _nbt.int8, _nbt.int8, _nbt.int8, _nbt.intp, _nbt.intp, _nbt.intp,
    _nbt.voidptr, _nbt.voidptr, _nbt.intp, _nbt.voidptr, _nbt.intp,
    _nbt.voidptr, _nbt.voidptr, _nbt.intp))
_XXGEMV = _nbt.ExternalFunction("numba_xxgemv", _nbt.int32(
    _nbt.int8, _nbt.int8, _nbt.intp, _nbt.intp, _nbt.voidptr, _nbt.voidptr, _nbt.intp,
    _nbt.voidptr, _nbt.voidptr, _nbt.voidptr))


@njit(cache=True, nogil=True)
def gemm_view(a, b, out, ab):
    # out = a @ b for f32/f64 2-D views with unit column strides (rows at any stride);
    # ab = [1, 0] in their dtype (alpha, beta). Row-major out = a @ b is column-major
    # outT = bT @ aT: BLAS gets b first, with the row strides as leading dimensions
    it = a.itemsize
    m, k, n = a.shape[0], a.shape[1], b.shape[1]
    if m == 0 or n == 0:
        return
    if k == 0:
        out[...] = 0
        return
    kind = np.int8(115) if it == 4 else np.int8(100)    # 's' or 'd'
    nt = np.int8(110)                                     # 'n': no transpose
    if m == 1 and out.strides[1] == it and a.strides[1] == it:
        # one row: GEMV reads b once as it lies (GEMM would pack all of it first, a
        # second pass over a decode step's 154 MB [768, 50257] head weight); b as
        # column-major is [n, k] at leading dimension b's row stride
        _XXGEMV(kind, nt, n, k, ab[0:1].ctypes.data, b.ctypes.data, b.strides[0] // it,
                a.ctypes.data, ab[1:2].ctypes.data, out.ctypes.data)
        return
    _XXGEMM(kind, nt, nt, n, m, k, ab[0:1].ctypes.data, b.ctypes.data, b.strides[0] // it,
            a.ctypes.data, a.strides[0] // it, ab[1:2].ctypes.data, out.ctypes.data,
            out.strides[0] // it)
'''
