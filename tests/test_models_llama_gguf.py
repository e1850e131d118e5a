"""The llama decoder through GGUF on the oracle: 32 greedy tokens, and Q8_0's logits bound.

The bound is measured, not derived: on the f32 model's own 32-token sequence (teacher
forcing) the Q8_0 model's logits differ by at most 3% of the largest f32 logit (2.0% and
1.8% rms/max measured for seed 0) and pick the same argmax at every step; Q4_0 and Q4_K
drift by ~30% on this random model, which is why only Q8_0 carries a bound.
"""
import numpy as np
import pytest

from rlx_ref.models import llama as L
from rlx_ref.models import llama_gguf as E

CFG, PROMPT, STEPS = L.LlamaConfig(), [1, 2, 3, 4, 5, 6, 7, 8], 32
SEQ = len(PROMPT) + STEPS - 1


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return E.write_model_files(str(tmp_path_factory.mktemp("llama")), CFG,
                               ("Q8_0", "Q4_0", "Q4_K"), seed=0)


@pytest.fixture(scope="module")
def f32_run(files):
    run = E.load_runner("reference", CFG, SEQ, files["F32"])
    toks, _ = L.greedy_decode(run, CFG, PROMPT, STEPS, SEQ)
    return run, toks


def test_q8_0_logits_stay_within_the_documented_bound(files, f32_run):
    run, toks = f32_run
    forced = PROMPT + toks[:-1]
    want = E.logits_on(run, CFG, forced, SEQ)[len(PROMPT) - 1:]
    q8 = E.logits_on(E.load_runner("reference", CFG, SEQ, files["Q8_0"]), CFG, forced, SEQ)
    got = q8[len(PROMPT) - 1:]
    mx, rms = E.relative_error(got, want)
    assert mx <= 0.03 and rms <= 0.03, (mx, rms)
    assert (got.argmax(1) == want.argmax(1)).all()


def test_q8_0_decodes_the_f32_models_32_tokens(files, f32_run):
    _, f32_toks = f32_run
    toks, logits = L.greedy_decode(E.load_runner("reference", CFG, SEQ, files["Q8_0"]), CFG,
                                   PROMPT, STEPS, SEQ)
    assert toks == f32_toks and logits.shape == (STEPS, CFG.vocab)


@pytest.mark.parametrize("scheme", ["Q4_0", "Q4_K"])
def test_4_bit_files_keep_their_linears_packed(files, scheme):
    from rlx_ref.quant import load_gguf

    with load_gguf(files[scheme]) as reader:
        storage, nbytes, weights, packed = L.from_gguf(reader, CFG)
    assert set(storage) == set(CFG.linear_shapes()) and set(storage.values()) == {scheme}
    rows, cols = CFG.linear_shapes()["blk.0.ffn_down.weight"]
    assert nbytes["blk.0.ffn_down.weight"] == rows * cols * 144 // 256
    g = L.build_graph(CFG, SEQ, storage, nbytes)
    kinds = [n.op.kind for n in g]
    assert kinds.count("DequantMatMul") == len(CFG.linear_shapes()) and "MatMul" not in kinds
    for name in CFG.norm_names():
        np.testing.assert_array_equal(weights[name], L.random_weights(CFG, 0)[name])
