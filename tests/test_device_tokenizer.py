"""Device choice, seeding and the character tokenizer."""

import pytest
import torch

from course_utils import (
    GPT,
    CharTokenizer,
    build_model,
    mini_lm_config,
    pick_device,
    randn,
    seed_everything,
)


def test_course_device_env_overrides_the_choice(monkeypatch):
    """With CUDA (pretended) available, the default would be cuda: the variable must win."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
    assert pick_device() == torch.device("cuda")
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    assert pick_device() == torch.device("cpu")
    assert pick_device("cpu").type == "cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_asking_for_missing_cuda_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "cuda")
    with pytest.raises(ValueError, match="COURSE_DEVICE"):
        pick_device()


def test_seeded_models_and_data_are_reproducible():
    a = build_model(GPT, mini_lm_config(1), seed=11, device="cpu")
    torch.randn(100)  # consuming global randomness in between changes nothing
    b = build_model(GPT, mini_lm_config(1), seed=11, device="cpu")
    c = build_model(GPT, mini_lm_config(1), seed=12, device="cpu")
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a.tok_emb.weight, c.tok_emb.weight)
    assert torch.equal(randn(3, 4, seed=1), randn(3, 4, seed=1))


def test_seed_everything_seeds_torch_and_returns_a_generator():
    g = seed_everything(5)
    first = torch.rand(3)
    seed_everything(5)
    assert torch.equal(first, torch.rand(3))
    assert torch.equal(
        torch.rand(2, generator=g), torch.rand(2, generator=torch.Generator().manual_seed(5))
    )


def test_tokenizer_round_trips_and_names_unknown_characters():
    tok = CharTokenizer("hello world")
    assert tok.itos == sorted(set("hello world"))
    assert tok.decode(tok.encode("low hell")) == "low hell"
    with pytest.raises(ValueError, match=r"\['!', 'z'\]"):
        tok.encode("zoo!")
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 7\]"):
        tok.decode([0, 8])
