"""Pure-Python twin of ``_core.pyx``: the interpreter's hot paths, same names.

* ``last_uses``  — buffer liveness: after which step each value can be released;
* ``run_steps``  — the per-node dispatch loop (call, store, release);
* ``broadcast_shape`` — NumPy broadcast of two static dim tuples;
* ``scalar_bytes`` — literal encoding of a Python scalar into little-endian bytes.
"""
import struct

BUILT = False


class StepFailure(Exception):
    """A step raised; ``index`` is the step, ``__cause__`` the original exception."""

    def __init__(self, index):
        super().__init__(index)
        self.index = index


def last_uses(n_steps, step_inputs, keep):
    """For each step, the value ids whose last reader it is (never those in ``keep``)."""
    last = {}
    for i in range(n_steps):
        for v in step_inputs[i]:
            last[v] = i
    frees = [[] for _ in range(n_steps)]
    for v, i in last.items():
        if v not in keep:
            frees[i].append(v)
    return frees


def run_steps(fns, step_inputs, outs, frees, env):
    """Run every step: ``env[outs[i]] = fns[i](*env[inputs])``, then release dead values."""
    n = len(fns)
    i = 0
    try:
        while i < n:
            args = [env[j] for j in step_inputs[i]]
            env[outs[i]] = fns[i](*args)
            for v in frees[i]:
                env[v] = None
            i += 1
    except Exception as e:
        raise StepFailure(i) from e
    return env


def broadcast_shape(a, b):
    """NumPy broadcast of two tuples of ints; ValueError naming the clashing dims."""
    la, lb = len(a), len(b)
    n = la if la > lb else lb
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


def scalar_bytes(value, code):
    """Encode ``value`` as dtype ``code`` (display name); struct.error when out of range."""
    return struct.pack(_FMT[code], value)
