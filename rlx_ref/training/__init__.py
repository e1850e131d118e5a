"""Training end to end: optimizers as graph ops (``optim``), two small models with their
synthetic data (``models``) and a runner that trains on any backend (``fit``)."""
from __future__ import annotations

from .optim import SGD, Adam, TrainState, train_step


def backend_runner(device: str):
    """``run(graph, inputs, params) -> outputs`` on ``device`` (``"reference"``,
    ``"numba-cpu"``, ``"opencl"`` ...), compiling each graph once."""
    from ..runtime.session import Session

    session, compiled = Session(device=device), {}

    def run(graph, inputs, params):
        exe = compiled.get(id(graph))
        if exe is None:
            exe = compiled[id(graph)] = session.compile(graph)
        for k, v in params.items():
            exe.set_param(k, v)
        return exe.run(inputs)
    return run


def fit(forward, params: dict, batches, optimizer, device: str = "reference") -> list:
    """Train ``forward`` (one loss output) on ``batches`` (an iterable of input dicts);
    returns the loss of every step."""
    state = TrainState(train_step(forward, list(params), optimizer), params, optimizer,
                       backend_runner(device))
    return [state.step(b) for b in batches]


def loss_lines(losses: list, rows: int = 10) -> list:
    """About ``rows`` evenly spaced ``step N  loss L`` lines, the last step included."""
    every = max(1, len(losses) // rows)
    picks = sorted(set(range(0, len(losses), every)) | {len(losses) - 1}) if losses else []
    return [f"step {i + 1:4d}  loss {losses[i]:.4f}" for i in picks]


__all__ = ["SGD", "Adam", "TrainState", "backend_runner", "fit", "loss_lines", "train_step"]
