"""How a run computes: bf16 autocast or fp32, compiled or eager. One function decides each.

:func:`uses_bf16` decides the precision (:func:`resolved_precision`: once per run, kept on
resume) and :func:`uses_compile` whether to compile; :func:`build_net` applies both decisions to
a model (wrapped in DDP when asked) and returns a :class:`Net` that records what it decided, so
no other code has to probe a compiled module.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import warnings
from dataclasses import dataclass

import torch
from torch import nn

from ..core.device import prefers_bf16

PRECISIONS = ("auto", "bf16", "fp32")
# A compile costs tens of seconds the first time on a machine (inductor builds its C++ kernels,
# then caches them); below these lengths the saving per step (docs/results/train_step.md) would
# not pay.
COMPILE_MIN_STEPS = 5000
COMPILE_MIN_SECONDS = 120.0


def uses_bf16(
    device: torch.device, precision: str, width: int | None = None, compiled: bool = False
) -> bool:
    """Whether the forward pass of a model ``width`` wide runs under bf16 autocast for
    ``precision`` on ``device`` (``compiled``: in a run that compiles it in bf16)."""
    return precision == "bf16" or (precision == "auto" and prefers_bf16(device, width, compiled))


def resolved_precision(
    device: torch.device,
    precision: str,
    width: int | None = None,
    saved: dict | None = None,
    compiled: bool = False,
) -> str:
    """``precision`` as a run computes it, ``"bf16"`` or ``"fp32"``: ``auto`` is decided once
    per run (``compiled``: for a run that compiles in bf16, :func:`compiles_in_bf16`) and, on a
    resume on the same kind of device, kept as the checkpoint's record of it (``saved``), so a
    continued run does not change precision because this process measured bf16 otherwise (a
    busy CPU's probe can)."""
    if precision != "auto":
        return precision
    if saved and saved.get("device") == device.type and saved.get("precision") in PRECISIONS[1:]:
        return saved["precision"]
    return "bf16" if uses_bf16(device, "auto", width, compiled) else "fp32"


def model_width(model: nn.Module) -> int | None:
    """The model's width (``config.n_embd``), which precision ``auto`` measures bf16 at."""
    return getattr(getattr(model, "config", None), "n_embd", None)


def run_precision(config, device: torch.device, width: int | None = None, saved=None) -> str:
    """The precision a run of ``config`` computes in, ``"bf16"`` or ``"fp32"``
    (:func:`resolved_precision`, knowing whether the run would compile in bf16)."""
    compiled = compiles_in_bf16(config, device)
    return resolved_precision(device, config.precision, width, saved, compiled)


def autocast_for(device: torch.device, precision: str, width: int | None = None):
    """The context a forward pass runs in: bf16 autocast or nothing (fp32). ``"auto"`` is bf16
    on CUDA GPUs with bf16 and on CPUs where bf16 measures faster at the model's ``width``, fp32
    elsewhere (:func:`course_utils.core.device.prefers_bf16`)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if not uses_bf16(device, precision, width):
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


def compiles_in_bf16(config, device: torch.device) -> bool:
    """Whether a run would compile its model if it trained in bf16: ``config.compile``, or by
    default where that measured faster with its compile time counted: on a CPU, for runs of at
    least :data:`COMPILE_MIN_STEPS` steps or :data:`COMPILE_MIN_SECONDS` of budget, and where a
    C++ compiler is installed for inductor."""
    if config.compile is not None:
        return config.compile
    long_run = (
        config.time_budget >= COMPILE_MIN_SECONDS
        if config.time_budget is not None
        else config.steps >= COMPILE_MIN_STEPS
    )
    return device.type == "cpu" and long_run and _has_cpp_compiler()


def uses_compile(config, device: torch.device, width: int | None = None) -> bool:
    """Whether a run compiles its model: ``config.compile``, or by default bf16 autocast on a
    CPU in a run long enough (:func:`compiles_in_bf16`)."""
    if config.compile is not None:
        return config.compile
    compiled = compiles_in_bf16(config, device)
    return compiled and uses_bf16(device, config.precision, width, compiled)


def compile_for(net: nn.Module, device: torch.device, *, fullgraph: bool = False) -> nn.Module:
    """``torch.compile`` of ``net`` for ``device``: on a CPU with inductor's C++ wrapper, which
    calls the graph's kernels from C++ rather than Python (faster, the compile no slower)."""
    options = {"cpp_wrapper": True} if device.type == "cpu" else None
    return torch.compile(net, fullgraph=fullgraph, options=options)


def _has_cpp_compiler() -> bool:
    """Whether inductor finds a C++ compiler to build its CPU kernels with."""
    return any(shutil.which(c) for c in (os.environ.get("CXX", "g++"), "g++", "clang++"))


@dataclass
class Net:
    """What runs the forward pass, and what was decided about it: ``module`` (compiled or
    not), ``eager`` (the same net uncompiled), ``compiled``, and ``automatic`` (the engine
    chose to compile, so a failing compile falls back to eager with a warning)."""

    module: nn.Module
    eager: nn.Module
    compiled: bool
    automatic: bool
    device: torch.device

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        try:
            return self.module(x)
        except Exception as err:
            from torch._dynamo.exc import BackendCompilerFailed

            if not (self.compiled and self.automatic and isinstance(err, BackendCompilerFailed)):
                raise
            warnings.warn(
                f"torch.compile failed, so this run trains uncompiled (compile=False or "
                f"--no-compile skips the attempt): {str(err).splitlines()[0]}",
                stacklevel=2,
            )
            self.module, self.compiled = self.eager, False
            return self.module(x)

    @contextlib.contextmanager
    def repeatable(self):
        """For a compiled net on a CPU, torch's deterministic mode through forward and backward,
        where inductor compiles them: it then builds scatter-adds (the embedding's backward)
        without atomic adds, whose order changes from run to run, so a seeded run repeats."""
        if not (self.compiled and self.device.type == "cpu"):
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


def build_net(model: nn.Module, config, device: torch.device, *, ddp: bool = False) -> Net:
    """The model as a run computes with it: wrapped in DDP when ``ddp``, then compiled where
    :func:`uses_compile` decides."""
    net = model
    if ddp:
        from torch.nn.parallel import DistributedDataParallel as DDP

        net = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    compiled = uses_compile(config, device, model_width(model))
    module = compile_for(net, device) if compiled else net
    return Net(module, net, compiled, automatic=config.compile is None, device=device)
