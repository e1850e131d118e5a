# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twin of ``_core_py.py`` (same names and behaviour)."""
import struct

BUILT = True


class StepFailure(Exception):
    """A step raised; ``index`` is the step, ``__cause__`` the original exception."""

    def __init__(self, index):
        super().__init__(index)
        self.index = index


def last_uses(Py_ssize_t n_steps, list step_inputs, keep):
    cdef dict last = {}
    cdef Py_ssize_t i
    cdef object v
    for i in range(n_steps):
        for v in <tuple>step_inputs[i]:
            last[v] = i
    cdef list frees = [[] for _ in range(n_steps)]
    for v, i in last.items():
        if v not in keep:
            (<list>frees[i]).append(v)
    return frees


def run_steps(list fns, list step_inputs, list outs, list frees, list env):
    cdef Py_ssize_t n = len(fns)
    cdef Py_ssize_t i = 0
    cdef Py_ssize_t k, m
    cdef tuple ins
    cdef list fr
    cdef object fn
    try:
        while i < n:
            ins = <tuple>step_inputs[i]
            m = len(ins)
            fn = fns[i]
            if m == 1:
                res = fn(env[<Py_ssize_t>ins[0]])
            elif m == 2:
                res = fn(env[<Py_ssize_t>ins[0]], env[<Py_ssize_t>ins[1]])
            elif m == 0:
                res = fn()
            else:
                res = fn(*[env[<Py_ssize_t>ins[k]] for k in range(m)])
            env[<Py_ssize_t>outs[i]] = res
            fr = <list>frees[i]
            for k in range(len(fr)):
                env[<Py_ssize_t>fr[k]] = None
            i += 1
    except Exception as e:
        raise StepFailure(i) from e
    return env


def broadcast_shape(tuple a, tuple b):
    cdef Py_ssize_t la = len(a), lb = len(b)
    cdef Py_ssize_t n = la if la > lb else lb
    cdef Py_ssize_t k
    cdef long long x, y
    out = [0] * n
    for k in range(n):
        x = a[la - n + k] if la - n + k >= 0 else 1
        y = b[lb - n + k] if lb - n + k >= 0 else 1
        if x == y or y == 1:
            out[k] = x
        elif x == 1:
            out[k] = y
        else:
            raise ValueError(f"cannot broadcast {tuple(a)} with {tuple(b)}: dim {k} is {x} vs {y}")
    return tuple(out)


_FMT = {"f32": "<f", "f64": "<d", "i8": "<b", "i16": "<h", "i32": "<i", "i64": "<q",
        "u8": "<B", "u32": "<I", "bool": "<?", "f16": "<e"}


def scalar_bytes(value, str code):
    return struct.pack(_FMT[code], value)
