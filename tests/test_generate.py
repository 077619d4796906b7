"""The KV-cache generator gives the no-cache generator's tokens, for the FLOPs the formula says."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from course_utils import GPT, build_model, mini_lm_config, randint
from course_utils.core.configs import frozen_decoder_config
from course_utils.core.flops import forward_flops, generation_flops
from course_utils.core.generate import (
    KVCache,
    forward_cached,
    generate,
    generate_cached,
    pick_next,
)


def model_for(attention="fused", **overrides):
    config = mini_lm_config(2, init="pytorch-default", attention=attention, **overrides)
    return build_model(GPT, config, seed=0, device="cpu")


@pytest.mark.parametrize("attention", ["fused", "explicit"])
def test_greedy_tokens_are_identical_with_and_without_cache(attention):
    model = model_for(attention)
    prompt = randint(100, (3, 5), seed=1)
    plain = generate(model, prompt, 30, greedy=True)
    cached = generate_cached(model, prompt, 30, greedy=True)
    assert plain.shape == (3, 35)
    assert torch.equal(plain, cached)
    assert torch.equal(plain[:, :5], prompt)


def test_sampled_tokens_are_identical_with_the_same_generator():
    model = model_for(prenorm=False, activation="gelu")
    prompt = randint(100, (2, 3), seed=2)
    a = generate(
        model, prompt, 25, temperature=0.8, top_k=20, generator=torch.Generator().manual_seed(5)
    )
    b = generate_cached(
        model, prompt, 25, temperature=0.8, top_k=20, generator=torch.Generator().manual_seed(5)
    )
    assert torch.equal(a, b)
    c = generate(model, prompt, 25, temperature=0.8, generator=torch.Generator().manual_seed(6))
    assert not torch.equal(a, c)  # a different seed samples differently


def test_cached_logits_equal_the_full_forward_at_every_position():
    model = model_for("explicit").eval()
    idx = randint(100, (2, 12), seed=3)
    with torch.no_grad():
        full = model(idx)
    cache = KVCache(model.config.n_layer)
    first = forward_cached(model, idx[:, :4], cache)
    assert torch.allclose(first, full[:, 3], atol=1e-5)
    for t in range(4, 12):
        step = forward_cached(model, idx[:, t : t + 1], cache)
        assert torch.allclose(step, full[:, t], atol=1e-5)
    assert len(cache) == 12


def test_a_cache_without_the_old_keys_would_differ():
    model = model_for("explicit").eval()
    idx = randint(100, (1, 8), seed=4)
    with torch.no_grad():
        full = model(idx)
    fresh = forward_cached(model, idx[:, 7:8], KVCache(2))  # no history: position 0, no past
    assert not torch.allclose(fresh, full[:, 7], atol=1e-3)


def test_the_cache_refuses_to_run_past_the_position_table():
    model = build_model(GPT, frozen_decoder_config(), seed=0, device="cpu")
    prompt = randint(8, (1, 2), seed=5)
    assert generate_cached(model, prompt, 3, greedy=True).shape == (1, 5)  # 2 + 3 - 1 = 4 fits
    with pytest.raises(ValueError, match="exceeds block_size"):
        generate_cached(model, prompt, 4, greedy=True)
    assert generate(model, prompt, 6, greedy=True).shape == (1, 8)  # no cache: the window slides


@pytest.mark.parametrize("kv_cache", [False, True])
def test_counted_generation_flops_equal_the_formula(kv_cache):
    model = model_for("explicit")
    prompt = randint(100, (2, 6), seed=6)
    run = generate_cached if kv_cache else generate
    with FlopCounterMode(display=False) as counter:
        run(model, prompt, 10, greedy=True)
    expected = generation_flops(model.config, 6, 10, B=2, kv_cache=kv_cache)
    assert counter.get_total_flops() == expected


def test_the_cache_saves_flops_and_the_no_cache_cost_is_a_sum_of_forwards():
    config = mini_lm_config(2)
    plain = generation_flops(config, 8, 40)
    cached = generation_flops(config, 8, 40, kv_cache=True)
    assert plain == sum(forward_flops(config, 1, 8 + s) for s in range(40))
    assert cached < plain / 10


def test_pick_next_greedy_and_validation():
    logits = torch.tensor([[0.1, 3.0, -1.0], [2.0, 0.0, 1.0]])
    assert pick_next(logits, greedy=True).tolist() == [[1], [0]]
    top1 = pick_next(logits, top_k=1, generator=torch.Generator().manual_seed(0))
    assert top1.tolist() == [[1], [0]]
    with pytest.raises(ValueError, match="temperature"):
        pick_next(logits, temperature=0.0)
