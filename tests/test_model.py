"""The reference GPT rebuilds the source documents' models exactly and behaves as claimed."""

import math

import pytest
import torch
from torch import nn

from course_utils import (
    GPT,
    Block,
    GPTConfig,
    build_model,
    count_parameters,
    frozen_decoder_config,
    lm_loss,
    mini_lm_config,
    randint,
    randn,
)


@pytest.mark.parametrize(
    ("n_layer", "expected"), [(1, 18_016), (2, 30_720), (4, 56_128), (8, 106_944)]
)
def test_mini_lm_parameter_counts_are_exact(n_layer, expected):
    assert count_parameters(GPT(mini_lm_config(n_layer))) == expected


def test_frozen_decoder_has_368_tied_and_400_untied_parameters():
    assert count_parameters(GPT(frozen_decoder_config())) == 368
    assert count_parameters(GPT(frozen_decoder_config(tie_weights=False))) == 400


def test_tied_head_shares_storage_with_the_token_embedding():
    model = GPT(mini_lm_config(1))
    assert model.head.weight is model.tok_emb.weight
    assert model.head.weight.data_ptr() == model.tok_emb.weight.data_ptr()
    untied = GPT(mini_lm_config(1, tie_weights=False))
    assert untied.head.weight.data_ptr() != untied.tok_emb.weight.data_ptr()


def test_stacked_blocks_are_distinct_objects_with_distinct_parameters():
    model = build_model(GPT, mini_lm_config(4), seed=0, device="cpu")
    blocks = list(model.blocks)
    assert len({id(b) for b in blocks}) == 4
    weights = [b.attn.qkv.weight for b in blocks]
    assert len({w.data_ptr() for w in weights}) == 4
    for a, b in zip(weights, weights[1:]):
        assert not torch.equal(a, b)


@pytest.mark.parametrize("attention", ["fused", "explicit"])
def test_changing_later_tokens_leaves_earlier_logits_unchanged(attention):
    model = build_model(GPT, mini_lm_config(2, attention=attention), seed=1, device="cpu")
    idx = randint(100, (2, 12), seed=2)
    t = 5
    changed = idx.clone()
    changed[:, t + 1 :] = (changed[:, t + 1 :] + 7) % 100
    with torch.no_grad():
        before, after = model(idx), model(changed)
    assert torch.allclose(before[:, : t + 1], after[:, : t + 1], atol=1e-6)
    assert not torch.allclose(before[:, t + 1 :], after[:, t + 1 :], atol=1e-3)


def test_fused_and_explicit_attention_agree():
    fused = build_model(GPT, mini_lm_config(2, init="gpt2"), seed=3, device="cpu")
    explicit = build_model(GPT, mini_lm_config(2, init="gpt2", attention="explicit"), 3, "cpu")
    idx = randint(100, (3, 20), seed=4)
    with torch.no_grad():
        assert torch.allclose(fused(idx), explicit(idx), atol=1e-5)


def test_attention_weights_are_causal_and_rows_sum_to_one():
    model = build_model(GPT, frozen_decoder_config(), seed=0, device="cpu")
    x = randn(2, 4, 4, seed=5)
    w = model.blocks[0].attn.attention_weights(x)
    assert w.shape == (2, 2, 4, 4)
    assert torch.allclose(w.sum(-1), torch.ones(2, 2, 4))
    assert torch.all(w.triu(diagonal=1) == 0)


def _attention_both_ways(attn, x, bf16: bool):
    """(weights, output, q.grad, k.grad) of ``attn`` as the model computes them (a 0 / -inf
    matrix added to the scores) and as the textbook does (masked_fill on the scores)."""

    def masked_fill_weights(q, k):
        T = q.size(-2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(attn.head_dim)
        allowed = torch.ones(T, T, dtype=torch.bool).tril()
        return scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1)

    results = []
    for weights in (attn._weights, masked_fill_weights):
        q, k, v = (t.detach().requires_grad_() for t in attn._heads(x))
        with torch.autocast("cpu", torch.bfloat16, enabled=bf16):
            w = weights(q, k)
            y = w @ v
        (y.float() * randn(*y.shape, seed=8)).sum().backward()
        results.append((w, y, q.grad, k.grad))
    return results


def test_the_additive_causal_mask_equals_masked_fill():
    # fp32: the same weights, output and gradients bit for bit. Under bf16 autocast the float
    # mask promotes the scores, so the softmax runs (and differentiates) in fp32 where
    # masked_fill's ran in bf16: the output, rounded to bf16 at the matmul, is still the same;
    # the gradients agree to bf16's precision.
    config = GPTConfig(vocab_size=50, block_size=16, n_layer=1, n_head=4, n_embd=48)
    attn = build_model(GPT, config, seed=3, device="cpu").blocks[0].attn
    x = randn(2, 11, 48, seed=7)
    for ours, textbook in zip(*_attention_both_ways(attn, x, bf16=False)):
        assert torch.equal(ours, textbook)
    ours, textbook = _attention_both_ways(attn, x, bf16=True)
    assert ours[0].dtype == torch.float32 and textbook[0].dtype == torch.bfloat16
    assert torch.equal(ours[0].bfloat16(), textbook[0]) and torch.equal(ours[1], textbook[1])
    for grad, reference in zip(ours[2:], textbook[2:]):
        assert torch.allclose(grad, reference, rtol=0.02, atol=5e-4)
    assert torch.all(ours[0].triu(diagonal=1) == 0)


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"norm": "rmsnorm"},
        {"activation": "swiglu"},
        {"activation": "relu", "prenorm": False},
        {"attn_bias": False, "mlp_bias": False, "norm_bias": False},
    ],
)
def test_each_block_preserves_batch_time_feature_shape(overrides):
    config = GPTConfig(vocab_size=50, block_size=16, n_layer=2, n_head=4, n_embd=32, **overrides)
    block = Block(config)
    x = randn(3, 16, 32, seed=6)
    assert block(x).shape == (3, 16, 32)


def test_mini_lm_loss_at_init_matches_ln_vocab_only_with_gpt2_init():
    idx = randint(100, (8, 32), seed=7)
    targets = randint(100, (8, 32), seed=8)
    good = build_model(GPT, mini_lm_config(4, init="gpt2"), seed=0, device="cpu")
    bad = build_model(GPT, mini_lm_config(4), seed=0, device="cpu")  # PyTorch default init
    with torch.no_grad():
        good_loss = lm_loss(good(idx), targets).item()
        bad_loss = lm_loss(bad(idx), targets).item()
    assert abs(good_loss - math.log(100)) < 0.1
    assert bad_loss > 2 * math.log(100)


def test_gpt2_init_scales_residual_projections_by_depth():
    model = build_model(GPT, GPTConfig(n_layer=8, n_embd=128, n_head=4), seed=0, device="cpu")
    expected = 0.02 / math.sqrt(16)
    proj = torch.cat([b.attn.proj.weight.flatten() for b in model.blocks])
    assert abs(proj.std().item() - expected) / expected < 0.05
    assert abs(model.tok_emb.weight.std().item() - 0.02) < 0.002
    assert all(torch.count_nonzero(b.mlp.up.bias) == 0 for b in model.blocks)


def test_options_change_the_modules_built():
    rms = GPT(GPTConfig(norm="rmsnorm"))
    assert isinstance(rms.ln_f, nn.RMSNorm)
    d, h = 32, 128
    swiglu = GPT(GPTConfig(n_layer=1, activation="swiglu", d_ff=h, mlp_bias=False))
    assert count_parameters(swiglu.blocks[0].mlp) == 3 * d * h
    assert GPT(GPTConfig(head_bias=True, tie_weights=False)).head.bias is not None


def test_dropout_only_acts_in_training_mode():
    model = build_model(GPT, GPTConfig(dropout=0.5), seed=0, device="cpu")
    idx = randint(100, (2, 8), seed=9)
    model.eval()
    with torch.no_grad():
        assert torch.equal(model(idx), model(idx))
        model.train()
        assert not torch.equal(model(idx), model(idx))


def test_n_head_that_does_not_divide_n_embd_is_a_value_error_naming_the_range():
    with pytest.raises(
        ValueError, match=r"n_head=5 does not divide n_embd=32.*\[1, 2, 4, 8, 16, 32\]"
    ):
        GPTConfig(n_embd=32, n_head=5)


def test_out_of_range_token_id_is_a_value_error_naming_the_range():
    model = GPT(mini_lm_config(1))
    idx = torch.tensor([[1, 2, 100]])
    with pytest.raises(ValueError, match=r"token id 100 .*vocab_size - 1\] = \[0, 99\]"):
        model(idx)
    with pytest.raises(ValueError, match=r"token id -1"):
        model(torch.tensor([[-1, 2]]))


def test_too_long_sequence_and_bad_options_are_value_errors():
    model = GPT(frozen_decoder_config())
    with pytest.raises(ValueError, match=r"T=5 .*\[1, 4\]"):
        model(torch.zeros(1, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="activation must be one of"):
        GPTConfig(activation="tanh")
    with pytest.raises(ValueError, match="n_layer must be an integer >= 1"):
        GPTConfig(n_layer=0)
