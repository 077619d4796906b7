"""The BookGPT write-up's three runs (baseline, larger, ctx512) on our corpus, with its losses.

    python benchmarks/bookgpt_reference_runs.py [--steps 4750] [--configs baseline,larger,ctx512]
        [--data data/bookgpt] [--out runs/reference] [--parallel] [--time-limit S]
        [--record course_utils/projects/recorded/bookgpt_reference_runs.json]
        [--compare-with course_utils/projects/recorded/bookgpt_reference_runs.json]

Each configuration is trained with ``python -m course_utils bookgpt train --config NAME
--steps STEPS`` (a GPU when there is one: bf16 autocast and fused attention), one process per
run; ``--parallel`` starts them together (small models leave most of a large GPU idle). A run
still going after ``--time-limit`` seconds is stopped; its log holds every evaluation up to its
last checkpoint. The table puts the validation loss at steps 2000 and 4750 beside the write-up's
(its Italian corpus, V=140: a scale, not a point-for-point comparison); ``--record`` writes the
evaluations, the machine, the script and the git commit it ran at, and a sample of each model to
a JSON file, which lesson 12 reads. ``--compare-with FILE`` then compares the fresh recording
with FILE (:func:`compare`) and exits 1 past the tolerance. These runs take minutes on a GPU and
hours on a CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import torch

from course_utils.lessons.verdicts import at, reference_claims
from course_utils.projects import corpus
from course_utils.projects.bookgpt import CHECKPOINT_NAME, load_checkpoint, sample_text

# Seed 003's reported validation losses (nats per character) at the steps it names.
SEED_VAL = {
    "baseline": {2000: 1.7487, 4750: 1.4497},
    "larger": {2000: 1.5673, 4750: 1.3969},
    "ctx512": {4750: 1.5241},
}
PROMPT = "And the LORD"
# A fresh recording agrees with the committed one when every loss lesson 12 reads (val and train
# at the steps below) is within TOLERANCE nats of it and every verdict it asserts is the same.
# bf16 GPU runs are not bit-for-bit repeatable; the tolerance is a judgement, not a measured spread.
TOLERANCE = 0.03
COMPARED_STEPS = (2000, 4750)
SCRIPT = "benchmarks/bookgpt_reference_runs.py"


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=4750)
    p.add_argument("--configs", default="baseline,larger,ctx512")
    p.add_argument("--data", type=Path, default=corpus.DEFAULT_OUT_DIR)
    p.add_argument("--out", type=Path, default=Path("runs/reference"))
    p.add_argument("--parallel", action="store_true", help="run the configurations together")
    p.add_argument("--time-limit", type=float, default=None, help="seconds before runs stop")
    p.add_argument("--record", type=Path, default=None, help="write the results as JSON here")
    p.add_argument("--compare-with", type=Path, default=None, help="a recording to compare with")
    p.add_argument("--tolerance", type=float, default=TOLERANCE, help="nats (see compare)")
    p.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more train options")
    return p.parse_args(argv)


def train_command(name: str, args) -> list[str]:
    return [
        sys.executable,
        "-m",
        "course_utils",
        "bookgpt",
        "train",
        "--config",
        name,
        "--steps",
        str(args.steps),
        "--data",
        str(args.data),
        "--out",
        str(args.out / name),
        "--no-progress",
        *args.extra,
    ]


def run_all(names: list[str], args) -> dict[str, int | None]:
    """Start the runs (all at once or one by one); return each one's exit status (None: stopped
    at the time limit)."""
    deadline = None if args.time_limit is None else time.monotonic() + args.time_limit
    status: dict[str, int | None] = {}
    batches = [names] if args.parallel else [[n] for n in names]
    for batch in batches:
        procs = {}
        for name in batch:
            (args.out / name).mkdir(parents=True, exist_ok=True)
            log = open(args.out / name / "stdout.txt", "w")  # noqa: SIM115 (closed below)
            procs[name] = (subprocess.Popen(train_command(name, args), stdout=log, stderr=log), log)
        for name, (proc, log) in procs.items():
            left = None if deadline is None else max(1.0, deadline - time.monotonic())
            try:
                status[name] = proc.wait(timeout=left)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                status[name] = None
            log.close()
    return status


def summarize(name: str, args, exit_status) -> dict:
    run = args.out / name
    log_path = run / "log.json"
    history = json.loads(log_path.read_text()) if log_path.is_file() else {"evals": []}
    result = {
        "config": name,
        "exit_status": exit_status,
        "steps_done": len(history.get("losses", [])),
        "train_seconds": history.get("seconds"),
        "evals": history["evals"],
        "seed_val": {str(k): v for k, v in SEED_VAL.get(name, {}).items()},
    }
    ckpt = run / CHECKPOINT_NAME
    if ckpt.is_file():
        device = "cuda" if torch.cuda.is_available() else "cpu"
        model, itos, state = load_checkpoint(ckpt, device=device)
        result["parameters"] = sum(p.numel() for p in model.parameters())
        result["sample"] = {
            "prompt": PROMPT,
            "temperature": 0.8,
            "seed": 0,
            "text": sample_text(model, itos, PROMPT, 300, temperature=0.8, seed=0),
        }
    return result


def git_commit() -> str:
    """The commit the script runs at, marked ``-dirty`` when tracked files differ from it."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return head + ("-dirty" if dirty.strip() else "")


def compare(fresh: dict, committed: dict, tolerance: float = TOLERANCE) -> list[str]:
    """What differs between two recordings beyond ``tolerance`` nats: each val and train loss at
    COMPARED_STEPS, and each of lesson 12's verdicts. An empty list means they agree."""
    problems = []
    old = {run["config"]: run for run in committed["runs"]}
    for run in fresh["runs"]:
        name = run["config"]
        if name not in old:
            problems.append(f"{name}: not in the committed recording")
            continue
        for step in COMPARED_STEPS:
            for key in ("val_loss", "train_loss"):
                try:
                    new_value, old_value = at(run, step, key), at(old[name], step, key)
                except KeyError as err:
                    problems.append(str(err).strip("'\""))
                    continue
                if abs(new_value - old_value) > tolerance:
                    problems.append(
                        f"{name} {key} @{step}: {new_value:.4f} against "
                        f"{old_value:.4f} committed (tolerance {tolerance})"
                    )
    if not problems and {"baseline", "larger", "ctx512"} <= {r["config"] for r in fresh["runs"]}:
        new_claims, old_claims = reference_claims(fresh), reference_claims(committed)
        for claim, holds in new_claims.items():
            if holds != old_claims[claim]:
                problems.append(
                    f"verdict changed: {claim}: {holds} (committed: {old_claims[claim]})"
                )
    return problems


def val_at(result: dict, step: int) -> float | None:
    return next((e["val_loss"] for e in result["evals"] if e["step"] == step), None)


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}"


def record_and_compare(args, argv: list[str], wall: float, results: list[dict]) -> int:
    """Write the ``--record`` JSON; with ``--compare-with``, compare it with that file (see
    :func:`compare`) and return 1 when they differ past the tolerance, else 0."""
    machine = {
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "parallel": args.parallel,
    }
    record = {
        "script": SCRIPT,
        "script_at_commit": SCRIPT,  # a later rename changes "script" and "command" only
        "commit": git_commit(),
        "command": f"python {SCRIPT} " + " ".join(argv),
        "machine": machine,
        "steps": args.steps,
        "wall_seconds": round(wall, 1),
        "runs": results,
    }
    args.record.parent.mkdir(parents=True, exist_ok=True)
    args.record.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"\nrecorded {args.record}")
    if args.compare_with is None:
        return 0
    problems = compare(record, json.loads(args.compare_with.read_text()), args.tolerance)
    for line in problems:
        print(f"differs from {args.compare_with}: {line}")
    print(
        f"compared with {args.compare_with}: {'DIFFERS' if problems else 'agrees'} "
        f"(tolerance {args.tolerance} nats)"
    )
    return 1 if problems else 0


def print_table(results: list[dict], args, wall: float) -> None:
    print(f"\n{len(results)} runs, {args.steps} steps each, {wall:.0f} s wall in all")
    print(
        "| config | parameters | steps done | train s | val @2000 | seed @2000 | "
        "val @4750 | seed @4750 |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in results:
        seed = SEED_VAL.get(r["config"], {})
        secs = r["train_seconds"]
        print(
            f"| {r['config']} | {r.get('parameters', 0):,} | {r['steps_done']:,} | "
            f"{'-' if secs is None else f'{secs:.0f}'} | {fmt(val_at(r, 2000))} | "
            f"{fmt(seed.get(2000))} | {fmt(val_at(r, 4750))} | {fmt(seed.get(4750))} |"
        )
    for r in results:
        if "sample" in r:
            print(f"\n--- {r['config']} (temperature 0.8, seed 0)\n{r['sample']['text']}")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    if args.compare_with is not None and args.record is None:
        print("error: --compare-with needs --record (the fresh recording)", file=sys.stderr)
        return 2
    names = [n.strip() for n in args.configs.split(",") if n.strip()]
    if not (args.data / "meta.json").is_file():
        print(f"preparing the default corpus into {args.data}", flush=True)
        corpus.prepare("default", args.data)
    for name in names:
        stale = args.out / name / CHECKPOINT_NAME
        if stale.exists():
            print(
                f"error: {stale} exists; remove {args.out} or pass another --out", file=sys.stderr
            )
            return 2
    start = time.monotonic()
    status = run_all(names, args)
    wall = time.monotonic() - start
    results = [summarize(name, args, status[name]) for name in names]
    print_table(results, args, wall)
    if args.record is not None and record_and_compare(args, argv, wall, results):
        return 1
    return 0 if all(s == 0 for s in status.values()) else 1


if __name__ == "__main__":
    import record  # a sibling module: --results FILE records the tables

    sys.exit(record.run(main))
