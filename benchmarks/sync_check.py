"""Check that the training loop's hot path never waits for the GPU (run by .ci/gpu_check).

    python benchmarks/sync_check.py [--steps 20]

Builds SumGPT's and BookGPT's ``cpu`` models on CUDA and runs ``--steps`` updates of the
engine's step (batch drawn on the CPU, ids checked there, copied to the GPU, forward, loss,
backward, clipping, fused AdamW) under ``torch.cuda.set_sync_debug_mode("error")``: any host
synchronization raises. Log points, which read the losses back on purpose, are outside it.
"""

from __future__ import annotations

import argparse
import sys

import torch

from course_utils import GPT, build_model
from course_utils.engine.training import Trainer
from course_utils.projects import bookgpt, sumgpt


def hot_path(model, batch_at, config, steps: int) -> None:
    """``steps`` updates of the engine's loop with every host sync an error."""
    loop = Trainer(model, config, device=torch.device("cuda"), batch_at=batch_at)
    loop.one_step(0)  # warm-up: allocations and kernel selection may synchronize once
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for step in range(1, steps + 1):
            loop.one_step(step)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    loop.flush()
    assert len(loop.history.losses) == steps + 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=20)
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    if not torch.cuda.is_available():
        print("error: no CUDA device: this check is for a GPU machine", file=sys.stderr)
        return 2
    model = build_model(GPT, sumgpt.sumgpt_config(), seed=0, device="cuda")
    hot_path(model, sumgpt.SumBatches(128), sumgpt.train_config(), args.steps)
    cfg = bookgpt.get_config("cpu")
    model = build_model(GPT, cfg.gpt_config(77), seed=0, device="cuda")

    def batch_at(step):
        ids = torch.randint(77, (cfg.batch_size, cfg.block_size + 1),
                            generator=torch.Generator().manual_seed(step))  # fmt: skip
        return ids[:, :-1], ids[:, 1:]

    hot_path(model, batch_at, cfg.train_config(progress=False), args.steps)
    print(f"no host sync in {args.steps} steps of SumGPT and of BookGPT cpu (sync debug: error)")
    return 0


if __name__ == "__main__":
    import record  # a sibling module: --results FILE records the tables

    sys.exit(record.run(main))
