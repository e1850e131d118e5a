"""Train a small MLP classifier on three generated spirals, with Adam written as graph ops.

One training step is one graph (forward, backward and the optimizer update); the same
graph runs on every backend. Usage: ``python examples/train_mlp.py [--device numba-cpu]
[--steps 200]``.
"""
import argparse

from rlx_ref.training import Adam, fit, loss_lines
from rlx_ref.training.models import mlp_classifier, spirals


def build_graphs(batch: int = 8) -> dict:
    """The graphs this example builds, name -> (graph, params): the model's loss and one
    Adam training step (which also reads the optimizer state, zeros at the start)."""
    from rlx_ref.training import train_step

    graph, params = mlp_classifier(batch=batch)
    return {"mlp_classifier": (graph, params),
            "train_step": (train_step(graph, list(params), Adam(lr=0.02)), None)}


def main(argv=None) -> list:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="numba-cpu")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=64)
    args = p.parse_args(argv)
    graph, params = mlp_classifier(batch=args.batch)
    batches = []
    for i in range(args.steps):
        x, y = spirals(args.batch, seed=i)
        batches.append({"x": x, "labels": y})
    losses = fit(graph, params, batches, Adam(lr=0.02), device=args.device)
    print("\n".join(loss_lines(losses)))
    return losses


if __name__ == "__main__":
    main()
