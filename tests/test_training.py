"""Training end to end: the optimizers' update rules, the loss falling on every local
backend, and each backend's first 20 steps judged against the oracle's by the conformance
contracts (each step fed the oracle's own parameters and state)."""
import numpy as np
import pytest

from rlx_ref.backends.base import BackendUnavailable
from rlx_ref.backends.registry import get_backend
from rlx_ref.conformance.ledger import load_ledger
from rlx_ref.conformance.multi import make_case
from rlx_ref.conformance.runner import failing, run_backend
from rlx_ref.interpret import interpret
from rlx_ref.ir.graph import Graph
from rlx_ref.training import SGD, Adam, TrainState, backend_runner, fit, train_step
from rlx_ref.training.models import counting_corpus, mlp_classifier, spirals, transformer_lm


def _usable(name):
    try:
        return get_backend(name).availability()[0]
    except BackendUnavailable:
        return False


BACKENDS = [b for b in ("reference", "numba-cpu", "opencl") if _usable(b)]


def _quadratic():
    g = Graph("q")
    x = g.input("x", [3])
    w = g.param("w", [3])
    d = g.sub(w, x)
    g.set_outputs([g.sum(g.mul(d, d), [0])])
    return g


def test_sgd_momentum_and_adam_follow_their_formulas():
    x = np.array([1.0, -2.0, 0.5], np.float32)
    w0 = np.zeros(3, np.float32)
    for opt in (SGD(lr=0.1, momentum=0.9), SGD(lr=0.1), Adam(lr=0.1)):
        st = TrainState(train_step(_quadratic(), ["w"], opt), {"w": w0}, opt,
                        backend_runner("reference"))
        w, m, v = w0.astype(np.float64), np.zeros(3), np.zeros(3)
        for t in range(1, 4):
            st.step({"x": x})
            grad = 2 * (w - x)
            if isinstance(opt, Adam):
                m = 0.9 * m + 0.1 * grad
                v = 0.999 * v + 0.001 * grad**2
                w = w - 0.1 * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
            else:
                m = opt.momentum * m + grad if opt.momentum else grad
                w = w - 0.1 * m
            np.testing.assert_allclose(st.params["w"], w, rtol=1e-5, atol=1e-6)


def test_train_step_layout_and_errors():
    g = train_step(_quadratic(), ["w"], Adam())
    names = {n.attrs.name for n in g.input_nodes()}
    assert names == {"x", "step", "m_w", "v_w"}
    assert len(g.outputs) == 4          # loss, w', m', v'
    with pytest.raises(ValueError, match="not Params"):
        train_step(_quadratic(), ["x"], Adam())


def _mlp_batches(n):
    out = []
    for i in range(n):
        x, y = spirals(32, seed=i)
        out.append({"x": x, "labels": y})
    return out


def _lm_batches(n):
    out = []
    for i in range(n):
        tokens, targets = counting_corpus(4, 8, 12, seed=i)
        out.append({"tokens": tokens, "targets": targets})
    return out


MODELS = {
    "mlp": (lambda: mlp_classifier(batch=32, hidden=16), _mlp_batches, Adam(lr=0.02), 60),
    "transformer": (lambda: transformer_lm(batch=4, seq=8, vocab=12, d_model=16, heads=2,
                                           layers=2), _lm_batches, Adam(lr=1e-2), 40),
}


@pytest.mark.parametrize("device", BACKENDS)
@pytest.mark.parametrize("model", sorted(MODELS))
def test_loss_falls(model, device):
    build, batches, opt, steps = MODELS[model]
    graph, params = build()
    losses = fit(graph, params, batches(steps), opt, device=device)
    assert np.isfinite(losses).all()
    assert np.mean(losses[-5:]) < 0.6 * np.mean(losses[:5]), losses


@pytest.mark.parametrize("device", [b for b in BACKENDS if b != "reference"])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_first_20_steps_match_the_oracle_within_the_contracts(model, device):
    """Each of the first 20 steps is one conformance case: the step graph fed the oracle's
    parameters and optimizer state at that step, judged by the composite contract."""
    build, batches, opt, _ = MODELS[model]
    graph, params = build()
    step_graph = train_step(graph, list(params), opt)
    oracle = TrainState(step_graph, params, opt,
                        lambda g, i, p: interpret(g, i, p))
    cases = []
    for t, batch in enumerate(batches(20), start=1):
        feeds = {**batch, **oracle.state, "step": np.float32(t)}
        cases.append(make_case(f"multi:train-{model}", "f32", step_graph, feeds,
                               ("training",), dict(oracle.params), source=f"step {t}"))
        oracle.step(batch)
    res = run_backend(get_backend(device), cases, load_ledger(None), progress=False,
                      in_process=True)
    assert not failing(res), [(r["source"] if "source" in r else r["case_id"],
                               r["status"], r["message"][:200]) for r in failing(res)]
