"""Pick the compute device (an explicit choice, then $COURSE_DEVICE, then cuda, mps, cpu) and
say what it is good at (bf16 where it measures faster)."""

from __future__ import annotations

import os

import torch

from . import cpu

DEVICE_ENV = "COURSE_DEVICE"


def pick_device(preferred: str | None = None) -> torch.device:
    """``preferred``, else $COURSE_DEVICE, else cuda, then mps, then cpu."""
    choice = preferred or os.environ.get(DEVICE_ENV)
    if choice:
        device = torch.device(choice)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(
                f"device {choice!r} was asked for but torch.cuda.is_available() is False: "
                f"unset {DEVICE_ENV} or install a CUDA build of torch"
            )
        if device.type == "mps" and not torch.backends.mps.is_available():
            raise ValueError(f"device {choice!r} was asked for but MPS is not available")
        return device
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def has_amx() -> bool:
    """Whether this CPU has Intel's AMX tiles (bf16 matrix units: Xeon Sapphire Rapids and
    later). Private in torch, so read defensively: an older torch without it means no."""
    probe = getattr(torch.cpu, "_is_amx_tile_supported", None)
    try:
        return bool(probe()) if probe is not None else False
    except RuntimeError:
        return False


def prefers_bf16(
    device: str | torch.device, width: int | None = None, compiled: bool = False
) -> bool:
    """Whether precision ``"auto"`` trains on ``device`` under bf16 autocast: on CUDA GPUs that
    support bf16; on a CPU, where bf16 matmuls measure faster than fp32 at the model's
    ``width`` (:func:`cpu_prefers_bf16`; ``compiled``: for a run that compiles its model)."""
    device = torch.device(device)
    if device.type == "cpu":
        return cpu_prefers_bf16(width, compiled)
    return device.type == "cuda" and torch.cuda.is_available() and torch.cuda.is_bf16_supported()


def cpu_prefers_bf16(width: int | None = None, compiled: bool = False) -> bool:
    """bf16 on this CPU only where it has bf16 units (AMX, AVX512_BF16, or a class the course
    does not know) and a short probe at ``width`` finds bf16 autocast faster than fp32 (by
    ``cpu.FAST_ENOUGH``; for a run that compiles, ``cpu.COMPILED_ENOUGH``: no slower); never
    on AVX2 or AVX-512 without bf16, where bf16 is emulated and many times slower."""
    if cpu.cpu_class() in cpu.NO_BF16_CLASSES:
        return False
    probe = cpu.bf16_probe(width or cpu.DEFAULT_WIDTH)
    return probe.faster or (compiled and probe.speedup >= cpu.COMPILED_ENOUGH)


def precision_reason(device: str | torch.device, width: int | None = None) -> str:
    """One line on what precision ``"auto"`` picks on ``device`` and why."""
    device = torch.device(device)
    if device.type != "cpu":
        verdict = "bf16" if prefers_bf16(device) else "fp32"
        return f"precision auto is {verdict} on {device} (bf16 where the GPU supports it)"
    cls = cpu.cpu_class()
    if cls in cpu.NO_BF16_CLASSES:
        return f"precision auto is fp32 on this {cls} CPU (no bf16 units: bf16 is emulated, slow)"
    return cpu.describe(cpu.bf16_probe(width or cpu.DEFAULT_WIDTH))
