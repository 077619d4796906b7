"""Pick the compute device (an explicit choice, then $COURSE_DEVICE, then cuda, mps, cpu) and
say what it is good at (bf16 matrix units)."""

from __future__ import annotations

import os

import torch

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


def prefers_bf16(device: str | torch.device) -> bool:
    """Whether precision ``"auto"`` trains on ``device`` under bf16 autocast: on CUDA GPUs that
    support bf16, and on CPUs with AMX tiles, where it measured faster
    (``benchmarks/train_step.py``; the figures are the README's results). CPUs without AMX
    multiply bf16 no faster than fp32 and pay for the casts, so they stay in fp32."""
    device = torch.device(device)
    if device.type == "cpu":
        return has_amx()
    return device.type == "cuda" and torch.cuda.is_available() and torch.cuda.is_bf16_supported()
