"""Grading throughput at class size: hand-ins per minute, by jobs and with the sandbox on or off.

    python benchmarks/grading.py [--lab 01_tokens_and_embeddings] [--hand-ins 40]
        [--jobs 1,2] [--sandbox on,off] [--tiny] [--rescore]

The hand-ins are made from the lab's solution and its student version (``make_class``, which
the class-size test uses too): full, partial, blank, wrong and broken ones in a fixed mix. Each
row grades all of them from scratch (no cache) and prints the wall time; ``--tiny`` grades 4
hand-ins with 2 jobs in the sandbox, for its test. ``--rescore`` times, per configuration, a
full run into a result cache, then the run after one test's points changed in the solution
(re-scored from the stored outcomes, no kernel).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
LESSON = ROOT / "notebooks" / "01_tokens_and_embeddings.ipynb"  # a notebook with no lab cells
# The mix, repeated: which hand-ins need a kernel, and which are rows without one.
KINDS = ["full", "partial", "blank", "wrong", "raising", "corrupt", "full", "no_lab_cells"]
WRONG = {"01_tokens_and_embeddings": ("ex4-answer", "65 * 128  #", "65 * 128 + 128  #")}


def _answers(solution: Path) -> dict[str, str]:
    nb = nbformat.read(solution, as_version=4)
    return {c.metadata.nbgrader["grade_id"]: c.source for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("solution")}  # fmt: skip


def hand_in(kind: str, solution: Path, lab: Path):
    """One hand-in of ``kind`` (see KINDS) as notebook text."""
    if kind == "corrupt":
        text = lab.read_text(encoding="utf-8")
        return text[: len(text) // 3]
    if kind == "no_lab_cells":
        return LESSON.read_text(encoding="utf-8")
    answers = _answers(solution)
    ids = sorted(answers)
    chosen = {"full": ids, "partial": ids[::2], "blank": [], "wrong": ids, "raising": ids}[kind]
    nb = nbformat.read(lab, as_version=4)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in chosen:
            cell.source = answers[grade_id]
    if kind == "wrong":
        answer, old, new = WRONG.get(solution.stem, (ids[-1], "", ""))
        cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == answer)
        cell.source = cell.source.replace(old, new) if old else "x = 1  # not the answer"
    if kind == "raising":
        cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == ids[1])
        cell.source = 'raise RuntimeError("half-way through")'
    return nbformat.writes(nb)


def make_class(folder: Path, count: int, solution: Path, lab: Path) -> dict[str, str]:
    """``count`` hand-ins ``s000.ipynb`` ... in ``folder``; student -> kind."""
    folder.mkdir(parents=True, exist_ok=True)
    kinds = {}
    texts = {kind: hand_in(kind, solution, lab) for kind in set(KINDS)}
    for i in range(count):
        student, kind = f"s{i:03d}", KINDS[i % len(KINDS)]
        (folder / f"{student}.ipynb").write_text(texts[kind], encoding="utf-8")
        kinds[student] = kind
    return kinds


def time_grading(
    solution: Path, subs: Path, jobs: int, sandbox: bool, cache: Path | None = None
) -> float:
    """Seconds to grade every hand-in in ``subs``, from scratch (or with ``cache``)."""
    from course_utils.grading import orchestrate
    from course_utils.grading import sandbox as sandboxes
    from course_utils.grading.settings import Settings

    box = sandboxes.check_sandbox(sandboxes.default_memory(jobs)) if sandbox else None
    threads = max(1, (os.cpu_count() or 1) // jobs)
    settings = Settings(sandbox=box, threads=threads)
    started = time.perf_counter()
    results, _ = orchestrate.grade(
        solution, subs, settings=settings, jobs=jobs, cache=cache, log=lambda line: None
    )
    seconds = time.perf_counter() - started
    if not results:
        raise RuntimeError("nothing was graded")
    return seconds


def time_rescore(solution: Path, subs: Path, jobs: int, sandbox: bool) -> tuple[float, float]:
    """Seconds of a full run into a fresh cache, then of the run after the first test's points
    changed in (a copy of) the solution."""
    folder = Path(tempfile.mkdtemp(prefix="grading-rescore-"))
    try:
        copy = folder / solution.name
        shutil.copyfile(solution, copy)
        full = time_grading(copy, subs, jobs, sandbox, folder / "cache")
        nb = nbformat.read(copy, as_version=4)
        test = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("points"))
        test.metadata.nbgrader["points"] += 1
        nbformat.write(nb, copy)
        return full, time_grading(copy, subs, jobs, sandbox, folder / "cache")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> list[dict]:
    """Time each configuration and print the table; the rows, for the test."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lab", default="01_tokens_and_embeddings")
    parser.add_argument("--hand-ins", type=int, default=40)
    parser.add_argument("--jobs", default="1,2", help="comma-separated job counts")
    parser.add_argument("--sandbox", default="on,off", help="on, off or both")
    parser.add_argument("--tiny", action="store_true", help="4 hand-ins, 2 jobs, sandbox on")
    parser.add_argument(
        "--rescore", action="store_true", help="time a full run, then a points-only change"
    )
    args = parser.parse_args(argv)
    if args.tiny:
        args.hand_ins, args.jobs, args.sandbox = 4, "2", "on"
    solution, lab = ROOT / "solutions" / f"{args.lab}.ipynb", ROOT / "labs" / f"{args.lab}.ipynb"
    rows = []
    with tempfile.TemporaryDirectory(prefix="grading-bench-") as tmp:
        subs = Path(tmp) / "subs"
        make_class(subs, args.hand_ins, solution, lab)
        if args.rescore:
            print(f"grading {args.lab}: a full run, then one test's points changed")
            print("| hand-ins | jobs | sandbox | full s | points-only s | share |")
            print("| ---: | ---: | --- | ---: | ---: | ---: |")
        for sandbox in [s == "on" for s in args.sandbox.split(",")]:
            for jobs in [int(j) for j in args.jobs.split(",")]:
                if args.rescore:
                    full, again = time_rescore(solution, subs, jobs, sandbox)
                    print(f"| {args.hand_ins} | {jobs} | {'on' if sandbox else 'off'} | "
                          f"{full:.1f} | {again:.1f} | {100 * again / full:.1f}% |")  # fmt: skip
                    continue
                seconds = time_grading(solution, subs, jobs, sandbox)
                rate = 60 * args.hand_ins / seconds
                rows.append({"hand-ins": args.hand_ins, "jobs": jobs, "sandbox": sandbox,
                             "seconds": seconds, "per minute": rate})  # fmt: skip
        shutil.rmtree(subs, ignore_errors=True)
    if rows:
        print_table(rows, args.lab)
    return rows


def print_table(rows: list[dict], lab: str) -> None:
    """The rows as a Markdown table, as the README shows it."""
    print(f"grading {lab}: mix {', '.join(KINDS)}")
    print("| hand-ins | jobs | sandbox | seconds | hand-ins / min |")
    print("| ---: | ---: | --- | ---: | ---: |")
    for r in rows:
        sandbox = "on" if r["sandbox"] else "off"
        print(f"| {r['hand-ins']} | {r['jobs']} | {sandbox} | {r['seconds']:.1f} | "
              f"{r['per minute']:.1f} |")  # fmt: skip
    sys.stdout.flush()


if __name__ == "__main__":
    import record  # a sibling module: --results FILE records the tables

    sys.exit(record.run(main))
