"""What the mask buys SumGPT: the masked and the unmasked model side by side, per seed.

    python benchmarks/sumgpt_masking.py [--seeds 0-7] [--steps 2000]

For each seed both models train with the recipe of ``sumgpt train`` (batch 128, AdamW beta2 0.95,
fp32) on the same batches; only the targets differ (unmasked: all 12 count). The table gives each
one's exact match on lesson 11's 1000 test sums and its loss on the answer positions after the
same number of steps. Lesson 11 quotes the spread; it is why the lesson makes no claim about
learning speed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from course_utils import GPT, build_model, train
from course_utils.projects import sumgpt

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sumgpt_time_to_accuracy import parse_seeds  # noqa: E402  (a sibling benchmark script)


def answers_loss(model, x, y) -> float:
    with torch.no_grad():
        return float(F.cross_entropy(model.eval()(x).flatten(0, 1), y.flatten()))


def run_seed(seed: int, steps: int, a, b) -> dict:
    """Exact match and answer loss of the masked and the unmasked model of one seed."""
    x, y = sumgpt.make_batch(a, b, mask=True)
    out = {}
    for mask in (True, False):
        model = build_model(GPT, sumgpt.sumgpt_config(), seed=seed, device="cpu")
        config = sumgpt.train_config(steps, seed=seed, progress=False)
        train(model, sumgpt.SumBatches(128, seed=seed, mask=mask), config)
        out[mask] = (sumgpt.exact_match(model, a, b), answers_loss(model, x, y))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", default="0-7")
    p.add_argument("--steps", type=int, default=sumgpt.DEFAULT_TRAIN["steps"])
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    a, b = sumgpt.heldout_pairs(1000, seed=0)  # lesson 11's test sums
    print("| seed | masked: exact match | answer loss | unmasked: exact match | answer loss |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for seed in parse_seeds(args.seeds):
        r = run_seed(seed, args.steps, a, b)
        print(f"| {seed} | {r[True][0]:.1%} | {r[True][1]:.4f} | {r[False][0]:.1%} | "
              f"{r[False][1]:.4f} |", flush=True)  # fmt: skip
    print(
        f"\n{args.steps:,} steps each, {torch.get_num_threads()} threads, torch {torch.__version__}"
    )
    return 0


if __name__ == "__main__":
    import record  # a sibling module: --results FILE records the tables

    sys.exit(record.run(main))
