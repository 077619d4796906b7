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


def prefers_bf16(device: str | torch.device) -> bool:
    """Whether precision ``"auto"`` trains on ``device`` under bf16 autocast: on CUDA GPUs that
    support bf16, not on CPUs. Even on a Xeon with AMX tiles, which multiply large bf16 matrices
    about 3.5x faster than fp32, BookGPT's ``cpu`` model (width 64) trained 15% fewer tokens per
    second in bf16 and SumGPT (width 128) only 8% more (``benchmarks/train_step.py``, the
    README's results): the matrices are too small to pay for autocast's casts."""
    device = torch.device(device)
    return device.type == "cuda" and torch.cuda.is_available() and torch.cuda.is_bf16_supported()
