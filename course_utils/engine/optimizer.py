"""The optimizer of a run: AdamW over two parameter groups, and the gradient norm and clip."""

from __future__ import annotations

import torch
from torch import nn


def configure_optimizer(
    model: nn.Module, lr: float, weight_decay: float, betas=(0.9, 0.99), fused: bool | None = None
) -> torch.optim.AdamW:
    """AdamW with weight decay on the matrices (linear and embedding weights) only.

    Biases and normalization gains are vectors: decaying them toward zero only fights the
    normalization, so they get their own group with ``weight_decay=0``. A tied head is one
    parameter and is listed once.
    """
    params = [p for p in model.parameters() if p.requires_grad]  # parameters() skips duplicates
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr, betas=betas, fused=fused)


def uses_fused_adamw(config, device: torch.device) -> bool:
    """Whether a run takes AdamW's fused kernel: ``config.fused``, or by default on the CPU and
    CUDA, where it exists and measured faster than the for-each one (benchmarks/train_step.py)."""
    return config.fused if config.fused is not None else device.type in ("cpu", "cuda")


def clip_and_measure(params: list[torch.Tensor], max_norm: float | None) -> torch.Tensor:
    """The global gradient norm of ``params`` (before clipping), clipping to ``max_norm`` unless
    it is None; a device tensor, nothing read back."""
    if max_norm is not None:
        return nn.utils.clip_grad_norm_(params, max_norm)
    return total_norm([p.grad for p in params])


def total_norm(grads: list[torch.Tensor]) -> torch.Tensor:
    """The global 2-norm of ``grads``: ``nn.utils.get_total_norm`` where torch has it (2.6+),
    else the same norm of the per-tensor norms, computed here."""
    get_total_norm = getattr(nn.utils, "get_total_norm", None)
    if get_total_norm is not None:
        return get_total_norm(grads)
    if not grads:
        return torch.zeros(())
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
