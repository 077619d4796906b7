"""One way to run a model for evaluation: eval mode (no dropout) and no gradients, then restore."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn


@contextlib.contextmanager
def eval_mode(model: nn.Module, no_grad: bool = True) -> Iterator[nn.Module]:
    """``with eval_mode(model):`` runs the block with ``model.eval()`` (and, by default, under
    ``torch.no_grad()``), then puts the model back in the mode it was in, even after an error."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad() if no_grad else contextlib.nullcontext():
            yield model
    finally:
        model.train(was_training)
