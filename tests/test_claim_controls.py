"""Negative controls for the training lessons' claims: each judgement a lesson asserts about a
trained model (SumGPT's exact match and per-carry accuracy, its masked loss; BookGPT's validation
loss and its temperature trend) must reject a model that has not learned the thing claimed, and
accept one that has, so that a passing lesson means something."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_utils import GPT, build_model
from course_utils.projects import bookgpt, corpus, sumgpt

LESSON_11_TEST = sumgpt.heldout_pairs(1000, seed=0)  # the lesson's 1000 test sums
LESSON_11_BIG = sumgpt.heldout_pairs(10_000, seed=1)  # and its 10,000 for the carry groups


class Adder(nn.Module):
    """A stand-in for a trained SumGPT: at each answer position it reads the operands (which come
    before every answer position, so it is causal where the judgements look) and puts all the
    probability on the right next token. ``carries=False`` adds digit by digit and drops every
    carry, a model that has learned the format and the digits but not the carry."""

    def __init__(self, carries: bool = True) -> None:
        super().__init__()
        self.anchor = nn.Parameter(torch.zeros(()))  # a device to run on, as for a real model
        self.config = sumgpt.sumgpt_config()
        self.carries = carries

    def forward(self, idx: torch.Tensor) -> torch.Tensor:  # (B, 12) -> (B, 12, 13)
        d = idx[:, :7] - sumgpt.DIGIT0  # a2 a1 a0 + b2 b1 b0
        a, b = d[:, 0] * 100 + d[:, 1] * 10 + d[:, 2], d[:, 4] * 100 + d[:, 5] * 10 + d[:, 6]
        full = sumgpt.encode_pairs(a, b)  # (B, 13), the right answer units first
        if not self.carries:
            columns = [(d[:, 2] + d[:, 6]) % 10, (d[:, 1] + d[:, 5]) % 10, (d[:, 0] + d[:, 4]) % 10]
            full[:, sumgpt.PROMPT_LEN : sumgpt.PROMPT_LEN + 4] = sumgpt.DIGIT0
            for k, digit in enumerate(columns):
                full[:, sumgpt.PROMPT_LEN + k] = digit + sumgpt.DIGIT0
        return 50.0 * F.one_hot(full[:, 1:], len(sumgpt.VOCAB)).float() + self.anchor


def untrained_sumgpt() -> GPT:
    return build_model(GPT, sumgpt.sumgpt_config(), seed=0, device="cpu")


def lesson_11_verdicts(model) -> tuple[bool, bool]:
    """Lesson 11's two accuracy claims: >= 99% on its 1000 test sums, and every carry group of
    the 10,000 at >= 98%."""
    overall = sumgpt.exact_match(model, *LESSON_11_TEST) >= 0.99
    big_a, big_b = LESSON_11_BIG
    ok, carries = sumgpt.correct_answers(model, big_a, big_b), sumgpt.count_carries(big_a, big_b)
    groups = all(float(ok[carries == c].float().mean()) >= 0.98 for c in range(4))
    return overall, groups


def test_sumgpt_accuracy_claims_pass_an_adder_and_fail_an_untrained_or_carry_blind_model():
    assert lesson_11_verdicts(Adder()) == (True, True)
    assert lesson_11_verdicts(untrained_sumgpt()) == (False, False)
    blind = Adder(carries=False)
    assert lesson_11_verdicts(blind) == (False, False)
    # what the per-carry check adds: the carry-free group alone looks perfect
    big_a, big_b = LESSON_11_BIG
    ok, carries = sumgpt.correct_answers(blind, big_a, big_b), sumgpt.count_carries(big_a, big_b)
    assert bool(ok[carries == 0].all()) and not bool(ok[carries > 0].any())


def masked_loss(model) -> float:
    x, y = sumgpt.make_batch(*LESSON_11_TEST, mask=True)
    with torch.no_grad():
        logits = model(x)
    return float(F.cross_entropy(logits.flatten(0, 1), y.flatten()))  # -100 targets ignored


def test_sumgpt_masked_loss_claim_fails_an_untrained_model():
    """Lesson 11 claims the masked loss of its trained model ends below 0.05 nats."""
    assert masked_loss(Adder()) < 0.05
    assert masked_loss(untrained_sumgpt()) > 0.05
    assert masked_loss(Adder(carries=False)) > 0.05


@pytest.fixture(scope="module")
def kjv(tmp_path_factory):
    """The default corpus prepared, as lesson 12 trains on it."""
    out = tmp_path_factory.mktemp("kjv") / "data"
    corpus.prepare(corpus.load_kjv(), out)
    return out


def test_bookgpt_val_loss_claim_fails_an_untrained_model(kjv):
    """Lesson 12 claims its trained model's validation loss is below 1.45 nats per character."""
    cfg = bookgpt.get_config("cpu")
    val = bookgpt.eval_windows(corpus.load_split(kjv, "val"), cfg)
    model = build_model(
        GPT, cfg.gpt_config(corpus.load_meta(kjv)["vocab_size"]), seed=0, device="cpu"
    )
    assert bookgpt.mean_loss(model, val, "cpu", "fp32") > 1.45


class OneCharacter(nn.Module):
    """A broken language model that puts almost all its probability on one character."""

    def __init__(self, vocab_size: int, token: int) -> None:
        super().__init__()
        self.config = SimpleNamespace(block_size=64)
        self.logits = nn.Parameter(torch.full((vocab_size,), -20.0))
        with torch.no_grad():
            self.logits[token] = 20.0

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.logits.expand(*idx.shape, -1)


def test_temperature_claim_fails_noise_and_a_model_stuck_on_one_character(kjv):
    """Lesson 12 claims that, over 6 seeds, samples repeat less and hold fewer real words as the
    temperature rises from 0.5 to 1.5. An untrained model writes noise at every temperature and
    a model stuck on one character writes the same string at all of them: both must fail."""
    tokenizer = corpus.load_tokenizer(kjv)
    words = set(
        re.findall(r"[A-Za-z]+", tokenizer.decode(corpus.load_split(kjv, "train")[:200_000]))
    )
    cfg = bookgpt.get_config("cpu")
    untrained = build_model(GPT, cfg.gpt_config(len(tokenizer.itos)), seed=0, device="cpu")
    stuck = OneCharacter(len(tokenizer.itos), tokenizer.stoi["e"])
    for model in (untrained, stuck):
        stats = [
            bookgpt.sample_statistics(model, tokenizer.itos, words, t, seeds=range(6), n=300)
            for t in (0.5, 1.0, 1.5)
        ]
        assert bookgpt.temperature_trend(*stats) != (True, True), stats
