"""Time to accuracy for SumGPT: train seed 003's model from scratch and time it to 99% / 99.9%.

    python benchmarks/sumgpt_time_to_accuracy.py [--steps 1200] [--batch-size 128] [--lr 1e-3]
        [--precision fp32|bf16] [--threads N] [--seed 0] [--eval-every 100] [--device cpu]

Exact match is measured on 10,000 held-out sums (pairs that never appear in training). Evaluating
10,000 sums costs about as much as 50 training steps, so every ``--eval-every`` steps the first
1,000 of them are scored and, only once those reach ``--screen`` (0.97), all 10,000. The wall
seconds in the table count training steps only (evaluation excluded); the total is printed below
it. Training stops at 99.9% unless ``--no-stop``; ``--steps`` sets the length of the cosine.

On a CPU shared with other programs, run it with ``OMP_WAIT_POLICY=PASSIVE``: with the default
(spinning) policy, two OpenMP threads wait for each other's time slices at every small op and a
step can take 3x longer.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

from course_utils.core.device import pick_device
from course_utils.core.model import GPT
from course_utils.core.seeding import build_model
from course_utils.engine.training import TrainConfig, train
from course_utils.projects.sumgpt import (
    DEFAULT_TRAIN,
    SumBatches,
    correct_answers,
    heldout_pairs,
    sumgpt_config,
)

THRESHOLDS = (0.99, 0.999)
N_EVAL = 10_000


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=DEFAULT_TRAIN["steps"])
    p.add_argument("--batch-size", type=int, default=DEFAULT_TRAIN["batch_size"])
    p.add_argument("--lr", type=float, default=DEFAULT_TRAIN["lr"])
    p.add_argument("--warmup", type=int, default=DEFAULT_TRAIN["warmup_steps"])
    p.add_argument("--weight-decay", type=float, default=DEFAULT_TRAIN["weight_decay"])
    p.add_argument("--min-lr-ratio", type=float, default=0.1)
    p.add_argument("--beta2", type=float, default=0.99)
    p.add_argument("--grad-clip", type=float, default=1.0)
    p.add_argument("--precision", choices=("auto", "bf16", "fp32"), default="fp32")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--screen", type=float, default=0.97)
    p.add_argument("--device", default="cpu")
    p.add_argument("--no-stop", action="store_true", help="train all --steps")
    p.add_argument("--progress", action="store_true", help="show a progress bar")
    p.add_argument("--verbose", action="store_true", help="print every evaluation")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    model = build_model(GPT, sumgpt_config(), seed=args.seed, device=device)
    a, b = heldout_pairs(N_EVAL, seed=1)

    def evaluate(net, step):
        quick = float(correct_answers(net, a[:1000], b[:1000]).float().mean())
        if quick < args.screen:
            if args.verbose:
                print(f"  step {step:>5}: exact match {quick:.3f} on the first 1,000", flush=True)
            return {"screen_1k": quick}
        full = float(correct_answers(net, a, b).float().mean())
        print(f"  step {step:>5}: exact match {full:.4f} on {N_EVAL:,}", flush=True)
        return {"screen_1k": quick, "exact_match": full}

    config = TrainConfig(
        steps=args.steps,
        lr=args.lr,
        warmup_steps=min(args.warmup, args.steps),
        weight_decay=args.weight_decay,
        min_lr_ratio=args.min_lr_ratio,
        betas=(0.9, args.beta2),
        grad_clip=args.grad_clip if args.grad_clip > 0 else None,
        eval_every=args.eval_every,
        precision=args.precision,
        seed=args.seed,
        progress=args.progress,
        desc="SumGPT",
    )
    stop = None if args.no_stop else (lambda row: row.get("exact_match", 0.0) >= THRESHOLDS[-1])
    started = time.perf_counter()
    history = train(
        model,
        SumBatches(args.batch_size, seed=args.seed),
        config,
        evaluate=evaluate,
        stop_when=stop,
        device=device,
    )
    total = time.perf_counter() - started
    ms_per_step = 1000 * history.seconds / history.steps

    print()
    print(f"SumGPT time to accuracy (exact match on {N_EVAL:,} held-out sums)")
    print(f"{'target':>8} | {'steps':>6} | {'train wall s':>12} | {'examples':>9}")
    print(f"{'-' * 8}-+-{'-' * 6}-+-{'-' * 12}-+-{'-' * 9}")
    for threshold in THRESHOLDS:
        row = history.first_step_reaching("exact_match", threshold)
        if row is None:
            print(f"{threshold:>8.1%} | {'-':>6} | {'not reached':>12} | {'-':>9}")
        else:
            examples = row["step"] * args.batch_size
            line = f"{threshold:>8.1%} | {row['step']:>6,} | {row['seconds']:>12.1f} | "
            print(line + f"{examples:>9,}")
    best = max((e.get("exact_match", 0.0) for e in history.evals), default=0.0)
    print()
    print(f"ms per step: {ms_per_step:.1f} (batch {args.batch_size}, {history.steps:,} steps run)")
    print(f"best exact match: {best:.4f}; total wall incl. evaluation: {total:.1f} s")
    wait_policy = os.environ.get("OMP_WAIT_POLICY", "unset")
    print(
        "settings: d_model 128, 4 heads, 4 blocks, context 12 (796,544 parameters); "
        f"AdamW lr {args.lr:g} betas (0.9, {args.beta2:g}) weight decay {args.weight_decay:g} "
        f"(matrices only); warmup {config.warmup_steps} + cosine to {args.min_lr_ratio:g}x over "
        f"{args.steps:,} steps; clip {args.grad_clip:g}; batch {args.batch_size}; "
        f"{args.precision}; device {device.type}; torch threads {torch.get_num_threads()}; "
        f"{os.cpu_count()} CPUs visible; OMP_WAIT_POLICY {wait_policy}; "
        f"seed {args.seed}; torch {torch.__version__}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
