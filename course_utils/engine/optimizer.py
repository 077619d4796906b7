"""The optimizer of a run: AdamW over two parameter groups (or Muon for the hidden matrices and
AdamW for the rest), and the gradient norm and clip."""

from __future__ import annotations

import torch
from torch import nn

from ..core import cpu


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


def build_optimizer(model: nn.Module, config, fused: bool | None = None):
    """The optimizer ``config.optimizer`` names: :func:`configure_optimizer` (``"adamw"``), or
    :func:`muon_optimizer` (``"muon"``)."""
    if config.optimizer == "muon":
        return muon_optimizer(model, config, fused=fused)
    return configure_optimizer(model, config.lr, config.weight_decay, config.betas, fused=fused)


def hidden_matrices(model: nn.Module) -> list[nn.Parameter]:
    """The 2-D weights of the hidden layers: every matrix except embeddings and the output
    head (a module named ``head`` or ``lm_head``, tied or not); what Muon updates."""
    outside = {
        id(p)
        for name, module in model.named_modules()
        if isinstance(module, nn.Embedding) or name.split(".")[-1] in ("head", "lm_head")
        for p in module.parameters()
    }
    return [
        p for p in model.parameters() if p.requires_grad and p.dim() == 2 and id(p) not in outside
    ]


def muon_optimizer(model: nn.Module, config, fused: bool | None = None) -> Optimizers:
    """``torch.optim.Muon`` (torch >= 2.9) for :func:`hidden_matrices`, at ``config.muon_lr``
    with no weight decay, momentum 0.95 (Nesterov) and the original learning-rate scale, as
    modded-nanogpt trains; AdamW at ``config.lr`` for the rest. Each group's ``lr_scale`` keeps
    both on the one schedule (:meth:`Optimizers.set_lr`)."""
    muon = getattr(torch.optim, "Muon", None)
    if muon is None:
        raise ValueError(
            f"optimizer='muon' needs torch.optim.Muon (torch >= 2.9); this is torch "
            f"{torch.__version__}: upgrade torch, or use optimizer='adamw' (--optimizer adamw)"
        )
    matrices = hidden_matrices(model)
    ids = {id(p) for p in matrices}
    rest = [p for p in model.parameters() if p.requires_grad and id(p) not in ids]
    groups = [
        {"params": [p for p in rest if p.dim() >= 2], "weight_decay": config.weight_decay},
        {"params": [p for p in rest if p.dim() < 2], "weight_decay": 0.0},
    ]
    adamw = torch.optim.AdamW(groups, lr=config.lr, betas=config.betas, fused=fused)
    hidden = muon(
        [{"params": matrices, "lr_scale": config.muon_lr / config.lr}], lr=config.muon_lr,
        weight_decay=0.0, momentum=0.95, nesterov=True, adjust_lr_fn="original",
    )  # fmt: skip
    return Optimizers([hidden, adamw])


class Optimizers:
    """Several optimizers stepped as one (Muon and AdamW), with the methods the loop calls."""

    def __init__(self, optimizers: list[torch.optim.Optimizer]) -> None:
        self.optimizers = optimizers

    @property
    def param_groups(self) -> list[dict]:
        return [g for o in self.optimizers for g in o.param_groups]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for o in self.optimizers:
            o.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        for o in self.optimizers:
            o.step()

    def state_dict(self) -> dict:
        return {"optimizers": [o.state_dict() for o in self.optimizers]}

    def load_state_dict(self, state: dict) -> None:
        for o, s in zip(self.optimizers, state["optimizers"], strict=True):
            o.load_state_dict(s)


def set_lr(optimizer, lr: float) -> None:
    """Put every group on the schedule's ``lr``, times the group's ``lr_scale`` where it has
    one (Muon's groups: their own peak, the same schedule)."""
    for group in optimizer.param_groups:
        group["lr"] = lr * group["lr_scale"] if "lr_scale" in group else lr


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


def muon_cost_note(optimizer: str, device) -> str | None:
    """``torch.optim.Muon`` runs its Newton-Schulz iterations in bf16 whatever the run's
    precision, so on a CPU that emulates bf16 (AVX2, AVX-512 without bf16) they cost far more
    than the rest of the step: a one-line note saying so there, else None."""
    device = torch.device(device) if device is not None else torch.device("cpu")
    if optimizer != "muon" or device.type != "cpu" or cpu.cpu_class() not in cpu.NO_BF16_CLASSES:
        return None
    return (
        f"note: this {cpu.cpu_class()} CPU emulates bf16, which torch.optim.Muon's Newton-Schulz "
        f"iterations run in: expect each step to take several times an AdamW step (the README's "
        f"results); --optimizer adamw (sumgpt: --recipe lesson) trains faster here"
    )
