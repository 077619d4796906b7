"""The optimizer of a run: AdamW over two parameter groups (or Muon for the hidden matrices and
AdamW for the rest), and the gradient norm and clip."""

from __future__ import annotations

import contextlib

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


def build_optimizer(model: nn.Module, config, fused: bool | None = None, device=None):
    """The optimizer ``config.optimizer`` names: :func:`configure_optimizer` (``"adamw"``), or
    :func:`muon_optimizer` (``"muon"``) for a model on ``device``."""
    if config.optimizer == "muon":
        return muon_optimizer(model, config, fused=fused, device=device)
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


def muon_optimizer(model: nn.Module, config, fused: bool | None = None, device=None) -> Optimizers:
    """``torch.optim.Muon`` for :func:`hidden_matrices`, at ``config.muon_lr``
    with no weight decay, momentum 0.95 (Nesterov) and the original learning-rate scale, as
    modded-nanogpt trains; AdamW at ``config.lr`` for the rest. Each group's ``lr_scale`` keeps
    both on the one schedule (:meth:`Optimizers.set_lr`). On a CPU that emulates bf16 its
    Newton-Schulz iterations run in float32 (:class:`Float32Muon`)."""
    matrices = hidden_matrices(model)
    ids = {id(p) for p in matrices}
    rest = [p for p in model.parameters() if p.requires_grad and id(p) not in ids]
    groups = [
        {"params": [p for p in rest if p.dim() >= 2], "weight_decay": config.weight_decay},
        {"params": [p for p in rest if p.dim() < 2], "weight_decay": 0.0},
    ]
    adamw = torch.optim.AdamW(groups, lr=config.lr, betas=config.betas, fused=fused)
    muon = Float32Muon if newton_schulz_in_float32(device) else torch.optim.Muon
    hidden = muon(
        [{"params": matrices, "lr_scale": config.muon_lr / config.lr}], lr=config.muon_lr,
        weight_decay=0.0, momentum=0.95, nesterov=True, adjust_lr_fn="original",
    )  # fmt: skip
    return Optimizers([hidden, adamw])


def newton_schulz_in_float32(device) -> bool:
    """Whether Muon's Newton-Schulz iterations should run in float32 on ``device``: on a CPU
    that emulates bf16 (AVX2, AVX-512 without bf16), where torch's bf16 iterations cost several
    times a whole AdamW step; elsewhere (bf16 units, CUDA) torch's bf16 ones."""
    device = torch.device(device) if device is not None else torch.device("cpu")
    return device.type == "cpu" and cpu.cpu_class() in cpu.NO_BF16_CLASSES


def newton_schulz_float32(grad: torch.Tensor, ns_coefficients, ns_steps: int, eps: float):
    """``torch.optim.Muon``'s orthogonalization (the same quintic iteration and steps, on the
    wide side of the matrix) in float32: torch's casts to bf16 first, whatever the CPU."""
    a, b, c = ns_coefficients
    x = grad.float()
    tall = x.size(0) > x.size(1)
    if tall:
        x = x.T
    x = x / x.norm().clamp(min=eps)  # spectral norm at most 1
    for _ in range(ns_steps):
        gram = x @ x.T
        x = torch.addmm(x, torch.addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x.T if tall else x


class Float32Muon(torch.optim.Muon if hasattr(torch.optim, "Muon") else torch.optim.Optimizer):
    """``torch.optim.Muon`` with its Newton-Schulz iterations in float32
    (:func:`newton_schulz_float32`); everything else (momentum, the learning-rate scale, the
    update) is torch's own step."""

    @torch.no_grad()
    def step(self, closure=None):
        with _newton_schulz(newton_schulz_float32):
            return super().step(closure)


@contextlib.contextmanager
def _newton_schulz(function):
    """torch's Muon step with ``function`` as its orthogonalization (the module-level function
    its step calls), restored afterwards."""
    from torch.optim import _muon

    original = getattr(_muon, "_zeropower_via_newtonschulz", None)
    if original is None:  # a torch whose Muon is built otherwise: its own iterations, then
        yield
        return
    _muon._zeropower_via_newtonschulz = function
    try:
        yield
    finally:
        _muon._zeropower_via_newtonschulz = original


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
    """The global 2-norm of ``grads`` (``nn.utils.get_total_norm``), as clipping computes it."""
    return nn.utils.get_total_norm(grads)
