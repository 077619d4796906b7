"""The learning-rate schedule: a linear warmup, then a cosine down to a floor."""

from __future__ import annotations

import math


def lr_at(step: int, config) -> float:
    """The learning rate of update number ``step`` (0-based): a linear warmup from lr/warmup to
    lr over ``warmup_steps`` updates, then a cosine from lr down to lr * min_lr_ratio at the
    last update (``config.steps``); past the last update it stays at the floor."""
    decay_steps = max(1, config.steps - 1 - config.warmup_steps)
    return lr_at_progress(step, (step - config.warmup_steps) / decay_steps, config)


def lr_at_progress(step: int, progress: float, config) -> float:
    """:func:`lr_at` with the cosine driven by ``progress`` (0 to 1) instead of the step count:
    a run with a wall-clock budget passes the fraction of its time spent, so its schedule ends
    when its time does."""
    peak, floor = config.lr, config.lr * config.min_lr_ratio
    if step < config.warmup_steps:
        return peak * (step + 1) / config.warmup_steps
    progress = min(1.0, max(0.0, progress))
    return floor + 0.5 * (peak - floor) * (1.0 + math.cos(math.pi * progress))
