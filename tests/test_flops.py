"""The analytic FLOP formulas equal what torch's FlopCounterMode counts on the real modules."""

from dataclasses import replace

import pytest
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from course_utils import (
    GPT,
    MLP,
    Block,
    CausalSelfAttention,
    GPTConfig,
    build_model,
    randint,
    randn,
)
from course_utils.core.configs import frozen_decoder_config, mini_lm_config
from course_utils.core.flops import (
    GPT2_SMALL,
    attention_flops,
    flop_table,
    forward_breakdown,
    forward_flops,
    forward_flops_per_token,
    head_flops,
    layer_flops,
    linear_flops,
    main,
    matmul_flops,
    matmul_parameters,
    mlp_flops,
    training_flops,
)


def counted(fn) -> int:
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def test_matmul_and_linear():
    a, b = randn(3, 5, seed=0), randn(5, 7, seed=1)
    assert counted(lambda: a @ b) == matmul_flops(3, 7, 5) == 210
    lin = nn.Linear(6, 10)
    x = randn(2, 4, 6, seed=2)
    assert counted(lambda: lin(x)) == linear_flops(2, 4, 6, 10) == 2 * 2 * 4 * 6 * 10


@pytest.mark.parametrize("activation", ["gelu", "relu", "swiglu"])
def test_mlp_matches_the_counter(activation):
    config = GPTConfig(n_embd=16, activation=activation, d_ff=40)
    x = randn(2, 5, 16, seed=3)
    terms = mlp_flops(2, 5, 16, 40, gated=activation == "swiglu")
    assert counted(lambda: MLP(config)(x)) == sum(terms.values())


def test_mlp_is_16btc2_for_the_4x_width():
    assert sum(mlp_flops(2, 5, 8, 32).values()) == 16 * 2 * 5 * 8**2


def test_attention_matches_the_counter_on_the_explicit_path():
    config = GPTConfig(n_embd=24, n_head=3, block_size=16, attention="explicit")
    x = randn(2, 11, 24, seed=4)
    terms = attention_flops(2, 11, 24, 3)
    soft = terms.pop("softmax (estimate)")
    assert counted(lambda: CausalSelfAttention(config)(x)) == sum(terms.values())
    assert sum(terms.values()) == 8 * 2 * 11 * 24**2 + 4 * 2 * 11**2 * 24
    assert soft == 4 * 2 * 3 * 11**2


def test_block_and_whole_model_match_the_counter():
    config = mini_lm_config(3, attention="explicit")
    x = randn(2, 9, 32, seed=5)
    assert counted(lambda: Block(config)(x)) == layer_flops(config, 2, 9)
    model = build_model(GPT, config, seed=0, device="cpu")
    idx = randint(100, (2, 9), seed=6)
    assert counted(lambda: model(idx)) == forward_flops(config, 2, 9)


def test_training_step_is_exactly_three_forwards_in_matmul_flops():
    config = frozen_decoder_config(attention="explicit")
    model = build_model(GPT, config, seed=0, device="cpu")
    idx = randint(8, (3, 4), seed=7)
    assert counted(lambda: model(idx).square().mean().backward()) == training_flops(config, 3, 4)


def test_tying_changes_no_flops():
    tied = frozen_decoder_config(attention="explicit")
    untied = frozen_decoder_config(tie_weights=False, attention="explicit")
    idx = randint(8, (2, 4), seed=8)
    a = counted(lambda: build_model(GPT, tied, seed=0, device="cpu")(idx))
    b = counted(lambda: build_model(GPT, untied, seed=0, device="cpu")(idx))
    assert a == b == forward_flops(tied, 2, 4)


def test_per_token_formula_and_parameter_rule():
    c = GPT2_SMALL
    C, L, V, T = 768, 12, 50_257, 1024
    assert forward_flops_per_token(c) == L * (24 * C * C + 4 * T * C) + 2 * C * V == 284_812_800
    assert forward_flops_per_token(c) == 2 * matmul_parameters(c) + 4 * L * T * C
    assert head_flops(1, T, C, V) == 2 * T * C * V


def test_breakdown_sums_and_softmax_is_separate():
    c = mini_lm_config(2)
    parts = forward_breakdown(c, 2, 16)
    assert sum(v for k, v in parts.items() if k != "softmax (estimate)") == forward_flops(c, 2, 16)
    assert forward_flops(c, 2, 16, softmax=True) - forward_flops(c, 2, 16) == 2 * 4 * 2 * 4 * 16**2


def test_a_wrong_formula_would_be_caught():
    """The count equals the formula, and each of three plausible slips in the formula misses it
    (the counter counts matmuls only, so the softmax estimate is no slip to test with)."""
    config = mini_lm_config(1, attention="explicit")
    model = build_model(GPT, config, seed=0, device="cpu")
    idx = randint(100, (1, 8), seed=9)
    count = counted(lambda: model(idx))
    assert count == forward_flops(config, 1, 8)
    C, T, V = config.n_embd, 8, config.vocab_size
    without_scores = 2 * matmul_parameters(config) * T  # the "2N per token" rule alone
    head_twice = forward_flops(config, 1, 8) + head_flops(1, T, C, V)
    mlp_at_4x = forward_flops(replace(config, d_ff=4 * C + 1), 1, 8)  # d_ff off by one
    for wrong in (without_scores, head_twice, mlp_at_4x):
        assert wrong != count


def test_table_and_cli(capsys):
    text = flop_table(frozen_decoder_config(), 1, 4)
    assert "LM head" in text and "training step" in text
    assert main(["--config", "frozen-decoder"]) == 0
    out = capsys.readouterr().out
    assert f"{forward_flops(frozen_decoder_config(), 1, 4):,}" in out
    assert main(["--d-model", "64", "--n-layer", "2", "--n-head", "4", "--context", "32"]) == 0
    out = capsys.readouterr().out
    config = GPTConfig(vocab_size=50_257, block_size=32, n_layer=2, n_head=4, n_embd=64)
    assert f"{forward_flops(config):,}" in out
    assert main(["--d-model", "10", "--n-head", "3"]) == 2
    assert "n_head=3 does not divide n_embd=10" in capsys.readouterr().err
