"""The knobs of one training run (:class:`TrainConfig`), checked when made."""

from __future__ import annotations

from dataclasses import dataclass

from .policy import PRECISIONS

OPTIMIZERS = ("adamw", "muon")
OPTIMIZER_HELP = (
    "adamw (default): AdamW for every parameter; muon: torch.optim.Muon for the "
    "hidden matrices at TrainConfig.muon_lr, AdamW at --lr for the rest, on one schedule"
)
# The fields that change what a run computes: a resume must keep them (see resume.py).
RUN_FIELDS = (
    "steps", "lr", "min_lr_ratio", "warmup_steps", "weight_decay", "betas", "grad_clip",
    "precision", "seed", "time_budget", "optimizer", "muon_lr",
)  # fmt: skip


@dataclass
class TrainConfig:
    """The knobs of one training run; every field has a default that trains small models well."""

    steps: int  # the schedule's length (with time_budget: the most steps taken)
    lr: float = 1e-3  # peak learning rate, reached at the end of the warmup
    min_lr_ratio: float = 0.1  # the cosine decays to lr * min_lr_ratio at the last step
    warmup_steps: int = 100
    weight_decay: float = 0.1  # applied to matrices only (see configure_optimizer)
    betas: tuple[float, float] = (0.9, 0.99)
    grad_clip: float | None = 1.0  # max global gradient norm; None turns clipping off
    eval_every: int = 0  # 0: evaluate only after the last step
    checkpoint_every: int = 0  # with an out_dir; 0: a checkpoint after the last step only
    log_every: int = 50  # read the losses back from the device (and redraw the bar's loss)
    precision: str = "auto"  # "auto": bf16 where it measures faster (prefers_bf16); or bf16/fp32
    seed: int = 0  # seeds torch (dropout); the data's seed belongs to batch_at
    time_budget: float | None = None  # seconds: train until spent, the cosine following the time
    compile: bool | None = None  # torch.compile the model; None: where it wins (uses_compile)
    fused: bool | None = None  # AdamW's fused kernel; None: fused on CPU and CUDA (measured faster)
    progress: bool = True  # a tqdm bar (a widget in notebooks, text in a terminal)
    desc: str = "train"
    optimizer: str = "adamw"  # or "muon": Muon for the hidden matrices, AdamW for the rest
    muon_lr: float = 0.02  # Muon's peak learning rate (optimizer="muon"), on the same schedule
    peak_flops: float | None = None  # FLOP/s the device can do: with it the logs carry MFU

    def __post_init__(self) -> None:
        if not isinstance(self.steps, int) or self.steps < 1:
            raise ValueError(f"steps must be an integer >= 1, got {self.steps!r}")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr!r}")
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ValueError(f"min_lr_ratio must lie in [0, 1], got {self.min_lr_ratio!r}")
        if min(self.warmup_steps, self.eval_every, self.checkpoint_every) < 0:
            raise ValueError("warmup_steps, eval_every and checkpoint_every must be >= 0")
        if self.log_every < 1:
            raise ValueError(f"log_every must be >= 1, got {self.log_every!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.grad_clip is not None and self.grad_clip <= 0:
            raise ValueError(f"grad_clip must be > 0 or None, got {self.grad_clip!r}")
        if self.time_budget is not None and self.time_budget <= 0:
            raise ValueError(f"time_budget must be > 0 seconds or None, got {self.time_budget!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
