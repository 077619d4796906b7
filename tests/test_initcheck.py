"""The loss-at-init helpers: ln(V), the report, the embedding re-init and the tiny training loop."""

import math

import pytest
import torch

from course_utils import GPT, build_model, mini_lm_config, randint
from course_utils.lessons.initcheck import (
    InitReport,
    loss_at_init,
    reinit_token_embedding_,
    train_steps,
    uniform_loss,
    walk_batches,
)


class ZeroLogits(torch.nn.Module):
    """A 'model' whose logits are all zero: the uniform prediction over V classes."""

    def __init__(self, vocab_size: int) -> None:
        super().__init__()
        self.vocab_size = vocab_size

    def forward(self, idx):
        return torch.zeros(*idx.shape, self.vocab_size)


def test_uniform_loss_is_ln_v():
    assert uniform_loss(100) == pytest.approx(4.605170185988091)
    assert uniform_loss(1) == 0.0
    with pytest.raises(ValueError, match="vocab_size"):
        uniform_loss(0)


@pytest.mark.parametrize("vocab_size", [2, 100, 50_257])
def test_zero_logits_give_exactly_ln_v(vocab_size):
    idx = randint(vocab_size, (3, 5), seed=0)
    report = loss_at_init(ZeroLogits(vocab_size), idx, randint(vocab_size, (3, 5), seed=1))
    assert report.loss == pytest.approx(math.log(vocab_size), abs=1e-5)
    assert report.logit_std == 0.0
    assert report.ok(tol=1e-4)


def test_report_gap_and_tolerance():
    report = InitReport(logit_std=6.0, loss=20.0, uniform=math.log(100))
    assert report.gap == pytest.approx(20.0 - math.log(100))
    assert not report.ok()
    assert InitReport(0.1, math.log(100) + 0.04, math.log(100)).ok(tol=0.05)


def test_default_embedding_init_fails_the_check_and_std_002_passes():
    model = build_model(GPT, mini_lm_config(4), seed=0, device="cpu")
    idx, targets = randint(100, (8, 32), seed=1), randint(100, (8, 32), seed=2)
    broken = loss_at_init(model, idx, targets)
    assert broken.logit_std > 4 and broken.loss > 3 * math.log(100)
    reinit_token_embedding_(model, 0.02, seed=0)
    fixed = loss_at_init(model, idx, targets)
    assert 0.08 < fixed.logit_std < 0.15 and fixed.ok(tol=0.05)


def test_loss_at_init_restores_the_training_mode():
    model = build_model(GPT, mini_lm_config(1), seed=0, device="cpu")
    model.train()
    loss_at_init(model, randint(100, (1, 4), seed=0), randint(100, (1, 4), seed=1))
    assert model.training
    model.eval()
    loss_at_init(model, randint(100, (1, 4), seed=0), randint(100, (1, 4), seed=1))
    assert not model.training


def test_reinit_is_seeded_in_place_and_moves_the_tied_head():
    a = build_model(GPT, mini_lm_config(1), seed=0, device="cpu")
    b = build_model(GPT, mini_lm_config(1), seed=5, device="cpu")
    weight = a.tok_emb.weight
    reinit_token_embedding_(a, 0.02, seed=3)
    reinit_token_embedding_(b, 0.02, seed=3)
    assert a.tok_emb.weight is weight  # the same tensor, filled in place
    assert torch.equal(a.tok_emb.weight, b.tok_emb.weight)
    assert torch.equal(a.head.weight, a.tok_emb.weight)
    assert 0.018 < float(weight.detach().std()) < 0.022
    with pytest.raises(ValueError, match="std"):
        reinit_token_embedding_(a, -1.0, seed=0)


def test_walk_batches_step_forward_by_one_to_max_jump():
    batches = walk_batches(50, n_batches=3, batch_size=4, seq_len=9, seed=0, max_jump=4)
    assert len(batches) == 3
    for x, y in batches:
        assert x.shape == y.shape == (4, 9)
        assert torch.equal(x[:, 1:], y[:, :-1])
        jumps = (y - x) % 50
        assert int(jumps.min()) >= 1 and int(jumps.max()) <= 4
    again = walk_batches(50, n_batches=3, batch_size=4, seq_len=9, seed=0, max_jump=4)
    assert all(torch.equal(a, b) for (a, _), (b, _) in zip(batches, again))
    other = walk_batches(50, n_batches=1, batch_size=4, seq_len=9, seed=1)
    assert not torch.equal(other[0][0], batches[0][0])
    with pytest.raises(ValueError, match="max_jump"):
        walk_batches(5, 1, 1, 3, seed=0, max_jump=5)


def test_train_steps_lowers_the_loss_and_is_deterministic():
    batches = walk_batches(100, n_batches=40, batch_size=8, seq_len=16, seed=0)

    def run():
        model = build_model(GPT, mini_lm_config(1, init="gpt2"), seed=0, device="cpu")
        return train_steps(model, batches, lr=1e-2, seed=0)

    first, second = run(), run()
    assert len(first) == 40
    assert first == second
    assert first[0] == pytest.approx(math.log(100), abs=0.1)
    assert first[-1] < first[0] - 1.0
    with pytest.raises(ValueError, match="empty"):
        train_steps(build_model(GPT, mini_lm_config(1), seed=0, device="cpu"), [])
