"""Training batches as a function of the step: random windows of a token array, drawn on a CPU
generator seeded from ``(seed, step)`` alone, so a resumed run draws exactly the batches an
uninterrupted one would, on every machine. Lessons, SumGPT and BookGPT all draw here."""

from __future__ import annotations

import numpy as np
import torch

SEED_STRIDE = 1_000_003  # a prime: (seed, step) pairs map to distinct generator seeds


def mixed_seed(seed: int, step: int) -> int:
    """The generator seed of ``step`` in a run seeded ``seed``."""
    return seed * SEED_STRIDE + step


def step_generator(seed: int, step: int) -> torch.Generator:
    """A CPU generator seeded for ``step`` of a run seeded ``seed``."""
    return torch.Generator().manual_seed(mixed_seed(seed, step))


def get_batch(
    data: np.ndarray, batch_size: int, block_size: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch_size`` random windows of ``block_size + 1`` tokens from ``data`` (a memmap or
    any 1-D integer array), start positions drawn on ``generator`` (a seeded CPU
    ``torch.Generator``: the same seed gives the same batches on every machine). Returns
    ``(x, y)``, int64 CPU tensors of shape ``(batch_size, block_size)`` with ``y`` = ``x``
    shifted one to the left: ``y[b, t]`` is the token after ``x[b, t]``. Move them with
    ``.to(device)``."""
    if not isinstance(generator, torch.Generator) or generator.device.type != "cpu":
        raise ValueError(
            "generator must be a CPU torch.Generator, e.g. torch.Generator().manual_seed(0)"
        )
    if batch_size < 1 or block_size < 1:
        raise ValueError(f"batch_size and block_size must be >= 1, got {batch_size}, {block_size}")
    if len(data) <= block_size:
        raise ValueError(
            f"the split holds {len(data)} tokens, too few for a window of {block_size} + 1"
        )
    starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
    index = starts.numpy()[:, None] + np.arange(block_size + 1)
    chunk = torch.from_numpy(np.asarray(data[index], dtype=np.int64))
    return chunk[:, :-1], chunk[:, 1:]


def batch_at(
    data: np.ndarray, batch_size: int, block_size: int, seed: int, step: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch of training step ``step``: :func:`get_batch` on :func:`step_generator`."""
    return get_batch(data, batch_size, block_size, step_generator(seed, step))
