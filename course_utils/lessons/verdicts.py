"""The verdicts lessons 11 and 12 assert on trained models (SumGPT, BookGPT), in one place.

The lessons print and assert them, and the tests re-derive them from the same inputs (the
recorded GPU runs, a trained or a broken model's losses and answers), so a changed recording or a
model that learned nothing changes the verdict instead of passing unnoticed.
"""

from __future__ import annotations

import math

import torch

# A loss below this many nats under the uniform guess ln(V) means the model has learned
# something; an untrained model sits at ln(V).
LEARNED_MARGIN = 1.0


def at(run: dict, step: int, key: str = "val_loss") -> float:
    """The ``key`` of a recorded run's evaluation at ``step``; a clear error if there is none."""
    for row in run["evals"]:
        if row["step"] == step:
            return row[key]
    steps = [row["step"] for row in run["evals"]]
    raise KeyError(f"run {run.get('config')!r} has no evaluation at step {step}: it has {steps}")


def reference_claims(recorded: dict, step: int = 4750, early: int = 2000) -> dict[str, bool]:
    """Lesson 12's claims about the three recorded GPU runs (baseline, larger, ctx512), all
    trained on the same corpus, read at ``step`` and at the ``early`` step."""
    runs = {run["config"]: run for run in recorded["runs"]}
    base, larger, ctx = runs["baseline"], runs["larger"], runs["ctx512"]
    gain = at(base, step) - at(larger, step)  # what width and depth bought
    gap = at(larger, step) - at(larger, step, "train_loss")  # val above train
    gap_early = at(larger, early) - at(larger, early, "train_loss")
    return {
        f"larger beats baseline by over 0.05 at {step}": gain > 0.05,
        "larger: val above train by over 0.1 (memorizing)": gap > 0.1,
        f"larger: the gap widens from step {early} to {step} by over 0.05": gap > gap_early + 0.05,
        f"ctx512 behind larger at step {early}": at(ctx, early) > at(larger, early),
        f"ctx512 level with larger at {step} (within 0.01)": abs(at(ctx, step) - at(larger, step))
        < 0.01,
    }


def cpu_run_claims(evals: list[dict], vocab_size: int) -> dict[str, bool]:
    """Lesson 12's claims about its `cpu` run: under way but not done after 250 steps (between
    1.9 nats and a nat under the uniform guess), below 1.45 at the end, val within 0.1 of train."""
    first, last = evals[0], evals[-1]
    learned = math.log(vocab_size) - LEARNED_MARGIN
    return {
        f"val after {first['step']} steps between 1.9 and {learned:.2f} nats/char": 1.9
        < first["val_loss"]
        < learned,
        "final val loss below 1.45 nats/char": last["val_loss"] < 1.45,
        "final val within 0.1 of train": abs(last["val_loss"] - last["train_loss"]) < 0.1,
    }


def next_character_claims(probs: list[float]) -> dict[str, bool]:
    """Lesson 12's claims about the next-character distribution after an open prompt at
    temperature 1: a choice between several characters (none takes half the probability) that
    the model has narrowed down (its likeliest three hold over half, ten times uniform's share)."""
    ranked = sorted(probs, reverse=True)
    top3, uniform3 = sum(ranked[:3]), 3 / len(ranked)
    return {
        "no character takes half the probability": ranked[0] < 0.5,
        "the likeliest three hold over half of it": top3 > 0.5 and top3 > 10 * uniform3,
    }


def context_claims(loss_32: float, loss_64: float, vocab_size: int) -> dict[str, bool]:
    """Lesson 12's claims about context 32 against context 64 at equal tokens per step: both
    models learned (a nat under the uniform guess), and context 64 is not better by 0.05 or more."""
    learned = math.log(vocab_size) - LEARNED_MARGIN
    return {
        f"both learned (below {learned:.2f} nats/char)": max(loss_32, loss_64) < learned,
        "context 64 not better than context 32 by 0.05 nats or more": loss_32 - loss_64 < 0.05,
    }


def exact_match_claim(correct: torch.Tensor) -> bool:
    """Lesson 11: at least 99% of the sums answered exactly (``correct``: one bool per sum)."""
    return float(correct.float().mean()) >= 0.99


def carry_group_claims(correct: torch.Tensor, carries: torch.Tensor) -> list[bool]:
    """Lesson 11: in each group of sums with 0, 1, 2 and 3 carries, at least 98% exact."""
    return [float(correct[carries == c].float().mean()) >= 0.98 for c in range(4)]


def masked_loss_claim(losses: list[float], tail: int = 100) -> bool:
    """Lesson 11: the mean of the engine's last ``tail`` training losses (the masked loss, on
    the answer tokens only) is below 0.05 nats."""
    if len(losses) < tail:
        raise ValueError(f"need at least {tail} training losses, got {len(losses)}")
    return sum(losses[-tail:]) / tail < 0.05
