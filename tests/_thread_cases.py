"""Shared by the thread-safety tests and their CUDA-simulator child process: a graph with
intermediates, params, a compiled loop, an Input passed straight out, a Reshape of an
input and one node returned twice, and the checks run against any backend."""
import sys
import threading
from contextlib import contextmanager

import numpy as np

import rlx_ref
from rlx_ref.ir.dtype import DType
from rlx_ref.ir.shape import Shape
from rlx_ref.ops.control import ScanAttrs

F = np.float32
STEPS, H = 3, 5


def graph() -> rlx_ref.Graph:
    """Outputs: softmax of a hidden layer, x itself, x reshaped, a Scan's trajectory over
    the hidden layer's mean, and the softmax again."""
    cell = rlx_ref.Graph("cell")
    hc, wc, xt = cell.input("h", [1, H]), cell.input("w", [H, H]), cell.input("x_t", [1, H])
    cell.set_outputs([cell.tanh(cell.add(cell.matmul(hc, wc), xt))])
    g = rlx_ref.Graph("threads")
    x, w = g.input("x", [4, 6]), g.param("w", [6, H])
    h = g.tanh(g.add(g.matmul(x, w), g.constant(np.float32(0.5))))
    sm = g.softmax(g.mul(h, h), -1)
    # read after some work: a run that kept its inputs where another run could replace
    # them would read the other run's here
    xs, wc = g.input("xs", [STEPS, 1, H]), g.param("wc", [H, H])
    scan = g.op("Scan", [g.mean(h, [0], True), wc, xs], ScanAttrs(cell, STEPS, True, 1, 1, 0),
                shape=Shape([STEPS, 1, H], DType.F32))
    g.set_outputs([sm, x, g.reshape(x, [6, 4]), scan, sm])
    return g


def params(seed: int = 0) -> dict:
    r = np.random.default_rng(seed)
    return {"w": (r.standard_normal((6, H)) * 0.5).astype(F),
            "wc": (r.standard_normal((H, H)) * 0.3).astype(F)}


def feeds(seed: int) -> dict:
    r = np.random.default_rng(1000 + seed)
    return {"x": r.standard_normal((4, 6)).astype(F),
            "xs": r.standard_normal((STEPS, 1, H)).astype(F)}


def oracle(g, fd: dict, ps: dict) -> list:
    return rlx_ref.interpret(g, fd, ps)


def close(got: list, want: list) -> bool:
    return len(got) == len(want) and all(
        a.shape == b.shape and np.allclose(a, b, rtol=1e-4, atol=1e-5)
        for a, b in zip(got, want))


@contextmanager
def busy_switching():
    """Threads switch every few microseconds instead of every 5 ms, so a race between
    runs shows within a few runs instead of by luck."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def _join_all(pool: list) -> None:
    with busy_switching():
        for th in pool:
            th.start()
        for th in pool:
            th.join()


def hammer(exe, g, threads: int = 4, runs: int = 25) -> dict:
    """Run ``exe`` from ``threads`` threads, ``runs`` times each, every run on its own
    inputs, all at once; every output is checked against the oracle."""
    ps = params()
    for k, v in ps.items():
        exe.set_param(k, v)
    cases = [[feeds(t * runs + i) for i in range(runs)] for t in range(threads)]
    wants = [[oracle(g, fd, ps) for fd in row] for row in cases]
    wrong, errors = [0], []
    start = threading.Barrier(threads)

    def work(t):
        start.wait()
        for fd, want in zip(cases[t], wants[t]):
            try:
                got = exe.run(fd)
            except Exception as e:      # counted: the test fails naming the first
                errors.append(f"{type(e).__name__}: {e}")
                continue
            if not close(got, want):
                wrong[0] += 1
    _join_all([threading.Thread(target=work, args=(t,)) for t in range(threads)])
    return {"runs": threads * runs, "wrong": wrong[0], "errors": errors[:3]}


def aliasing(exe, g) -> list:
    """Every way a run's outputs or a set_param could alias another array; returns the
    failures found (empty when the rules hold)."""
    bad = []
    ps = params()
    mine = {k: v.copy() for k, v in ps.items()}
    for k, v in mine.items():
        exe.set_param(k, v)
    for v in mine.values():
        v *= -3.0                       # the caller changes its arrays after set_param
    fd = feeds(1)
    kept = {k: v.copy() for k, v in fd.items()}
    first = exe.run(fd)
    if not close(first, oracle(g, kept, ps)):
        bad.append("set_param kept the caller's array (results follow its changes)")
    saved = [o.copy() for o in first]
    for o in first:
        if np.shares_memory(o, fd["x"]) or np.shares_memory(o, fd["xs"]):
            bad.append(f"an output of shape {o.shape} shares memory with an input")
    if np.shares_memory(first[0], first[4]):
        bad.append("a node returned twice is one array")
    for o in first:
        o[...] = 7.0                    # the caller writes its outputs
    if any(not np.array_equal(fd[k], kept[k]) for k in fd):
        bad.append("writing outputs changed an input")
    second = exe.run(feeds(1))
    if not close(second, oracle(g, kept, ps)):
        bad.append("writing outputs changed a later run (params or buffers)")
    exe.run(feeds(2))
    if any(not np.array_equal(a, b) for a, b in zip(second, exe.run(feeds(1)))):
        bad.append("runs are not repeatable")
    third = exe.run(feeds(1))
    exe.run(feeds(2))
    if any(not np.array_equal(a, b) for a, b in zip(third, saved)):
        bad.append("a later run overwrote an earlier run's outputs")
    return bad


def param_swaps(exe, g, runs: int = 40) -> dict:
    """Runs in one thread while another swaps param ``w`` between two values: every run
    must match the oracle for one of them (a set_param never tears a run)."""
    ps0, ps1 = params(0), {**params(0), "w": params(7)["w"]}
    for k, v in ps0.items():
        exe.set_param(k, v)
    fd = feeds(3)
    wants = [oracle(g, fd, ps0), oracle(g, fd, ps1)]
    done, torn, errors = threading.Event(), [0], []

    def swap():
        i = 0
        while not done.is_set():
            exe.set_param("w", (ps0, ps1)[i % 2]["w"])
            i += 1

    def run():
        for _ in range(runs):
            try:
                got = exe.run(fd)
            except Exception as e:
                errors.append(f"{type(e).__name__}: {e}")
                continue
            if not any(close(got, w) for w in wants):
                torn[0] += 1
        done.set()
    _join_all([threading.Thread(target=swap), threading.Thread(target=run)])
    return {"runs": runs, "torn": torn[0], "errors": errors[:3]}
