"""Seed 003's three BookGPT runs (baseline, larger, ctx512) on our corpus, with the seed's losses.

    python benchmarks/bookgpt_reference_runs.py [--steps 4750] [--configs baseline,larger,ctx512]
        [--data data/bookgpt] [--out runs/seed003] [--parallel] [--time-limit S]
        [--record course_utils/projects/recorded/bookgpt_reference_runs.json]

Each configuration is trained with ``python -m course_utils bookgpt train --config NAME
--steps STEPS`` (a GPU when there is one: bf16 autocast and fused attention), one process per
run; ``--parallel`` starts them together (small models leave most of a large GPU idle). A run
still going after ``--time-limit`` seconds is stopped; its log holds every evaluation up to its
last checkpoint. The table puts the validation loss at steps 2000 and 4750 beside the seed's (its
Italian corpus, V=140: a scale, not a point-for-point comparison), and ``--record`` writes the
evaluations, the machine and a sample of each model to a JSON file, which lesson 12 reads.
These runs take minutes on a GPU and hours on a CPU.
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

from course_utils.projects import corpus
from course_utils.projects.bookgpt import CHECKPOINT_NAME, load_checkpoint, sample_text

# Seed 003's reported validation losses (nats per character) at the steps it names.
SEED_VAL = {
    "baseline": {2000: 1.7487, 4750: 1.4497},
    "larger": {2000: 1.5673, 4750: 1.3969},
    "ctx512": {4750: 1.5241},
}
PROMPT = "And the LORD"


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=4750)
    p.add_argument("--configs", default="baseline,larger,ctx512")
    p.add_argument("--data", type=Path, default=corpus.DEFAULT_OUT_DIR)
    p.add_argument("--out", type=Path, default=Path("runs/seed003"))
    p.add_argument("--parallel", action="store_true", help="run the configurations together")
    p.add_argument("--time-limit", type=float, default=None, help="seconds before runs stop")
    p.add_argument("--record", type=Path, default=None, help="write the results as JSON here")
    p.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more train options")
    return p.parse_args(argv)


def train_command(name: str, args) -> list[str]:
    return [
        sys.executable, "-m", "course_utils", "bookgpt", "train", "--config", name,
        "--steps", str(args.steps), "--data", str(args.data), "--out", str(args.out / name),
        "--no-progress", *args.extra,
    ]  # fmt: skip


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


def val_at(result: dict, step: int) -> float | None:
    return next((e["val_loss"] for e in result["evals"] if e["step"] == step), None)


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}"


def main(argv=None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
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

    print(f"\n{len(names)} runs, {args.steps} steps each, {wall:.0f} s wall in all")
    print("| config | parameters | steps done | train s | val @2000 | seed @2000 | "
          "val @4750 | seed @4750 |")  # fmt: skip
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
    if args.record is not None:
        machine = {
            "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
            "torch": torch.__version__,
            "python": platform.python_version(),
            "cpu_count": os.cpu_count(),
            "parallel": args.parallel,
        }
        record = {
            "command": "python benchmarks/bookgpt_reference_runs.py "
            + " ".join(sys.argv[1:] if argv is None else argv),
            "machine": machine,
            "steps": args.steps,
            "wall_seconds": round(wall, 1),
            "runs": results,
        }
        args.record.parent.mkdir(parents=True, exist_ok=True)
        args.record.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        print(f"\nrecorded {args.record}")
    return 0 if all(s == 0 for s in status.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
