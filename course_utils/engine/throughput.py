"""Training throughput: tokens per second and MFU (model FLOPs utilization).

:func:`rates` is the one formula, used by the training logs (:class:`Throughput`, at each log
point) and by the benchmarks (benchmarks/bookgpt_train.py). FLOPs are
:func:`course_utils.core.flops.training_flops` of the model's config; MFU needs the device's
peak FLOP/s, which the caller measures (e.g. :func:`course_utils.core.flops.matmul_throughput`).
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from ..core.flops import training_flops
from ..core.model import GPTConfig


def rates(tokens: int, flops: float | None, seconds: float, peak: float | None) -> dict:
    """``tokens_per_s`` over ``seconds``, and ``mfu`` (achieved FLOP/s over ``peak``) where
    ``flops`` and ``peak`` are known."""
    out = {"tokens_per_s": tokens / seconds if seconds > 0 else float("nan")}
    if flops is not None and peak:
        out["mfu"] = flops / seconds / peak if seconds > 0 else float("nan")
    return out


def step_flops(model: nn.Module, x: torch.Tensor) -> float | None:
    """The model FLOPs of one training step on the batch ``x`` (B, T), for a course GPT."""
    config = getattr(model, "config", None)
    if not (dataclasses.is_dataclass(config) and isinstance(config, GPTConfig)) or x.dim() != 2:
        return None
    return float(training_flops(config, x.size(0), x.size(1)))


class Throughput:
    """Counts the tokens (and FLOPs) of the updates since the last log point and, at the next,
    appends their :func:`rates` to the history's ``throughput`` rows. Nothing is read from the
    device: the counts come from the CPU batches' shapes, the time from the caller's clock."""

    def __init__(self, model: nn.Module, peak: float | None) -> None:
        self.model, self.peak = model, peak
        self.tokens, self.flops, self.since = 0, 0.0, 0.0
        self._per_shape: dict[tuple, float | None] = {}

    def count(self, x: torch.Tensor) -> None:
        shape = tuple(x.shape)
        if shape not in self._per_shape:
            self._per_shape[shape] = step_flops(self.model, x)
        flops = self._per_shape[shape]
        self.tokens += x.numel()
        self.flops = None if flops is None or self.flops is None else self.flops + flops

    def restart(self, now: float) -> None:
        self.tokens, self.flops, self.since = 0, 0.0, now

    def log(self, history, now: float) -> None:
        if self.tokens:
            row = rates(self.tokens, self.flops, now - self.since, self.peak)
            history.throughput.append({"step": history.steps, **row})
        self.restart(now)
