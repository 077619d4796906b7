"""Seeded randomness that is the same on every machine: draw on the CPU, then move.

A seeded model or batch is then identical on a laptop and on a GPU (up to floating-point error in
what is later computed with it), because no device-specific generator is ever involved.
"""

from __future__ import annotations

import random

import numpy as np
import torch

from .device import pick_device


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
