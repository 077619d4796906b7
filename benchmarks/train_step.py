"""Milliseconds per training step of the engine's variants, measured side by side in one run.

    python benchmarks/train_step.py [--model cpu|sumgpt] [--rounds 7] [--steps 20] [--threads N]
        [--variants eager,fused,compile,compile-fused,bf16,hf,hf-fused]

Every variant is a fresh model (BookGPT's ``cpu`` configuration by default: d 64, 4 heads, 3
blocks, context 64, batch 32; ``--model sumgpt``: SumGPT's d 128, 4 blocks, context 12, batch
128) trained by the engine's :class:`Trainer` on the same batches. After
a warm-up (for compiled variants: the compile, whose time is reported), the variants take turns:
round r runs ``--steps`` updates of each variant in a row, so a busy machine slows them all
alike; the table shows the median over rounds and the range. Variants:

* ``eager``: the model as written, ``torch.optim.AdamW`` for-each (torch's default);
* ``fused``: the same with ``AdamW(fused=True)``;
* ``compile`` / ``compile-fused``: ``torch.compile`` of the model as the engine compiles it
  (``compile_for``: on a CPU with inductor's C++ wrapper; ``fullgraph=True``: a graph break
  fails the variant), for-each / fused AdamW;
* ``bf16`` / ``compile-bf16``: bf16 autocast, eager / compiled (fused AdamW); ``-explicit``:
  the same built with ``attention="explicit"`` (matmuls and a masked softmax). On a CPU the
  model takes that path under bf16 anyway (SDPA's bf16 backward is slow there), so the two
  differ only on a GPU;
* ``hf`` / ``hf-fused``: Hugging Face's ``GPT2LMHeadModel`` at the same shape with the same
  weights (``benchmarks/bookgpt_train.py``), for-each / fused AdamW.

Batches are random token windows drawn on the CPU (the speed does not depend on the text).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cpu_classes  # noqa: E402  (a sibling module)
from bookgpt_train import HFGPT2  # noqa: E402  (a sibling benchmark script)

from course_utils import GPT, build_model  # noqa: E402
from course_utils.engine.training import Trainer, compile_for  # noqa: E402
from course_utils.projects.bookgpt import get_config  # noqa: E402

VARIANTS = {  # name: (implementation, compile, fused AdamW, precision[, attention path])
    "eager": ("ours", False, False, "fp32"),
    "fused": ("ours", False, True, "fp32"),
    "compile": ("ours", True, False, "fp32"),
    "compile-fused": ("ours", True, True, "fp32"),
    "bf16": ("ours", False, True, "bf16"),
    "compile-bf16": ("ours", True, True, "bf16"),
    "bf16-explicit": ("ours", False, True, "bf16", "explicit"),
    "compile-bf16-explicit": ("ours", True, True, "bf16", "explicit"),
    "hf": ("hf", False, False, "fp32"),
    "hf-fused": ("hf", False, True, "fp32"),
}
VOCAB = 77  # the KJV corpus's vocabulary size


@dataclass(frozen=True)
class Shape:
    """What a variant trains: a model config, its batch and the engine's settings."""

    name: str
    gpt_config: object
    batch_size: int
    block_size: int
    train_config: object


def shape_of(model: str) -> Shape:
    """``cpu`` (or another BookGPT configuration) or ``sumgpt`` (lesson 11's adder)."""
    if model == "sumgpt":
        from course_utils.projects import sumgpt

        return Shape("sumgpt", sumgpt.sumgpt_config(), sumgpt.DEFAULT_TRAIN["batch_size"],
                     sumgpt.BLOCK_SIZE, sumgpt.train_config())  # fmt: skip
    cfg = get_config(model, dropout=0.0)
    return Shape(f"bookgpt {cfg.name}", cfg.gpt_config(VOCAB), cfg.batch_size, cfg.block_size,
                 cfg.train_config(progress=False))  # fmt: skip


def trainer_for(name: str, shape: Shape, device) -> Trainer:
    impl, compiled, fused, precision, *attention = VARIANTS[name]
    gpt_config = (
        replace(shape.gpt_config, attention=attention[0]) if attention else shape.gpt_config
    )
    model = build_model(GPT, gpt_config, seed=0, device="cpu")
    if impl == "hf":
        model = HFGPT2(gpt_config).load_from(model)
    model.to(device)
    tc = replace(shape.train_config, precision=precision, fused=fused, progress=False)
    tc = replace(tc, compile=False)  # the variant says; the engine's rule would compile bf16
    net = compile_for(model, device, fullgraph=True) if compiled else None
    return Trainer(model, tc, device=device, net=net)


def batch(shape: Shape, step: int):
    g = torch.Generator().manual_seed(step)
    vocab = shape.gpt_config.vocab_size
    ids = torch.randint(vocab, (shape.batch_size, shape.block_size + 1), generator=g)
    return ids[:, :-1], ids[:, 1:]


def run_steps(trainer: Trainer, shape: Shape, start: int, n: int) -> float:
    """Seconds for ``n`` updates."""
    began = time.perf_counter()
    for step in range(start, start + n):
        x, y = batch(shape, step)
        trainer.train_step(x.to(trainer.device), y.to(trainer.device))
    if trainer.device.type == "cuda":
        torch.cuda.synchronize(trainer.device)
    return time.perf_counter() - began


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="cpu", help="a bookgpt configuration, or sumgpt")
    p.add_argument("--variants", default="eager,fused,compile,compile-fused,bf16,hf,hf-fused")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--steps", type=int, default=20, help="updates per variant per round")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--device", default="cpu")
    cpu_classes.add_option(p)
    return p.parse_args(argv)


def main(argv=None) -> int:
    args, per_class = cpu_classes.start(parse, argv)
    if per_class is not None:
        return per_class
    names = [n.strip() for n in args.variants.split(",") if n.strip()]
    unknown = sorted(set(names) - set(VARIANTS))
    if unknown:
        print(f"error: unknown variants {unknown}; choose from {list(VARIANTS)}", file=sys.stderr)
        return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    shape, device = shape_of(args.model), torch.device(args.device)
    trainers, warmup = {}, {}
    for name in names:
        trainers[name] = trainer_for(name, shape, device)
        warmup[name] = run_steps(trainers[name], shape, 0, 3)  # compiles the compiled ones
    times = {name: [] for name in names}
    for r in range(args.rounds):
        for name in names:
            start = 3 + r * args.steps
            seconds = run_steps(trainers[name], shape, start, args.steps)
            times[name].append(1000 * seconds / args.steps)
    print(
        f"{shape.name} step (batch {shape.batch_size} x {shape.block_size}), {device}, "
        f"{torch.get_num_threads()} threads, {args.rounds} alternating rounds of {args.steps}"
    )
    print(cpu_classes.auto_line(device, shape.gpt_config.n_embd))
    print("| variant | ms/step (median) | range | first 3 steps incl. compile (s) |")
    print("| --- | ---: | ---: | ---: |")
    for name in names:
        t = times[name]
        print(f"| {name} | {statistics.median(t):.1f} | {min(t):.1f}-{max(t):.1f} | "
              f"{warmup[name]:.1f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    import record  # a sibling module: --results FILE records the tables

    sys.exit(record.run(main))
