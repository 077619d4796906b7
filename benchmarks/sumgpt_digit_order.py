"""Does reversing the answer's digits help SumGPT learn? Reversed and plain order side by side.

    python benchmarks/sumgpt_digit_order.py [--seeds 0-7] [--steps 2000] [--eval-every 100]
        [--threads 1] [--jobs N] [--out results/sumgpt_digit_order.md]

The FLOPs/SumGPT/BookGPT write-up writes the sum's digits in reverse "because this aligns the carry
operation with the autoregressive direction of the model". Lesson 11 proves the carry rule; this
measures the claim: for each seed, the same model (the same initial weights), the same recipe
(lesson 11's: ``sumgpt.RECIPES["lesson"]``, fp32, eager) and the same pairs of operands in the same
order are trained twice, once with the answer's digits reversed and once in plain order. The counts
move a little between CPU classes, whose kernels round differently (seed 0 reversed: 1,400 / 1,500
updates on an AMX Xeon, 1,200 / 1,500 emulated as AVX2). Every ``--eval-every`` steps the first
1,000 of 10,000 held-out sums are scored and, once those reach 97%, all 10,000 (each order scored
in its own format). The table gives the first update at which each order reached 99% and 99.9%
exact match ("-": not within the schedule). Update counts do not depend on the machine's load, so
it can run beside other work, and ``--jobs`` runs that many trainings at once (one process each,
``--threads`` threads each). ``--out`` also writes the table, with the host, CPU class, torch and
date, to a file, rewritten as each seed completes (so an interrupted sweep keeps the seeds it
finished).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import multiprocessing
import platform
import statistics
import sys
from pathlib import Path

import torch

from course_utils import GPT, build_model, train
from course_utils.core import cpu
from course_utils.projects import sumgpt

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sumgpt_time_to_accuracy import THRESHOLDS, parse_seeds  # noqa: E402  (a sibling script)

N_EVAL = 10_000
SCREEN = 0.97
ORDERS = {"reversed": True, "plain": False}


def order_evaluation(reverse: bool):
    """Exact match in one digit order on the first 1,000 held-out sums, and on all 10,000 once
    those reach ``SCREEN``."""
    a, b = sumgpt.heldout_pairs(N_EVAL, seed=1)

    def evaluate(model, step):
        quick = float(sumgpt.correct_answers(model, a[:1000], b[:1000], reverse).float().mean())
        if quick < SCREEN:
            return {"screen_1k": quick}
        return {"screen_1k": quick, "exact_match": sumgpt.exact_match(model, a, b, reverse)}

    return evaluate


def run_seed(seed: int, reverse: bool, steps: int, eval_every: int, threads: int = 1) -> dict:
    """One seed in one order: the first update at each threshold, and the best exact match."""
    torch.set_num_threads(threads)
    recipe = sumgpt.get_recipe("lesson")
    model = build_model(GPT, recipe.model, seed=seed, device="cpu")
    config = sumgpt.train_config(
        steps, seed=seed, precision="fp32", compile=False, eval_every=eval_every, progress=False
    )
    history = train(
        model, sumgpt.SumBatches(recipe.batch_size, seed=seed, reverse=reverse), config,
        evaluate=order_evaluation(reverse),
        stop_when=lambda row: row.get("exact_match", 0.0) >= THRESHOLDS[-1],
    )  # fmt: skip
    reached = {}
    for t in THRESHOLDS:
        row = history.first_step_reaching("exact_match", t)
        reached[t] = None if row is None else row["step"]
    best = max((e.get("exact_match", e.get("screen_1k", 0.0)) for e in history.evals), default=0)
    return {"reached": reached, "best": best}


def fmt(step: int | None) -> str:
    return "-" if step is None else f"{step:,}"


def table(results: dict[int, dict[str, dict]], steps: int) -> str:
    """The Markdown table: per seed, each order's updates to 99% and 99.9%, then the medians
    (a seed that missed counts as beyond the schedule)."""
    lines = [
        "| seed | reversed: 99% | reversed: 99.9% | plain: 99% | plain: 99.9% |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for seed, r in results.items():
        cells = [fmt(r[o]["reached"][t]) for o in ORDERS for t in THRESHOLDS]
        lines.append(f"| {seed} | " + " | ".join(cells) + " |")
    medians = []
    for order in ORDERS:
        for t in THRESHOLDS:
            got = [r[order]["reached"][t] for r in results.values()]
            value = statistics.median(x if x is not None else float("inf") for x in got)
            missed = sum(x is None for x in got)
            text = f">{steps:,}" if value == float("inf") else f"{value:,.0f}"
            medians.append(text + (f" ({missed} missed)" if missed else ""))
    lines.append("| median | " + " | ".join(medians) + " |")
    return "\n".join(lines)


def recorded_tables(data: dict) -> str:
    """The table from a recording's data (``record.render``): per seed and order, the update
    at which each threshold was reached, as ``{"steps": S, "seeds": {"0": {"reversed":
    {"0.99": 1400, "0.999": 1500}, "plain": {...}}}}``, null where it was not."""
    results = {
        int(seed): {o: {"reached": {t: orders[o][str(t)] for t in THRESHOLDS}} for o in ORDERS}
        for seed, orders in data["seeds"].items()
    }
    return table(results, data["steps"])


def footer(args) -> str:
    recipe = sumgpt.get_recipe("lesson")
    return (
        f"Updates (batch {recipe.batch_size}) to exact match on {N_EVAL:,} held-out sums, scored "
        f"every {args.eval_every} updates; lesson 11's recipe, cosine over {args.steps:,} "
        f"updates, fp32, eager; the same initial weights and operands for both orders.\n"
        f"host {platform.node()}, CPU class {cpu.cpu_class()}, {args.jobs} runs at once, "
        f"{args.threads} thread(s) each, torch {torch.__version__}, {datetime.date.today()}"
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", default="0-7", help="e.g. 0-7 or 0,3")
    p.add_argument("--steps", type=int, default=sumgpt.get_recipe("lesson").train.steps)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--threads", type=int, default=1, help="torch threads per training")
    p.add_argument("--jobs", type=int, default=1, help="trainings at once, one process each")
    p.add_argument("--out", type=Path, default=None, help="also write the table to this file")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    seeds = parse_seeds(args.seeds)
    runs = [(seed, order) for seed in seeds for order in ORDERS]  # seed by seed, both orders
    results: dict[int, dict[str, dict]] = {seed: {} for seed in seeds}
    with executor(args.jobs) as pool:
        futures = {
            pool.submit(run_seed, seed, ORDERS[order], args.steps, args.eval_every, args.threads):
            (seed, order)
            for seed, order in runs
        }  # fmt: skip
        for future in concurrent.futures.as_completed(futures):
            seed, order = futures[future]
            r = results[seed][order] = future.result()
            print(f"  seed {seed} {order}: 99% at {fmt(r['reached'][0.99])}, 99.9% at "
                  f"{fmt(r['reached'][0.999])}, best {r['best']:.4f}", flush=True)  # fmt: skip
            done = {s: r for s, r in results.items() if len(r) == len(ORDERS)}
            if args.out is not None and done:
                write(args.out, table(done, args.steps) + "\n\n" + footer(args) + "\n")
    text = table(results, args.steps) + "\n\n" + footer(args) + "\n"
    print("\n" + text)
    if args.out is not None:
        print(f"written: {args.out}")
    return 0


class InProcess(concurrent.futures.Executor):
    """Runs each submitted call at once, in this process (``--jobs 1``)."""

    def submit(self, fn, /, *args, **kwargs):
        future = concurrent.futures.Future()
        future.set_result(fn(*args, **kwargs))
        return future


def executor(jobs: int) -> concurrent.futures.Executor:
    """``jobs`` worker processes (spawned: torch's threads do not survive a fork), or this
    process alone for one job."""
    if jobs <= 1:
        return InProcess()
    context = multiprocessing.get_context("spawn")
    return concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context)


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    import record  # a sibling module: --results FILE records the tables

    sys.exit(record.run(main))
