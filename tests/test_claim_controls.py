"""Controls for the training lessons' claims: each verdict a lesson asserts about a trained model
(SumGPT's exact match, per-carry accuracy and masked loss; BookGPT's losses, next-character
distribution, context comparison and temperature trend), imported from the module the lesson
itself calls (course_utils.lessons.verdicts, bookgpt.temperature_trend) and fed what the lesson
measures, must accept a model that has learned the thing claimed and reject one that has not, so
that a passing lesson means something."""

from __future__ import annotations

import math
import re
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_utils import GPT, build_model
from course_utils.engine.training import train
from course_utils.lessons import verdicts
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
    """Lesson 11's two accuracy verdicts: on its 1000 test sums (cell 34), and every carry group
    of its 10,000 (cell 36), computed by the functions the lesson calls."""
    overall = verdicts.exact_match_claim(sumgpt.correct_answers(model, *LESSON_11_TEST))
    big_a, big_b = LESSON_11_BIG
    ok, carries = sumgpt.correct_answers(model, big_a, big_b), sumgpt.count_carries(big_a, big_b)
    return overall, all(verdicts.carry_group_claims(ok, carries))


def test_sumgpt_accuracy_claims_pass_an_adder_and_fail_an_untrained_or_carry_blind_model():
    assert lesson_11_verdicts(Adder()) == (True, True)
    assert lesson_11_verdicts(untrained_sumgpt()) == (False, False)
    blind = Adder(carries=False)
    assert lesson_11_verdicts(blind) == (False, False)
    # what the per-carry check adds: the carry-free group alone looks perfect
    big_a, big_b = LESSON_11_BIG
    ok, carries = sumgpt.correct_answers(blind, big_a, big_b), sumgpt.count_carries(big_a, big_b)
    assert verdicts.carry_group_claims(ok, carries) == [True, False, False, False]


def engine_losses(model, steps: int = 100) -> list[float]:
    """The engine's training losses of ``steps`` updates on lesson 11's masked batches."""
    cfg = sumgpt.train_config(steps, precision="fp32", progress=False, compile=False, log_every=50)
    batches = sumgpt.SumBatches(sumgpt.DEFAULT_TRAIN["batch_size"], seed=0, mask=True)
    return train(model, batches, cfg, device="cpu").losses


def test_sumgpt_masked_loss_claim_on_the_engines_last_100_losses():
    """Lesson 11 asserts that the mean of the engine's last 100 training losses (masked: the
    answer tokens only) is below 0.05 nats. The adder's are near 0; an untrained model's 100
    first updates, and an adder that drops its carries, stay far above."""
    assert verdicts.masked_loss_claim(engine_losses(Adder()))
    assert not verdicts.masked_loss_claim(engine_losses(untrained_sumgpt()))
    assert not verdicts.masked_loss_claim(engine_losses(Adder(carries=False)))
    with pytest.raises(ValueError, match="at least 100 training losses"):
        verdicts.masked_loss_claim([0.0] * 99)


@pytest.fixture(scope="module")
def kjv(tmp_path_factory):
    """The default corpus prepared, as lesson 12 trains on it."""
    out = tmp_path_factory.mktemp("kjv") / "data"
    corpus.prepare(corpus.load_kjv(), out)
    return out


class Peeker(nn.Module):
    """A stand-in for a model at a chosen loss: at every position but the last it puts
    ``confidence`` logits on the next character of the window it reads (non-causal, as no
    real model is; it only sets how low the loss is), at the last a uniform guess."""

    def __init__(self, vocab_size: int, confidence: float) -> None:
        super().__init__()
        self.config = SimpleNamespace(block_size=64)
        self.vocab_size, self.confidence = vocab_size, confidence
        self.anchor = nn.Parameter(torch.zeros(()))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        nxt = F.one_hot(idx[:, 1:], self.vocab_size).float() * self.confidence
        last = torch.zeros(idx.size(0), 1, self.vocab_size)
        return torch.cat([nxt, last], dim=1) + self.anchor


def lesson_12_run_rows(kjv, models) -> list[dict]:
    """Evaluation rows at steps 250 and 2000, scored as `bookgpt train` scores them."""
    cfg = bookgpt.get_config("cpu")
    evaluate = bookgpt.loss_evaluation(
        corpus.load_split(kjv, "val"), corpus.load_split(kjv, "train"), cfg, "cpu", "fp32"
    )
    return [{"step": s, **evaluate(m, s)} for s, m in zip((250, 2000), models)]


def test_bookgpt_run_claims_pass_a_learning_run_and_fail_an_untrained_one(kjv):
    """Lesson 12 asserts, of its `cpu` run: val after 250 steps between 1.9 and a nat under
    ln 66, below 1.45 at the end, within 0.1 of train."""
    vocab = corpus.load_meta(kjv)["vocab_size"]
    learning = lesson_12_run_rows(kjv, [Peeker(vocab, 2.0), Peeker(vocab, 4.0)])
    assert 1.9 < learning[0]["val_loss"] < 3.0 and learning[1]["val_loss"] < 1.45
    assert all(verdicts.cpu_run_claims(learning, vocab).values())
    cfg = bookgpt.get_config("cpu")
    untrained = build_model(GPT, cfg.gpt_config(vocab), seed=0, device="cpu")
    rows = lesson_12_run_rows(kjv, [untrained, untrained])
    assert not any(list(verdicts.cpu_run_claims(rows, vocab).values())[:2])
    stalled = lesson_12_run_rows(kjv, [Peeker(vocab, 2.0), Peeker(vocab, 2.0)])
    assert not verdicts.cpu_run_claims(stalled, vocab)["final val loss below 1.45 nats/char"]


def test_bookgpt_next_character_claims(kjv):
    """Lesson 12 asserts that after "And he said unto " no character takes half the probability
    and the likeliest three hold over half. The corpus's own next characters after that prompt
    pass; an untrained model (nearly uniform) and one sure of one character fail."""
    tokenizer = corpus.load_tokenizer(kjv)
    text = tokenizer.decode(corpus.load_split(kjv, "train"))
    prompt = "And he said unto "
    follow = [text[m.end()] for m in re.finditer(re.escape(prompt), text)]
    counts = torch.tensor([follow.count(ch) for ch in tokenizer.itos], dtype=torch.float)
    assert all(verdicts.next_character_claims((counts / counts.sum()).tolist()).values())
    cfg = bookgpt.get_config("cpu")
    untrained = build_model(GPT, cfg.gpt_config(len(tokenizer.itos)), seed=0, device="cpu")
    with torch.no_grad():
        logits = untrained.eval()(torch.tensor([tokenizer.encode(prompt)]))[0, -1]
    claims = verdicts.next_character_claims(torch.softmax(logits, -1).tolist())
    assert claims == {
        "no character takes half the probability": True,
        "the likeliest three hold over half of it": False,
    }
    sure = F.one_hot(torch.tensor(tokenizer.stoi["t"]), len(tokenizer.itos)).float().tolist()
    assert not verdicts.next_character_claims(sure)["no character takes half the probability"]


def test_bookgpt_context_claims(kjv):
    """Lesson 12 asserts that both context runs learned and context 64 is not better by 0.05
    nats or more. Two models at its measured losses pass; untrained ones (ln 66) fail the first,
    and a context-64 model half a nat better fails the second."""
    vocab = corpus.load_meta(kjv)["vocab_size"]
    assert all(verdicts.context_claims(2.38, 2.44, vocab).values())
    untrained = verdicts.context_claims(math.log(vocab), math.log(vocab), vocab)
    assert list(untrained.values()) == [False, True]
    better = verdicts.context_claims(2.4, 1.9, vocab)
    assert list(better.values()) == [True, False]


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


class CharTrigram(nn.Module):
    """A counted character model (the next character given the two before it, from the
    training text): it writes word-like text at low temperature, noise at high."""

    def __init__(self, ids: torch.Tensor, vocab_size: int) -> None:
        super().__init__()
        self.config = SimpleNamespace(block_size=64)
        self.vocab_size = vocab_size
        key = (ids[:-2] * vocab_size + ids[1:-1]) * vocab_size + ids[2:]
        counts = torch.bincount(key, minlength=vocab_size**3).view(-1, vocab_size).float() + 0.01
        self.table = nn.Parameter(counts.log() - counts.sum(1, keepdim=True).log())

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        before = torch.cat([idx[:, :1], idx[:, :-1]], dim=1)
        return self.table[before * self.vocab_size + idx]


def test_temperature_claim_passes_a_counted_model_and_fails_noise_and_a_stuck_one(kjv):
    """Lesson 12 asserts that, over 6 seeds, samples repeat less and hold fewer real words as the
    temperature rises from 0.5 to 1.5 (bookgpt.temperature_trend, which the lesson calls). A
    counted trigram model shows it; an untrained model writes noise at every temperature and a
    model stuck on one character writes the same string at all of them: both fail."""
    tokenizer = corpus.load_tokenizer(kjv)
    train_ids = corpus.load_split(kjv, "train")
    words = set(re.findall(r"[A-Za-z]+", tokenizer.decode(train_ids[:200_000])))
    cfg = bookgpt.get_config("cpu")
    counted = CharTrigram(
        torch.from_numpy(train_ids[:1_000_000].astype("int64")), len(tokenizer.itos)
    )
    untrained = build_model(GPT, cfg.gpt_config(len(tokenizer.itos)), seed=0, device="cpu")
    stuck = OneCharacter(len(tokenizer.itos), tokenizer.stoi["e"])
    for model, expected in ((counted, (True, True)), (untrained, None), (stuck, None)):
        stats = [
            bookgpt.sample_statistics(model, tokenizer.itos, words, t, seeds=range(6), n=300)
            for t in (0.5, 1.0, 1.5)
        ]
        trend = bookgpt.temperature_trend(*stats)
        assert trend == expected if expected else trend != (True, True), stats
