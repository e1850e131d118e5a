"""Python-level fault factories shared by the catalogue files: each takes the original
attribute and returns the faulty replacement."""
from __future__ import annotations

def identity_zero_for_max(original):
    """Reduce Max starts its accumulator at 0 instead of -inf."""
    def identity(op, dt):
        v = original(op, dt)
        return type(v)(0) if op == "Max" and dt.is_float else v
    return identity


def mod_for_middle_ones(original):
    """The read-mode choice takes a suffix-modulus read whenever the last axes agree, also
    when a size-1 axis sits in the middle ([3,1,4] → [3,2,4]), where it is wrong."""
    import math

    def read_mode(shape, out, region_attrs=None, i=0):
        mode = original(shape, out, region_attrs, i)
        if (mode[0] == "strided" and shape and len(shape) == len(out)
                and shape[0] != 1 and shape[-1] == out[-1]
                and math.prod(out) % max(math.prod(shape), 1) == 0):
            return "mod", None
        return mode
    return read_mode


def swapped_inner_strides(original):
    """Movement lowerings read the input with its two innermost strides swapped (the
    axis order of a permutation applied the wrong way round)."""
    def in_strides(ins):
        st = list(original(ins))
        if len(st) >= 2:
            st[-1], st[-2] = st[-2], st[-1]
        return st
    return in_strides


MOVE_MEMO = "rlx_ref.backends.numba_cpu._index_map:_KERNEL"

