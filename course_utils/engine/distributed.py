"""PyTorch DDP under ``torchrun``: the rank layout, process-group setup, batch sharding and the
per-rank seed.

``torchrun --nproc_per_node N`` starts N processes with RANK, WORLD_SIZE and LOCAL_RANK in the
environment; :func:`dist_from_env` reads them (one plain process is rank 0 of 1). Each rank
trains on its own slice of the same global batch (:func:`shard`), DDP averages the gradients,
and each draws dropout from a stream of its own (:func:`rank_seed`). A resume gives every rank
back the stream it saved; on more processes than were saved, a new rank starts a stream of its
own (:func:`resumed_rng`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from ..core.batching import mixed_seed


@dataclass(frozen=True)
class Dist:
    """This process's place in a DDP run (the defaults: a single process)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world > 1

    @property
    def main(self) -> bool:
        """Rank 0 alone evaluates, prints and writes files."""
        return self.rank == 0


def dist_from_env() -> Dist:
    """The rank layout torchrun puts in the environment (one process: rank 0 of 1)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    return Dist(int(os.environ.get("RANK", "0")), world, int(os.environ.get("LOCAL_RANK", "0")))


def wants_cuda(device) -> bool:
    """Whether a run that asked for ``device`` (None: the best available) trains on CUDA."""
    if device is None:
        return torch.cuda.is_available()
    return torch.device(device).type == "cuda"


def rank_device(dist: Dist, device) -> torch.device:
    """The device of this rank: its own GPU (cuda:LOCAL_RANK) on CUDA, else the CPU."""
    if wants_cuda(device):
        chosen = torch.device(f"cuda:{dist.local_rank}")
        torch.cuda.set_device(chosen)
        return chosen
    return torch.device("cpu")


@contextlib.contextmanager
def process_group(dist: Dist, device) -> Iterator[None]:
    """Join the DDP process group for the block (nccl on CUDA, gloo on the CPU) when ``dist``
    has several ranks; a single process does nothing."""
    if not dist.enabled:
        yield
        return
    import torch.distributed as tdist

    tdist.init_process_group(backend="nccl" if wants_cuda(device) else "gloo")
    try:
        yield
    finally:
        tdist.destroy_process_group()


def shard(x: torch.Tensor, dist: Dist) -> torch.Tensor:
    """This rank's rows of a global batch (equal slices; rank r gets slice r)."""
    if x.size(0) % dist.world:
        raise ValueError(
            f"the global batch {x.size(0)} does not split evenly over {dist.world} processes; "
            f"choose a batch size divisible by {dist.world}"
        )
    per = x.size(0) // dist.world
    return x[dist.rank * per : (dist.rank + 1) * per]


def mean_over_ranks(t: torch.Tensor, dist: Dist) -> torch.Tensor:
    """``t`` averaged over all ranks (unchanged for one process)."""
    if not dist.enabled:
        return t
    import torch.distributed as tdist

    t = t.clone()
    tdist.all_reduce(t)
    return t / dist.world


def rank_seed(seed: int, rank: int) -> int:
    """The torch seed (dropout's stream) of ``rank`` in a run seeded ``seed``: rank 0 keeps the
    run's seed, so one process trains as before; every other rank gets its own stream, so the
    ranks draw different dropout masks. The data order is not seeded here: it stays global."""
    return seed if rank == 0 else mixed_seed(seed, rank) % 2**63


def resume_seed(seed: int, rank: int, step: int) -> int:
    """The dropout seed of ``rank`` when a run resumed at ``step`` on more processes than it
    saved: the checkpoint holds no stream for that rank, so it starts one of its own, unlike
    every other rank's and the same on every resume of that checkpoint."""
    return mixed_seed(rank_seed(seed, rank), step) % 2**63


def resumed_rng(saved: list, dist: Dist, seed: int, step: int) -> dict | int:
    """What ``dist``'s rank draws dropout from after a resume at ``step``: the RNG state the
    checkpoint ``saved`` for that rank (each rank's, in rank order), or, where the run now has
    more processes than it saved, a seed of its own (:func:`resume_seed`). On the same number
    of processes a resumed run draws what an uninterrupted one would."""
    if dist.rank < len(saved):
        return saved[dist.rank]
    return resume_seed(seed, dist.rank, step)


def gather_to_all(obj, dist: Dist) -> list:
    """``obj`` of every rank, in rank order (``[obj]`` for one process)."""
    if not dist.enabled:
        return [obj]
    import torch.distributed as tdist

    out = [None] * dist.world
    tdist.all_gather_object(out, obj)
    return out
