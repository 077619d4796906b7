"""Pick the compute device and seed every random number generator, the same way everywhere.

Randomness is always drawn on the CPU and moved to the device afterwards, so a seeded model or
batch is the same on a laptop and on a GPU (up to floating-point error in what is computed).
"""

from __future__ import annotations

import os
import random

import numpy as np
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


def seed_everything(seed: int) -> torch.Generator:
    """Seed python, numpy and torch; return a CPU generator seeded the same, for explicit use."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
    return torch.Generator().manual_seed(seed)


def build_model(model_cls, config, seed: int = 0, device: str | torch.device | None = None):
    """Construct ``model_cls(config)`` on the CPU under ``seed``, then move it to the device."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_cls(config)
    return model.to(device if device is not None else pick_device())


def randint(high: int, size: tuple[int, ...], seed: int, device=None) -> torch.Tensor:
    """Seeded integers in [0, high), drawn on the CPU and then moved to ``device``."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(high, size, generator=g).to(device if device is not None else "cpu")


def randn(*size: int, seed: int, device=None) -> torch.Tensor:
    """Seeded standard-normal values, drawn on the CPU and then moved to ``device``."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*size, generator=g).to(device if device is not None else "cpu")
