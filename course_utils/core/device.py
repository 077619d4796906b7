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


def has_bf16_matmul(device: str | torch.device) -> bool:
    """Whether ``device`` multiplies bf16 matrices in hardware much faster than fp32: CUDA GPUs
    that support bf16, and CPUs with AMX tiles (recent Intel Xeons; about 10x on 2 cores here).
    Elsewhere bf16 autocast only adds casts, so training stays in fp32."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        amx = getattr(torch.cpu, "_is_amx_tile_supported", None)  # torch's own CPU probe
        return bool(amx()) if amx is not None else False
    return False
