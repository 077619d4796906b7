"""The one training loop of the course: every optimizer step of every run happens here.

:class:`Trainer` is the trainer: it owns the model, the optimizer, the schedule, the precision
and compile decisions, the evaluation schedule, the logs, the checkpoints, resume and DDP; its
single update is :meth:`Trainer.train_step` and :meth:`Trainer.fit` runs the loop.
:func:`train` is the one-call form the lessons and projects use. A project supplies a model, a
``batch_at(step) -> (x, y)`` that draws on the CPU and depends on the step alone (so a resumed
run sees the same batches), a :class:`TrainConfig` and, optionally, an evaluation.

The pieces that are not the loop live in modules named for them: :mod:`.config`,
:mod:`.schedule`, :mod:`.optimizer`, :mod:`.policy` (precision and compile), :mod:`.stopping`,
:mod:`.history`, :mod:`.resume`, :mod:`.throughput`. Losses and gradient norms stay on the
device until a log point, so a step never waits for the GPU; a non-finite one stops the run at
that log point.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch
from torch import nn

from ..core.model import lm_loss
from ..core.modes import eval_mode
from ..core.seeding import seed_everything
from . import checkpoint as ckpt
from .config import RUN_FIELDS, TrainConfig
from .distributed import Dist, gather_to_all, mean_over_ranks, rank_seed, resumed_rng, shard
from .history import History
from .logs import write_logs
from .optimizer import (
    build_optimizer,
    clip_and_measure,
    configure_optimizer,
    set_lr,
    uses_fused_adamw,
)
from .policy import (
    PRECISIONS,
    Net,
    autocast_for,
    build_net,
    compile_for,
    model_width,
    run_precision,
    uses_bf16,
    uses_compile,
)
from .resume import model_config_dict, resume_state, run_record
from .schedule import lr_at, lr_at_progress
from .stopping import DeferredInterrupt, stop_reason
from .throughput import Throughput

__all__ = [
    "BAR_SECONDS", "PRECISIONS", "RUN_FIELDS", "History", "NonFiniteError", "TrainConfig",
    "Trainer", "autocast_for", "compile_for", "configure_optimizer", "lr_at", "lr_at_progress",
    "run_precision", "train", "uses_bf16", "uses_compile", "uses_fused_adamw",
]  # fmt: skip

# Seconds between progress-bar redraws. In a notebook each redraw sends widget messages, and
# nbval reads a cell's messages only once the cell has finished: ZMQ drops what overflows its
# queues (high-water marks), the end-of-cell message with it, and nbval then fails the cell with
# "Timeout ... exceeded waiting for output" (seen at tqdm's default redraw rate on a slow,
# one-thread run). One redraw a second keeps a long cell far below the limit.
BAR_SECONDS = 1.0
PLANNED_ENDS = ("steps", "time_budget")  # the reasons after which the run evaluates and saves

Batch = tuple[torch.Tensor, torch.Tensor]


class NonFiniteError(ValueError):
    """A loss or gradient norm became NaN or infinite; the message names the step."""


class Trainer:
    """One run: the model, its optimizer and schedule, how it computes, and everything the loop
    writes. :meth:`train_step` is the only place in the course an optimizer steps.

    ``batch_at``, ``evaluate``, ``stop_when``, ``out_dir``, ``meta``, ``resume`` and ``extend``
    are those of :func:`train`; a benchmark timing single steps needs none of them. ``net``
    replaces what runs forward (e.g. a model compiled with other options).
    """

    def __init__(
        self,
        model: nn.Module,
        config: TrainConfig,
        *,
        loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = lm_loss,
        device: str | torch.device | None = None,
        batch_at: Callable[[int], Batch] | None = None,
        evaluate: Callable[[nn.Module, int], dict] | None = None,
        stop_when: Callable[[dict], bool] | None = None,
        out_dir: str | Path | None = None,
        meta: dict | None = None,
        resume: bool = False,
        extend: bool = False,
        dist: Dist | None = None,
        net: nn.Module | None = None,
    ) -> None:
        self.dist = dist or Dist()
        if self.dist.enabled and (stop_when is not None or config.time_budget is not None):
            raise ValueError("stop_when and time_budget would stop DDP ranks at different steps")
        self.model, self.config, self.loss_fn = model, config, loss_fn
        self.width = model_width(model)  # where precision auto measures bf16
        self.device = torch.device(device) if device is not None else _device_of(model)
        self.batch_at, self.evaluate, self.stop_when = batch_at, evaluate, stop_when
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.meta = dict(meta or {})
        state = self._resume_state(resume, extend)
        saved = ((state or {}).get("run") or {}).get("resolved")
        self.precision = run_precision(config, self.device, self.width, saved)
        model.to(self.device)
        if state is None:
            seed_everything(rank_seed(config.seed, self.dist.rank))  # dropout's stream
        self.net = self._net(net)
        fused = uses_fused_adamw(config, self.device) or None
        self.optimizer = build_optimizer(model, config, fused=fused, device=self.device)
        self.history, self.start, self.schedule = History(), 0, config
        if state is not None:
            self.history, self.start = self._restore(state), state["step"]
            self.schedule = replace(config, **state["run"]["schedule"])  # extend keeps it
        self.pending: list[torch.Tensor] = []
        self.boundary = True  # between updates: weights, moments and RNG state agree
        self.check = getattr(model, "check_input", None)
        self.throughput = Throughput(model, config.peak_flops)
        self.saved_at = self.start if state is not None else -1
        if state is None and self.out_dir is not None:
            self.save(0)  # a good checkpoint to fall back on, even if the run soon diverges
        self.clock = time.perf_counter()
        self.throughput.restart(self.clock)

    # ---- setup --------------------------------------------------------------------------

    def _resume_state(self, resume: bool, extend: bool) -> dict | None:
        now = {
            "train": run_record(self.config, self.config),
            "model": model_config_dict(self.model),
            "meta": self.meta,
        }
        return resume_state(
            self.out_dir, resume=resume, extend=extend, now=now,
            project=self.meta.get("project"), main=self.dist.main,
        )  # fmt: skip

    def resolved(self) -> dict:
        """What this run decided where its config leaves a choice (precision ``auto``), on
        which kind of device: a resume keeps it."""
        return {"precision": self.precision, "device": self.device.type}

    def _net(self, net: nn.Module | None) -> Net:
        if net is None:
            config = replace(self.config, precision=self.precision)  # compile follows it
            return build_net(self.model, config, self.device, ddp=self.dist.enabled)
        return Net(net, self.model, net is not self.model, automatic=False, device=self.device)

    def _restore(self, state: dict) -> History:
        """Put a checkpoint's weights, optimizer moments and this rank's RNG state back (on
        another number of processes: :func:`~.distributed.resumed_rng`)."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        saved = state.get("rank_rng") or [state["rng"]]  # older files: rank 0's alone
        rng = resumed_rng(saved, self.dist, self.config.seed, state["step"])
        if isinstance(rng, int):
            torch.manual_seed(rng)  # dropout's stream (every CUDA device's too)
        else:
            ckpt.set_rng_state(rng)
        return History.from_dict(state["history"])

    # ---- one update ---------------------------------------------------------------------

    def set_lr(self, lr: float) -> None:
        set_lr(self.optimizer, lr)

    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Forward (under the config's precision), loss, backward, clipping and the optimizer
        update for one batch already on the device; returns ``[loss, grad_norm]`` as a device
        tensor: nothing is read back, so on a GPU the step never waits."""
        with self.net.repeatable():  # inductor compiles the backward lazily
            with autocast_for(self.device, self.precision, self.width):
                logits = self.net(x)
            loss = self.loss_fn(logits, y)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
        params = [p for p in self.model.parameters() if p.grad is not None]
        norm = clip_and_measure(params, self.config.grad_clip)
        self.optimizer.step()
        return torch.stack([loss.detach().float(), norm.detach().float()])

    def lr(self, step: int) -> float:
        if self.config.time_budget is None:
            return lr_at(step, self.schedule)
        return lr_at_progress(step, self.spent() / self.config.time_budget, self.schedule)

    def spent(self) -> float:
        return self.history.seconds + time.perf_counter() - self.clock

    def one_step(self, step: int) -> None:
        """Draw the batch of ``step``, move this rank's share to the device, update."""
        lr = self.lr(step)
        x, y = self.batch_at(step)
        if self.check is not None:
            self.check(x)  # on the CPU batch, before the transfer: no wait for a GPU
        self.throughput.count(x)
        if self.dist.enabled:
            x, y = shard(x, self.dist), shard(y, self.dist)
        if self.device.type == "cuda" and x.device.type == "cpu":  # page-locked: async copy
            x, y = x.pin_memory(), y.pin_memory()
        x = x.to(self.device, non_blocking=True)
        y = y.to(self.device, non_blocking=True)
        self.boundary = False  # from here to the end of the update, the state is half-changed
        self.set_lr(lr)
        self.history.lrs.append(lr)
        self.pending.append(self.train_step(x, y))
        self.boundary = True

    # ---- log points ---------------------------------------------------------------------

    def flush(self, check: bool = True) -> None:
        """Read the pending losses and norms back (one transfer, averaged over DDP ranks) and,
        with ``check``, stop the run at the first non-finite one."""
        if not self.pending:
            return
        values = mean_over_ranks(torch.stack(self.pending), self.dist).cpu()
        first = self.history.steps
        losses, norms = values[:, 0].tolist(), values[:, 1].tolist()
        self.history.losses += losses
        self.history.grad_norms += norms
        self.pending.clear()
        self.throughput.log(self.history, time.perf_counter())
        bad = next((i for i, v in enumerate(zip(losses, norms)) if not _finite(v)), None)
        if check and bad is not None:
            kept = f"; {self.out_dir} keeps the checkpoint of step {self.saved_at}" * (
                self.out_dir is not None and self.saved_at >= 0
            )
            raise NonFiniteError(
                f"step {first + bad + 1}: loss {losses[bad]} and gradient norm {norms[bad]} "
                f"(non-finite values), so the run stopped{kept}; lower the learning rate "
                f"({self.history.lrs[first + bad]:.3g} at that step) and train again"
            )

    def pause_clock(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.history.seconds += time.perf_counter() - self.clock

    def run_eval(self, step: int) -> dict:
        with eval_mode(self.model):
            metrics = dict(self.evaluate(self.model, step))
        row = {"step": step, "seconds": self.history.seconds, **metrics}
        self.history.evals.append(row)
        return row

    def save(self, step: int) -> None:
        """The checkpoint and logs of ``step`` (every rank sends its RNG state; rank 0 writes)."""
        rank_rng = gather_to_all(ckpt.rng_state(), self.dist)
        self.saved_at = step  # on every rank: they all decide the same way whether to save
        if self.out_dir is None or not self.dist.main:
            return
        ckpt.save_checkpoint(
            self.out_dir / ckpt.CHECKPOINT_NAME, self.model, optimizer=self.optimizer,
            step=step, history=self.history.to_dict(), meta=self.meta,
            run=run_record(self.config, self.schedule, self.resolved()), rank_rng=rank_rng,
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
        if save_due:
            self.save(done)
        self.clock = time.perf_counter()
        self.throughput.restart(self.clock)
        return row

    # ---- the loop -----------------------------------------------------------------------

    def fit(self, stop_after: int | None = None) -> History:
        """Train until :func:`~.stopping.stop_reason` says stop; then, whatever the way out
        (the end, an early stop, Ctrl-C, an error), save what was trained (:meth:`finish`).
        Ctrl-C takes effect at the end of the update in flight and is raised again after."""
        if self.batch_at is None:
            raise ValueError("Trainer.fit needs batch_at(step) -> (x, y); pass it to Trainer")
        bar = _bar(self.config, self.start, self.dist)
        self.model.train()
        step, reason = self.start, self.stop(self.start, stop_after, False)
        with DeferredInterrupt() as interrupt:
            try:
                while reason is None:
                    self.one_step(step)
                    step += 1
                    bar.update(1)
                    reason = self.stop(step, stop_after, interrupt.requested)
                    row = self.at_step_end(step, last=reason in PLANNED_ENDS)
                    reason = self.after_log_point(bar, step, row, reason)
            except BaseException as err:
                self.finish(step, "error", err)
                raise
            finally:
                bar.close()
            self.finish(step, reason, None)
        if reason == "interrupted":
            raise KeyboardInterrupt(f"training interrupted after step {step}; saved to resume")
        return self.history

    def stop(self, step: int, stop_after: int | None, interrupted: bool) -> str | None:
        return stop_reason(
            step, self.config, spent=self.spent(), interrupted=interrupted, stop_after=stop_after
        )

    def after_log_point(self, bar, step: int, row: dict | None, reason: str | None):
        """Show the log point on the bar; ``stop_when`` may end the run after an evaluation."""
        if row is not None:
            bar.set_postfix({k: v for k, v in row.items() if k not in ("step", "seconds")})
        elif self.history.losses and step % self.config.log_every == 0:
            bar.set_postfix(loss=f"{self.history.losses[-1]:.4f}", refresh=False)
        if reason is None and row is not None and self.stop_when and self.stop_when(row):
            self.history.stopped_early = True
            return "stop_when"
        return reason

    def finish(self, step: int, reason: str, err: BaseException | None) -> None:
        """Save on the way out: a final checkpoint at a step boundary, unless the run was made
        to stop as a crash would (``stop_after``) or went non-finite (the last good checkpoint
        stays); the logs in every case. Under DDP an error skips the collectives (a rank that
        failed alone would leave the others waiting)."""
        failed = isinstance(err, NonFiniteError)
        self.history.stop_reason = "non_finite" if failed else reason
        if err is not None and self.dist.enabled:
            return
        if not failed:
            self.flush(check=err is None)
        self.pause_clock()
        keep = self.boundary and not failed and reason != "stop_after" and self.saved_at != step
        if keep:
            self.save(step)
        elif self.out_dir is not None and self.dist.main and reason != "stop_after":
            write_logs(self.out_dir, self.history)


def _finite(values) -> bool:
    return all(math.isfinite(v) for v in values)


def _device_of(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def _bar(config: TrainConfig, start: int, dist: Dist):
    """The progress bar (rank 0 only; a widget in notebooks, redrawn once a second)."""
    from tqdm.auto import tqdm

    return tqdm(
        total=config.steps, initial=start, desc=config.desc, leave=True,
        disable=not (config.progress and dist.main), mininterval=BAR_SECONDS,
    )  # fmt: skip


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
    extend: bool = False,
) -> History:
    """Train ``model`` in place for ``config.steps`` updates and return its :class:`History`.

    ``batch_at(step)`` returns ``(x, y)`` on the CPU; ``loss_fn(model(x), y)`` is the loss.
    ``evaluate(model, step)`` runs every ``eval_every`` updates and after the last one, in eval
    mode without gradients, and returns a dict of metrics; training stops early when
    ``stop_when(row)`` is true after one. With ``out_dir``, ``ckpt.pt`` (tagged with ``meta``),
    ``log.csv`` and ``log.json`` are written every ``checkpoint_every`` updates and on the way
    out; ``resume=True`` continues from that checkpoint if it is the same run (``extend=True``
    lets ``steps`` grow). ``stop_after=N`` stops after update N without a final checkpoint, as
    a crash would. ``device`` defaults to the model's. Under DDP (``dist``), rank 0 alone
    evaluates and writes; the logged loss is the mean over ranks.
    """
    trainer = Trainer(
        model, config, loss_fn=loss_fn, device=device, batch_at=batch_at, evaluate=evaluate,
        stop_when=stop_when, out_dir=out_dir, meta=meta, resume=resume, extend=extend, dist=dist,
    )  # fmt: skip
    return trainer.fit(stop_after)
