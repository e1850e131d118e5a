"""Train a two-layer transformer language model on a generated counting corpus, with SGD
with momentum (or Adam) written as graph ops.

Each sequence counts up by a fixed stride modulo the vocabulary, so the next token is
predictable from the context: the loss falls from ln(vocab) toward 0. Usage:
``python examples/train_transformer.py [--device numba-cpu] [--steps 150] [--adam]``.
"""
import argparse

from rlx_ref.training import SGD, Adam, fit, loss_lines
from rlx_ref.training.models import counting_corpus, transformer_lm


def build_graphs(batch: int = 2, seq: int = 8, vocab: int = 16) -> dict:
    """The graphs this example builds, name -> (graph, params): the language model's loss
    and one SGD-with-momentum training step (its state starts at zeros)."""
    from rlx_ref.training import train_step

    graph, params = transformer_lm(batch=batch, seq=seq, vocab=vocab)
    return {"transformer_lm": (graph, params),
            "train_step": (train_step(graph, list(params), SGD(lr=0.1, momentum=0.9)), None)}


def main(argv=None) -> list:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="numba-cpu")
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--adam", action="store_true", help="Adam instead of SGD with momentum")
    args = p.parse_args(argv)
    batch, seq, vocab = 8, 16, 16
    graph, params = transformer_lm(batch=batch, seq=seq, vocab=vocab)
    batches = []
    for i in range(args.steps):
        tokens, targets = counting_corpus(batch, seq, vocab, seed=i)
        batches.append({"tokens": tokens, "targets": targets})
    opt = Adam(lr=3e-3) if args.adam else SGD(lr=0.1, momentum=0.9)
    losses = fit(graph, params, batches, opt, device=args.device)
    print("\n".join(loss_lines(losses)))
    return losses


if __name__ == "__main__":
    main()
