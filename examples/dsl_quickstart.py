"""Build a small MLP with the DSL, print its RLX text form, and run it on the oracle."""
import numpy as np

import rlx_ref


def build_graph():
    """The MLP graph and its params (``rlx-ref explain``/``diff`` read it from here too)."""
    with rlx_ref.graph("mlp") as g:
        x = g.input("x", [4, 8])
        w1 = g.param("w1", [8, 16])
        b1 = g.param("b1", [16])
        w2 = g.param("w2", [16, 3])
        h = (x @ w1 + b1).gelu()          # operators append nodes; shapes are inferred
        logits = h @ w2
        probs = logits.softmax(-1)
        g.output(probs, logits.max([1]) > 0.0)
    rng = np.random.default_rng(0)
    params = {"w1": rng.standard_normal((8, 16)).astype(np.float32) * 0.3,
              "b1": np.zeros(16, np.float32),
              "w2": rng.standard_normal((16, 3)).astype(np.float32) * 0.3}
    return g.graph, params


def build_graphs() -> dict:
    """Every graph this example builds: name -> (graph, params)."""
    return {"mlp": build_graph()}


graph, params = build_graph()      # building is cheap; running waits for main()


def main():
    """Print the graph, run it on the oracle and compare with numpy."""
    text = graph.to_text()
    print(text)
    assert rlx_ref.parse(text) == graph     # the text form round-trips exactly

    rng = np.random.default_rng(1)
    xv = rng.standard_normal((4, 8)).astype(np.float32)

    compiled = rlx_ref.Session(device="reference").compile(graph)
    for name, value in params.items():
        compiled.set_param(name, value)
    probs_out, positive = compiled.run({"x": xv})

    # The same model written directly in numpy, to compare against.
    from scipy.special import erf  # noqa: E402

    pre = xv @ params["w1"] + params["b1"]
    hid = 0.5 * pre * (1 + erf(pre / np.sqrt(2)))
    lg = hid @ params["w2"]
    ref = np.exp(lg - lg.max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    print("probabilities:\n", probs_out)
    print("any positive logit per row:", positive)
    print("max abs difference vs numpy:", float(np.abs(probs_out - ref).max()))


if __name__ == "__main__":
    main()
