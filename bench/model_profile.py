"""Per-kind time of a numba-cpu executable: its plan's steps timed one by one.

The run loop of ``numba_cpu.executable.Plan._exec`` with a clock around each step; the
kinds are those of the compiled graph (after fusion), so fused regions show as such."""
from __future__ import annotations

import time
from collections import defaultdict

import numpy as np

from rlx_ref.backends.numba_cpu.executable import _PLANNED, _RETURNS


def profile_numba(exe, feeds: dict, runs: int = 3) -> dict:
    """kind -> (median seconds per run summed over its steps, step count)."""
    plan = exe._pool.plans()[0]
    params = exe._params
    if exe.hoisted is not None:     # the weight-only prefix's results feed the main plan
        feeds = {**feeds, **exe.hoisted.feeds(params)}
    per_run = []
    for _ in range(runs):
        env = plan._template.copy()
        for i, name in plan._inputs:
            env[i] = np.ascontiguousarray(feeds[name])
        for i, name in plan._params:
            env[i] = params[name]
        acc = defaultdict(float)
        for fn, gather, kind, nid, out in plan._ops:
            t = time.perf_counter()
            if kind == _PLANNED:
                fn(out, *gather(env))
            elif kind == _RETURNS:
                env[nid] = fn(*gather(env))
            else:
                buf = np.empty(*out)
                fn(buf, *gather(env))
                env[nid] = buf
            acc[plan.graph.nodes[nid].kind] += time.perf_counter() - t
        per_run.append(acc)
    counts = defaultdict(int)
    for node, _, _ in plan.steps:
        counts[node.kind] += 1
    return {k: (float(np.median([r[k] for r in per_run])), counts[k]) for k in counts}


def format_profile(prof: dict, top: int = 8) -> str:
    total = sum(s for s, _ in prof.values()) or 1.0
    rows = sorted(prof.items(), key=lambda kv: -kv[1][0])[:top]
    return ", ".join(f"{k} {s * 1e3:.1f} ms ({100 * s / total:.0f}%, {n})"
                     for k, (s, n) in rows)
