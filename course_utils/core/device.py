"""Pick the compute device: an explicit choice, then $COURSE_DEVICE, then cuda, mps, cpu."""

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
