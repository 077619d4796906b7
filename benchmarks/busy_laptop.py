"""Lesson 11's training on a busy laptop: the course's kernel settings against the alternatives.

    python benchmarks/busy_laptop.py [--steps 60] [--rounds 3] [--hogs 3]

Lesson 11 trains SumGPT (the lesson's recipe, fp32, batch 128) in a kernel whose OpenMP threads
wait without spinning (``OMP_WAIT_POLICY=PASSIVE``, which ``course_utils/tools/kernel_env.py``
puts in every course kernel) at torch's default thread count. With other programs on the same
cores, spinning threads steal the time of the thread they wait for: a student measured 953 s for
a run of 2.5-4.5 minutes, and two threads 26x slower than one.

This starts ``--hogs`` busy-loop processes (a browser, an editor, a video call), then trains
``--steps`` updates of lesson 11's run in a fresh process per variant (libgomp reads the policy
once, at load), the variants taking turns round after round so that a change in the load slows
them alike:

* ``course``: PASSIVE, torch's default threads (what a course kernel runs);
* ``passive-1`` / ``passive-2``: PASSIVE at 1 / 2 threads;
* ``spin-1`` / ``spin-2``: libgomp's default policy (spin, then sleep) at 1 / 2 threads: a
  kernel without the course's setting.

The table gives the median seconds per update over the rounds, the range, and each variant's
time over the course's; the course's setting must never be the slowest. The hogs are stopped on
the way out, however the run ends. It is a timing benchmark: run it on an otherwise quiet machine
(the hogs are the load) and report the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

VARIANTS = {  # name -> (OMP_WAIT_POLICY or None for libgomp's default, threads or None: torch's)
    "course": ("PASSIVE", None),
    "passive-1": ("PASSIVE", 1),
    "passive-2": ("PASSIVE", 2),
    "spin-1": (None, 1),
    "spin-2": (None, 2),
}
HOG = "while True: pass"


def worker(steps: int, threads: int | None) -> dict:
    """Train ``steps`` updates of lesson 11's run (after 5 of warm-up); seconds per update."""
    import torch

    from course_utils import GPT, build_model
    from course_utils.engine.training import train
    from course_utils.projects import sumgpt

    if threads:
        torch.set_num_threads(threads)
    data = sumgpt.SumBatches(sumgpt.DEFAULT_TRAIN["batch_size"], seed=0)
    seconds = []
    for n in (5, steps):
        net = build_model(GPT, sumgpt.sumgpt_config(), seed=0, device="cpu")
        cfg = sumgpt.train_config(2000, precision="fp32", seed=0, progress=False, compile=False)
        cfg = replace(cfg, steps=n, warmup_steps=min(cfg.warmup_steps, n))  # the same recipe
        start = time.perf_counter()
        train(net, data, cfg, device="cpu")
        seconds.append(time.perf_counter() - start)
    return {"per_step": seconds[1] / steps, "threads": torch.get_num_threads()}


def run_variant(name: str, steps: int) -> dict:
    policy, threads = VARIANTS[name]
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    argv = [sys.executable, __file__, "--worker", "--steps", str(steps)]
    argv += ["--threads", str(threads)] if threads else []
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=60, help="timed updates per variant and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--hogs", type=int, default=3, help="busy-loop processes (the load)")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.steps, args.threads)))
        return 0
    names = args.variants.split(",")
    print(f"{os.cpu_count()} CPU cores, load before the hogs: {os.getloadavg()[0]:.2f}; "
          f"{args.hogs} busy-loop processes; {args.steps} updates of lesson 11's run per "
          f"variant and round, {args.rounds} rounds")  # fmt: skip
    hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(args.hogs)]
    times: dict[str, list[float]] = {n: [] for n in names}
    threads = {}
    try:
        for r in range(args.rounds):
            for name in names if r % 2 == 0 else names[::-1]:  # alternate the order
                result = run_variant(name, args.steps)
                times[name].append(result["per_step"])
                threads[name] = result["threads"]
                print(f"  round {r + 1} {name:<10} {1000 * result['per_step']:8.1f} ms/update "
                      f"(load {os.getloadavg()[0]:.2f})", flush=True)  # fmt: skip
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    course = statistics.median(times["course"]) if "course" in times else None
    print("\n| variant | policy | threads | ms/update | range | x course |")
    print("| --- | --- | ---: | ---: | --- | ---: |")
    for name in names:
        values = [1000 * t for t in times[name]]
        median = statistics.median(values)
        ratio = f"{median / (1000 * course):.2f}" if course else "-"
        policy = VARIANTS[name][0] or "default"
        print(f"| {name} | {policy} | {threads[name]} | {median:.1f} "
              f"| {min(values):.1f}-{max(values):.1f} | {ratio} |")  # fmt: skip
    if course:
        slowest = max(names, key=lambda n: statistics.median(times[n]))
        verdict = "the course's setting is the slowest" if slowest == "course" else "not slowest"
        print(f"\ncourse's setting: {verdict} (slowest: {slowest})")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import record  # a sibling module: --results FILE records the tables

    sys.exit(record.run(main))
