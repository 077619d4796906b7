"""Loss at initialization: the ln(V) sanity check, a device-independent re-initialization of the
token embedding, and a tiny deterministic training loop to compare two starts (lesson 07).

An untrained language model should spread its bet evenly over the vocabulary, so its first loss
should be close to ``ln(vocab_size)``. :func:`loss_at_init` measures the loss and the logits'
spread in one forward pass; :func:`train_steps` runs a few plain AdamW steps (with the engine's
loop) on batches drawn on the CPU (see :func:`walk_batches`), so two runs from two inits see the
same data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from ..core.model import lm_loss
from ..core.modes import eval_mode
from ..engine.training import TrainConfig, train


def uniform_loss(vocab_size: int) -> float:
    """Cross-entropy of the uniform prediction over ``vocab_size`` classes: exactly ln(V)."""
    if not isinstance(vocab_size, int) or vocab_size < 1:
        raise ValueError(f"vocab_size must be an integer >= 1, got {vocab_size!r}")
    return math.log(vocab_size)


@dataclass(frozen=True)
class InitReport:
    """What one forward pass at initialization says: the logits' spread and the loss vs ln(V)."""

    logit_std: float
    loss: float
    uniform: float  # ln(V)

    @property
    def gap(self) -> float:
        """How far the loss sits above (or below) the uniform prediction's ln(V)."""
        return self.loss - self.uniform

    def ok(self, tol: float = 0.05) -> bool:
        """True when the loss lies within ``tol`` of ln(V)."""
        return abs(self.gap) <= tol


@torch.no_grad()
def loss_at_init(model: nn.Module, idx: torch.Tensor, targets: torch.Tensor) -> InitReport:
    """Run ``model`` once in eval mode on ``idx`` and compare its loss on ``targets`` with ln(V).

    The model's train/eval mode is restored afterwards.
    """
    with eval_mode(model):
        logits = model(idx).float()
    return InitReport(
        logit_std=float(logits.std()),
        loss=float(lm_loss(logits, targets)),
        uniform=uniform_loss(int(logits.size(-1))),
    )


@torch.no_grad()
def reinit_token_embedding_(model: nn.Module, std: float, seed: int) -> None:
    """Redraw ``model.tok_emb.weight`` from N(0, std^2) in place.

    The numbers are drawn on the CPU under ``seed`` and copied into the existing tensor, so a
    tied head (which *is* that tensor) follows, and the result is the same on every device.
    """
    if std < 0:
        raise ValueError(f"std must be >= 0, got {std!r}")
    weight = model.tok_emb.weight
    g = torch.Generator().manual_seed(seed)
    weight.copy_(torch.randn(tuple(weight.shape), generator=g) * std)


def walk_batches(
    vocab_size: int,
    n_batches: int,
    batch_size: int,
    seq_len: int,
    seed: int,
    max_jump: int = 4,
    device: str | torch.device | None = None,
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``n_batches`` pairs ``(x, y)`` of shape ``(batch_size, seq_len)`` with ``y`` = ``x``
    shifted by one: random walks that step forward by 1..``max_jump`` (mod ``vocab_size``).

    Each next token is uniform over ``max_jump`` choices given the current one, so the best
    loss any model can reach is ``ln(max_jump)``. Drawn on the CPU, then moved to ``device``.
    """
    if not 1 <= max_jump < vocab_size:
        raise ValueError(f"max_jump must lie in [1, vocab_size - 1], got {max_jump!r}")
    g = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(n_batches):
        start = torch.randint(vocab_size, (batch_size, 1), generator=g)
        jumps = torch.randint(1, max_jump + 1, (batch_size, seq_len), generator=g)
        steps = torch.cat([torch.zeros(batch_size, 1, dtype=torch.long), jumps.cumsum(1)], 1)
        seq = (start + steps) % vocab_size
        target = device if device is not None else "cpu"
        batches.append((seq[:, :-1].to(target), seq[:, 1:].to(target)))
    return batches


def train_steps(
    model: nn.Module,
    batches: list[tuple[torch.Tensor, torch.Tensor]],
    lr: float = 3e-3,
    seed: int = 0,
) -> list[float]:
    """One plain AdamW step (no weight decay, no schedule, no clipping) per batch, with the
    course's training loop (:func:`course_utils.engine.training.train`).

    Returns the loss of each batch measured *before* its step, so ``losses[0]`` is the loss at
    initialization. The loop seeds torch with ``seed`` first; with dropout 0 and batches drawn
    in advance, two calls on equal models give equal losses.
    """
    if not batches:
        raise ValueError("batches is empty: pass at least one (x, y) pair")
    plain = TrainConfig(
        steps=len(batches), lr=lr, warmup_steps=0, min_lr_ratio=1.0, weight_decay=0.0,
        betas=(0.9, 0.999), grad_clip=None, precision="fp32", seed=seed, progress=False,
    )  # fmt: skip
    return train(model, lambda step: batches[step], plain).losses
