"""A small, reusable training loop: AdamW, warmup + cosine, clipping, periodic evaluation.

One function, :func:`train`, drives any model that maps a batch ``x`` to logits: it asks
``get_batch(step)`` for ``(x, y)`` on the CPU (so the data is seeded the same on every machine),
moves it to the device, runs the step under the requested precision and records a
:class:`History`. SumGPT (lesson 10) and BookGPT (lesson 11) both train with it.
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from ..core.device import pick_device
from ..core.model import lm_loss
from ..core.seeding import seed_everything

PRECISIONS = ("auto", "bf16", "fp32")
# Seconds between progress-bar redraws. In a notebook each redraw sends widget messages, and
# nbval reads a cell's messages only once the cell has finished: ZMQ drops what overflows its
# queues (high-water marks), the end-of-cell message with it, and nbval then fails the cell with
# "Timeout of 5 seconds exceeded waiting for output" (seen at tqdm's default 0.1 s on a slow,
# one-thread run). One redraw a second keeps a 10-minute cell far below the limit.
BAR_SECONDS = 1.0


@dataclass
class TrainConfig:
    """The knobs of one training run; every field has a default that trains small models well."""

    steps: int
    lr: float = 1e-3  # peak learning rate, reached at the end of the warmup
    min_lr_ratio: float = 0.1  # the cosine decays to lr * min_lr_ratio at the last step
    warmup_steps: int = 100
    weight_decay: float = 0.1  # applied to matrices only (see configure_optimizer)
    betas: tuple[float, float] = (0.9, 0.99)
    grad_clip: float | None = 1.0  # max global gradient norm; None turns clipping off
    eval_every: int = 0  # 0: evaluate only after the last step
    precision: str = "auto"  # "auto": bf16 autocast on CUDA, fp32 elsewhere; or "bf16", "fp32"
    seed: int = 0  # seeds torch (dropout); the data's seed belongs to get_batch
    progress: bool = True  # a tqdm bar (a widget in notebooks, text in a terminal)
    desc: str = "train"

    def __post_init__(self) -> None:
        if not isinstance(self.steps, int) or self.steps < 1:
            raise ValueError(f"steps must be an integer >= 1, got {self.steps!r}")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr!r}")
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ValueError(f"min_lr_ratio must lie in [0, 1], got {self.min_lr_ratio!r}")
        if self.warmup_steps < 0 or self.eval_every < 0:
            raise ValueError("warmup_steps and eval_every must be >= 0")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.grad_clip is not None and self.grad_clip <= 0:
            raise ValueError(f"grad_clip must be > 0 or None, got {self.grad_clip!r}")


def lr_at(step: int, config: TrainConfig) -> float:
    """The learning rate of update number ``step`` (0-based): a linear warmup from lr/warmup to
    lr over ``warmup_steps`` updates, then a cosine from lr down to lr * min_lr_ratio at the
    last update."""
    decay_steps = max(1, config.steps - 1 - config.warmup_steps)
    return lr_at_progress(step, (step - config.warmup_steps) / decay_steps, config)


def lr_at_progress(step: int, progress: float, config: TrainConfig) -> float:
    """:func:`lr_at` with the cosine driven by ``progress`` (0 to 1) instead of the step count:
    a run with a wall-clock budget passes the fraction of its time spent (``config.steps`` is
    then unused), so its schedule ends when its time does."""
    peak, floor = config.lr, config.lr * config.min_lr_ratio
    if step < config.warmup_steps:
        return peak * (step + 1) / config.warmup_steps
    progress = min(1.0, max(0.0, progress))
    return floor + 0.5 * (peak - floor) * (1.0 + math.cos(math.pi * progress))


def configure_optimizer(
    model: nn.Module, lr: float, weight_decay: float, betas=(0.9, 0.99)
) -> torch.optim.AdamW:
    """AdamW with weight decay on the matrices (linear and embedding weights) only.

    Biases and normalization gains are vectors: decaying them toward zero only fights the
    normalization, so they get their own group with ``weight_decay=0``. A tied head is one
    parameter and is listed once.
    """
    params = [p for p in model.parameters() if p.requires_grad]  # parameters() skips duplicates
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr, betas=betas)


def autocast_for(device: torch.device, precision: str):
    """The context a forward pass runs in: bf16 autocast or nothing (fp32)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    use_bf16 = precision == "bf16" or (precision == "auto" and device.type == "cuda")
    if not use_bf16:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


@dataclass
class History:
    """What a run recorded: one loss, learning rate and gradient norm per update, and one
    dict per evaluation (``step``, ``seconds`` of training so far, then the metrics)."""

    losses: list[float] = field(default_factory=list)
    lrs: list[float] = field(default_factory=list)
    grad_norms: list[float] = field(default_factory=list)
    evals: list[dict] = field(default_factory=list)
    seconds: float = 0.0  # wall time spent in training steps, evaluations excluded
    stopped_early: bool = False

    @property
    def steps(self) -> int:
        return len(self.losses)

    def metric(self, name: str) -> tuple[list[int], list[float]]:
        """(steps, values) of one evaluation metric, ready to plot."""
        rows = [e for e in self.evals if name in e]
        return [e["step"] for e in rows], [e[name] for e in rows]

    def first_step_reaching(self, name: str, threshold: float) -> dict | None:
        """The first evaluation whose ``name`` is >= ``threshold`` (None if none did)."""
        return next((e for e in self.evals if e.get(name, -math.inf) >= threshold), None)


def train(
    model: nn.Module,
    get_batch: Callable[[int], tuple[torch.Tensor, torch.Tensor]],
    config: TrainConfig,
    *,
    evaluate: Callable[[nn.Module, int], dict] | None = None,
    stop_when: Callable[[dict], bool] | None = None,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = lm_loss,
    device: str | torch.device | None = None,
) -> History:
    """Train ``model`` in place for ``config.steps`` updates and return its :class:`History`.

    ``get_batch(step)`` returns ``(x, y)`` (drawn on the CPU); ``loss_fn(model(x), y)`` is the
    loss. ``evaluate(model, step)`` runs every ``eval_every`` updates and after the last one,
    with the model in eval mode and gradients off; it returns a dict of metrics. If
    ``stop_when(metrics)`` is true after an evaluation, training stops there.
    """
    from tqdm.auto import tqdm

    device = torch.device(device) if device is not None else pick_device()
    model.to(device)
    seed_everything(config.seed)
    optimizer = configure_optimizer(model, config.lr, config.weight_decay, config.betas)
    history = History()
    losses: list[torch.Tensor] = []
    norms: list[torch.Tensor] = []

    def run_eval(step: int) -> dict:
        was_training = model.training
        model.eval()
        with torch.no_grad():
            metrics = dict(evaluate(model, step))
        model.train(was_training)
        row = {"step": step, "seconds": history.seconds, **metrics}
        history.evals.append(row)
        return row

    bar = tqdm(
        total=config.steps,
        desc=config.desc,
        disable=not config.progress,
        leave=True,
        mininterval=BAR_SECONDS,
    )
    model.train()
    start = time.perf_counter()
    for step in range(config.steps):
        lr = lr_at(step, config)
        for group in optimizer.param_groups:
            group["lr"] = lr
        x, y = get_batch(step)
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        with autocast_for(device, config.precision):
            logits = model(x)
        loss = loss_fn(logits, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if config.grad_clip is not None:
            norm = nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        else:
            norm = torch.linalg.vector_norm(
                torch.stack([p.grad.norm() for p in model.parameters() if p.grad is not None])
            )
        optimizer.step()
        losses.append(loss.detach())
        norms.append(norm.detach())
        history.lrs.append(lr)
        bar.update(1)
        done = step + 1
        is_eval = evaluate is not None and (
            done == config.steps or (config.eval_every and done % config.eval_every == 0)
        )
        if done % 50 == 0 or is_eval:
            bar.set_postfix(loss=f"{float(losses[-1]):.4f}", refresh=False)
        if is_eval:
            history.seconds += time.perf_counter() - start
            row = run_eval(done)
            start = time.perf_counter()
            if stop_when is not None and stop_when(row):
                history.stopped_early = done < config.steps
                break
    else:
        history.seconds += time.perf_counter() - start
    bar.close()
    history.losses = torch.stack(losses).float().cpu().tolist()
    history.grad_norms = torch.stack(norms).float().cpu().tolist()
    return history


def atomic_save(obj, path: str | os.PathLike) -> Path:
    """``torch.save`` to a temporary file next to ``path``, then rename it into place.

    A crash or a full disk mid-write leaves the previous checkpoint intact instead of a
    truncated one: ``os.replace`` swaps the whole file in one step.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path
