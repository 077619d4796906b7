"""The one training loop of the course: every optimizer step of every run happens here.

SumGPT, BookGPT, the lessons' short runs and the benchmarks all call :func:`train` (or, to time
single steps, the :class:`Trainer` it is built on). A project supplies a model, a
``batch_at(step) -> (x, y)`` that draws on the CPU and depends on the step alone (so a resumed
run sees the same batches), a :class:`TrainConfig` and, optionally, an evaluation. The loop
owns the rest: AdamW with weight decay on matrices only, warmup + cosine, gradient clipping,
bf16 autocast (compiled where it pays), evaluation on schedule in eval mode, a tqdm bar,
``log.csv`` / ``log.json``, atomic checkpoints, ``resume`` (weights, AdamW moments, step, RNG
state and history come back, so the resumed losses equal an uninterrupted run's) and DDP under
``torchrun``. Losses and gradient norms stay on the device until a log point, so a step never
waits for the GPU.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from ..core.device import prefers_bf16
from ..core.model import lm_loss
from ..core.modes import eval_mode
from ..core.seeding import seed_everything
from . import checkpoint as ckpt
from .distributed import Dist, mean_over_ranks, shard
from .logs import write_logs

PRECISIONS = ("auto", "bf16", "fp32")
# Seconds between progress-bar redraws. In a notebook each redraw sends widget messages, and
# nbval reads a cell's messages only once the cell has finished: ZMQ drops what overflows its
# queues (high-water marks), the end-of-cell message with it, and nbval then fails the cell with
# "Timeout of 5 seconds exceeded waiting for output" (seen at tqdm's default 0.1 s on a slow,
# one-thread run). One redraw a second keeps a 10-minute cell far below the limit.
BAR_SECONDS = 1.0

Batch = tuple[torch.Tensor, torch.Tensor]


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
    precision: str = "auto"  # "auto": bf16 autocast on CUDA and AMX CPUs; or "bf16"/"fp32"
    seed: int = 0  # seeds torch (dropout); the data's seed belongs to batch_at
    time_budget: float | None = None  # seconds: train until spent, the cosine following the time
    compile: bool | None = None  # torch.compile the model; None: where it wins (uses_compile)
    fused: bool | None = None  # AdamW's fused kernel; None: fused on CPU and CUDA (measured faster)
    progress: bool = True  # a tqdm bar (a widget in notebooks, text in a terminal)
    desc: str = "train"

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


def lr_at(step: int, config: TrainConfig) -> float:
    """The learning rate of update number ``step`` (0-based): a linear warmup from lr/warmup to
    lr over ``warmup_steps`` updates, then a cosine from lr down to lr * min_lr_ratio at the
    last update."""
    decay_steps = max(1, config.steps - 1 - config.warmup_steps)
    return lr_at_progress(step, (step - config.warmup_steps) / decay_steps, config)


def lr_at_progress(step: int, progress: float, config: TrainConfig) -> float:
    """:func:`lr_at` with the cosine driven by ``progress`` (0 to 1) instead of the step count:
    a run with a wall-clock budget passes the fraction of its time spent, so its schedule ends
    when its time does."""
    peak, floor = config.lr, config.lr * config.min_lr_ratio
    if step < config.warmup_steps:
        return peak * (step + 1) / config.warmup_steps
    progress = min(1.0, max(0.0, progress))
    return floor + 0.5 * (peak - floor) * (1.0 + math.cos(math.pi * progress))


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


def uses_fused_adamw(config: TrainConfig, device: torch.device) -> bool:
    """Whether a run takes AdamW's fused kernel: ``config.fused``, or by default on the CPU and
    CUDA, where it exists and measured faster than the for-each one (benchmarks/train_step.py)."""
    return config.fused if config.fused is not None else device.type in ("cpu", "cuda")


# Compiling BookGPT's or SumGPT's step took 21-24 s on 2 cores the first time on a machine
# (inductor builds its C++ kernels, then caches them) and 2.5 s after; in bf16 on a CPU it then
# saves 5 ms of BookGPT's ~18 ms step and 8 ms of SumGPT's ~29 ms. These thresholds make the
# compile pay even the first time.
COMPILE_MIN_STEPS = 5000
COMPILE_MIN_SECONDS = 120.0


def uses_compile(config: TrainConfig, device: torch.device) -> bool:
    """Whether a run compiles its model: ``config.compile``, or by default where it measured
    faster with its compile time counted: bf16 autocast on a CPU (the fused casts, norms and
    GELUs; fp32 gains 4-8%), for runs of at least 5,000 steps or a two-minute budget, and where
    a C++ compiler is installed for inductor."""
    if config.compile is not None:
        return config.compile
    long_run = (
        config.time_budget >= COMPILE_MIN_SECONDS
        if config.time_budget is not None
        else config.steps >= COMPILE_MIN_STEPS
    )
    bf16_cpu = device.type == "cpu" and uses_bf16(device, config.precision)
    return long_run and bf16_cpu and _has_cpp_compiler()


def compile_for(net: nn.Module, device: torch.device, *, fullgraph: bool = False) -> nn.Module:
    """``torch.compile`` of ``net`` for ``device``: on a CPU with inductor's C++ wrapper, which
    calls the graph's kernels from C++ rather than Python (BookGPT's compiled bf16 step 4-5%
    faster, the compile no slower)."""
    options = {"cpp_wrapper": True} if device.type == "cpu" else None
    return torch.compile(net, fullgraph=fullgraph, options=options)


def _has_cpp_compiler() -> bool:
    """Whether inductor finds a C++ compiler to build its CPU kernels with."""
    return any(shutil.which(c) for c in (os.environ.get("CXX", "g++"), "g++", "clang++"))


def uses_bf16(device: torch.device, precision: str) -> bool:
    """Whether the forward pass runs under bf16 autocast for ``precision`` on ``device``."""
    return precision == "bf16" or (precision == "auto" and prefers_bf16(device))


def autocast_for(device: torch.device, precision: str):
    """The context a forward pass runs in: bf16 autocast or nothing (fp32). ``"auto"`` is bf16
    on CUDA GPUs with bf16 and on CPUs where bf16 measures faster, fp32 elsewhere
    (:func:`course_utils.core.device.prefers_bf16`)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if not uses_bf16(device, precision):
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

    def to_dict(self) -> dict:
        return {
            "losses": list(self.losses),
            "lrs": list(self.lrs),
            "grad_norms": list(self.grad_norms),
            "evals": [dict(e) for e in self.evals],
            "seconds": self.seconds,
            "stopped_early": self.stopped_early,
        }

    @classmethod
    def from_dict(cls, d: dict) -> History:
        return cls(
            losses=list(d.get("losses", [])),
            lrs=list(d.get("lrs", [])),
            grad_norms=list(d.get("grad_norms", [])),
            evals=[dict(e) for e in d.get("evals", [])],
            seconds=float(d.get("seconds", 0.0)),
            stopped_early=bool(d.get("stopped_early", False)),
        )


class Trainer:
    """One model, its AdamW and its update: the only place in the course an optimizer steps.

    :meth:`step` runs forward (under the config's precision), loss, backward, clipping and
    the AdamW update for one batch already on the device, and returns ``[loss, grad_norm]``
    as a device tensor: nothing is read back, so on a GPU the step never waits.
    """

    def __init__(
        self,
        model: nn.Module,
        config: TrainConfig,
        *,
        loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = lm_loss,
        device: torch.device | None = None,
        net: nn.Module | None = None,
    ) -> None:
        self.model, self.config, self.loss_fn = model, config, loss_fn
        self.device = device if device is not None else next(model.parameters()).device
        self.net = net if net is not None else model  # what runs forward: DDP or compiled
        if net is None and uses_compile(config, self.device):
            self.net = compile_for(model, self.device)
        self.optimizer = configure_optimizer(
            model, config.lr, config.weight_decay, config.betas,
            fused=uses_fused_adamw(config, self.device) or None,
        )  # fmt: skip

    def set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The net's logits. Where the engine chose to compile (``compile=None``) and compiling
        fails (say, no working C++ toolchain for inductor), warn once and go on uncompiled."""
        try:
            return self.net(x)
        except Exception as err:
            from torch._dynamo.exc import BackendCompilerFailed

            auto = self.config.compile is None and hasattr(self.net, "_orig_mod")
            if not (auto and isinstance(err, BackendCompilerFailed)):
                raise
            warnings.warn(
                f"torch.compile failed, so this run trains uncompiled (compile=False or "
                f"--no-compile skips the attempt): {str(err).splitlines()[0]}",
                stacklevel=2,
            )
            self.net = self.net._orig_mod
            return self.net(x)

    def step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with _repeatable(self.net, self.device):  # inductor compiles the backward lazily
            with autocast_for(self.device, self.config.precision):
                logits = self.forward(x)
            loss = self.loss_fn(logits, y)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
        params = [p for p in self.model.parameters() if p.grad is not None]
        if self.config.grad_clip is not None:
            norm = nn.utils.clip_grad_norm_(params, self.config.grad_clip)
        else:
            norm = nn.utils.get_total_norm([p.grad for p in params])
        self.optimizer.step()
        return torch.stack([loss.detach().float(), norm.detach().float()])


@contextlib.contextmanager
def _repeatable(net: nn.Module, device: torch.device):
    """For a compiled net on a CPU, torch's deterministic mode through forward and backward,
    where inductor compiles them: it then builds scatter-adds (the embedding's backward) without
    atomic adds, whose order changes from run to run. Without it a seeded compiled run drifted
    by 1e-7 within 6 steps; with it the run repeats exactly."""
    if not (hasattr(net, "_orig_mod") and device.type == "cpu"):
        yield
        return
    before = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class _Loop:
    """The bookkeeping around :meth:`Trainer.step`: schedule, log points, evaluations,
    checkpoints, the bar and the clock. One instance per call of :func:`train`."""

    def __init__(self, trainer, batch_at, history, *, dist, evaluate, out_dir, meta) -> None:
        self.trainer, self.batch_at, self.history = trainer, batch_at, history
        self.config, self.device = trainer.config, trainer.device
        self.dist, self.evaluate, self.out_dir, self.meta = dist, evaluate, out_dir, meta
        self.pending: list[torch.Tensor] = []
        self.check = getattr(trainer.model, "check_input", None)
        self.clock = time.perf_counter()

    def lr(self, step: int) -> float:
        if self.config.time_budget is None:
            return lr_at(step, self.config)
        return lr_at_progress(step, self.spent() / self.config.time_budget, self.config)

    def spent(self) -> float:
        return self.history.seconds + time.perf_counter() - self.clock

    def one_step(self, step: int) -> None:
        lr = self.lr(step)
        self.trainer.set_lr(lr)
        self.history.lrs.append(lr)
        x, y = self.batch_at(step)
        if self.check is not None:
            self.check(x)  # on the CPU batch, before the transfer: no wait for a GPU
        if self.dist.enabled:
            x, y = shard(x, self.dist), shard(y, self.dist)
        if self.device.type == "cuda":  # a page-locked copy lets the transfer run async
            x, y = x.pin_memory(), y.pin_memory()
        x = x.to(self.device, non_blocking=True)
        y = y.to(self.device, non_blocking=True)
        self.pending.append(self.trainer.step(x, y))

    def flush(self) -> None:
        """Read the pending losses and norms back (one transfer, averaged over DDP ranks)."""
        if self.pending:
            values = mean_over_ranks(torch.stack(self.pending), self.dist).cpu()
            self.history.losses += values[:, 0].tolist()
            self.history.grad_norms += values[:, 1].tolist()
            self.pending.clear()

    def pause_clock(self) -> None:
        _sync(self.device)
        self.history.seconds += time.perf_counter() - self.clock

    def run_eval(self, step: int) -> dict:
        with eval_mode(self.trainer.model):
            metrics = dict(self.evaluate(self.trainer.model, step))
        row = {"step": step, "seconds": self.history.seconds, **metrics}
        self.history.evals.append(row)
        return row

    def save(self, step: int) -> None:
        path = self.out_dir / ckpt.CHECKPOINT_NAME
        ckpt.save_checkpoint(
            path, self.trainer.model, optimizer=self.trainer.optimizer, step=step,
            history=self.history.to_dict(), meta=self.meta,
        )  # fmt: skip
        write_logs(self.out_dir, self.history)

    def at_step_end(self, done: int, last: bool) -> dict | None:
        """Log, evaluate and checkpoint where the schedule says; return the evaluation row."""
        c = self.config
        # Every rank flushes at the same steps (the flush is a collective under DDP), so the
        # schedule alone decides, not whether this rank evaluates.
        eval_due = last or (bool(c.eval_every) and done % c.eval_every == 0)
        save_due = self.out_dir is not None and (
            last or (c.checkpoint_every and done % c.checkpoint_every == 0)
        )
        if not (eval_due or save_due or done % c.log_every == 0):
            return None
        self.flush()
        evaluates = eval_due and self.evaluate is not None and self.dist.main
        if not (evaluates or save_due):
            return None
        self.pause_clock()
        row = self.run_eval(done) if evaluates else None
        if save_due and self.dist.main:
            self.save(done)
        self.clock = time.perf_counter()
        return row

    def finished(self, step: int) -> bool:
        budget = self.config.time_budget
        return step >= self.config.steps or (budget is not None and self.spent() >= budget)


def _resume_state(out_dir: Path | None, resume: bool, meta: dict, dist: Dist) -> dict | None:
    """The checkpoint to resume from (None for a fresh run), after checking it belongs here."""
    path = out_dir / ckpt.CHECKPOINT_NAME if out_dir is not None else None
    if not resume:
        if path is not None and path.exists() and dist.main:
            raise ckpt.CheckpointError(
                f"{path} exists; pass resume=True (--resume) to continue that run, or choose "
                f"another output folder"
            )
        return None
    if path is None:
        raise ckpt.CheckpointError(
            "resuming needs the run's folder (--out DIR) with its checkpoint"
        )
    state = ckpt.read_checkpoint(path, project=meta.get("project"))
    keys = set(meta) | set(state["meta"])
    changed = sorted(k for k in keys if meta.get(k) != state["meta"].get(k))
    if changed:
        raise ckpt.CheckpointError(
            f"{path} was written by a different run (it differs in {changed}); resume with the "
            f"same configuration and options, or use a new output folder"
        )
    return state


def _restore(trainer: Trainer, state: dict) -> tuple[History, int]:
    """Put a checkpoint's weights, AdamW moments and RNG state back; its history and step."""
    trainer.model.load_state_dict(state["model"])
    trainer.optimizer.load_state_dict(state["optimizer"])
    ckpt.set_rng_state(state["rng"])
    return History.from_dict(state["history"]), state["step"]


def _bar(config: TrainConfig, start: int, dist: Dist):
    """The progress bar (rank 0 only; a widget in notebooks, redrawn once a second)."""
    from tqdm.auto import tqdm

    return tqdm(
        total=config.steps, initial=start, desc=config.desc, leave=True,
        disable=not (config.progress and dist.main), mininterval=BAR_SECONDS,
    )  # fmt: skip


def _wrap(model: nn.Module, config: TrainConfig, dist: Dist, device: torch.device) -> nn.Module:
    """What runs the forward pass: the model, wrapped in DDP and/or compiled."""
    net = model
    if dist.enabled:
        from torch.nn.parallel import DistributedDataParallel as DDP

        net = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    return compile_for(net, device) if uses_compile(config, device) else net


def train(
    model: nn.Module,
    batch_at: Callable[[int], Batch],
    config: TrainConfig,
    *,
    evaluate: Callable[[nn.Module, int], dict] | None = None,
    stop_when: Callable[[dict], bool] | None = None,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = lm_loss,
    device: str | torch.device | None = None,
    out_dir: str | Path | None = None,
    resume: bool = False,
    meta: dict | None = None,
    stop_after: int | None = None,
    dist: Dist | None = None,
) -> History:
    """Train ``model`` in place for ``config.steps`` updates and return its :class:`History`.

    ``batch_at(step)`` returns ``(x, y)`` on the CPU; ``loss_fn(model(x), y)`` is the loss.
    ``evaluate(model, step)`` runs every ``eval_every`` updates and after the last one, in eval
    mode without gradients, and returns a dict of metrics; training stops early when
    ``stop_when(row)`` is true after one. With ``out_dir``, ``ckpt.pt`` (tagged with ``meta``),
    ``log.csv`` and ``log.json`` are written every ``checkpoint_every`` updates and at the end;
    ``resume=True`` continues from that checkpoint. ``stop_after=N`` stops after update N without
    a final checkpoint, as a crash would. ``device`` defaults to the model's. Under DDP
    (``dist``), rank 0 alone evaluates and writes; the logged loss is the mean over ranks.
    """
    dist, meta = dist or Dist(), dict(meta or {})
    if dist.enabled and (stop_when is not None or config.time_budget is not None):
        raise ValueError("stop_when and time_budget would stop DDP ranks at different steps")
    device = torch.device(device) if device is not None else next(model.parameters()).device
    out_dir = Path(out_dir) if out_dir is not None else None
    state = _resume_state(out_dir, resume, meta, dist)
    model.to(device)
    if state is None:
        seed_everything(config.seed)  # dropout's stream
    net = _wrap(model, config, dist, device)
    trainer = Trainer(model, config, loss_fn=loss_fn, device=device, net=net)
    history, start = _restore(trainer, state) if state is not None else (History(), 0)
    loop = _Loop(
        trainer, batch_at, history, dist=dist, evaluate=evaluate, out_dir=out_dir, meta=meta
    )
    bar = _bar(config, start, dist)
    model.train()
    step, done = start, loop.finished(start)
    while not done and (stop_after is None or step < stop_after):
        loop.one_step(step)
        step += 1
        bar.update(1)
        done = loop.finished(step)
        row = loop.at_step_end(step, last=done)
        if row is not None:
            bar.set_postfix({k: v for k, v in row.items() if k not in ("step", "seconds")})
        elif history.losses and step % config.log_every == 0:
            bar.set_postfix(loss=f"{history.losses[-1]:.4f}", refresh=False)
        if row is not None and stop_when is not None and stop_when(row) and not done:
            history.stopped_early = done = True
    loop.flush()
    loop.pause_clock()
    bar.close()
    return history
