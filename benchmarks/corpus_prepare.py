"""Throughput and peak memory of ``bookgpt prepare`` on folders of 10 MB, 100 MB and 1 GB.

    python benchmarks/corpus_prepare.py [--sizes 10,100,1000] [--jobs N] [--work DIR] [--strict]

Each folder is made from the default corpus (the King James Bible, 66 books): as many copies
as the size needs, each renamed and lightly varied (every copy changes a different tenth of its
verses: a word swapped for a synonym, so copies share most verses but not all), one ``.txt``
per book. Then ``python -m course_utils bookgpt prepare --corpus DIR`` runs in a fresh process
while this script samples the memory of that process and its workers (psutil, proportional
set size) every 50 ms. The table shows input MB/s (input bytes over prepare's wall time), the
peak memory of the whole process tree, and the audit's duplicate count, which such a folder must
show. Targets (2 cores): at least 30 MB/s and at most 1.5 GB at 1 GB; ``--strict`` exits 1
when a target is missed.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from course_utils.projects import corpus

TARGET_MB_S, TARGET_PEAK_GB = 30.0, 1.5
SWAPS = [("shall", "will"), ("unto", "to"), ("LORD", "Lord"), ("hath", "has"), ("thee", "you")]


def make_folder(folder: Path, megabytes: float) -> int:
    """Write lightly varied copies of the KJV books into ``folder``; return the bytes written."""
    books = corpus.load_kjv().books
    folder.mkdir(parents=True, exist_ok=True)
    written, copy = 0, 0
    while written < megabytes * 1e6:
        old, new = SWAPS[copy % len(SWAPS)]
        for book in books:
            verses = book.text.split("\n")
            for i in range(copy % 10, len(verses), 10):  # this copy's tenth of the verses
                verses[i] = verses[i].replace(old, new)
            data = "\n".join(verses).encode("utf-8")
            (folder / f"copy{copy:04d}_{book.name.replace(' ', '_')}.txt").write_bytes(data)
            written += len(data)
            if written >= megabytes * 1e6:
                break
        copy += 1
    return written


def _resident(process) -> int:
    """Proportional set size where Linux reports it (forked workers share their parent's
    pages, which plain RSS would count once per process), else RSS."""
    try:
        return process.memory_full_info().pss
    except (AttributeError, OSError):
        return process.memory_info().rss


def run_prepare(folder: Path, out: Path, jobs: int | None) -> tuple[float, int, str]:
    """(wall seconds, peak resident bytes of the process tree, stdout) of one prepare."""
    import psutil

    command = [sys.executable, "-m", "course_utils", "bookgpt", "prepare", "--corpus",
               str(folder), "--out", str(out), "--books", "3"]  # fmt: skip
    if jobs is not None:
        command += ["--jobs", str(jobs)]
    began = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    root, peak = psutil.Process(proc.pid), 0
    while proc.poll() is None:
        try:
            tree = [root, *root.children(recursive=True)]
            peak = max(peak, sum(_resident(p) for p in tree))
        except psutil.Error:
            pass
        time.sleep(0.05)
    wall = time.perf_counter() - began
    out_text = proc.stdout.read()
    if proc.returncode:
        raise SystemExit(f"prepare failed with status {proc.returncode}")
    return wall, peak, out_text


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="10,100,1000", help="folder sizes in MB")
    p.add_argument("--jobs", type=int, default=None, help="prepare's --jobs (default: its own)")
    p.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temp one)")
    p.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    sizes = [float(s) for s in args.sizes.split(",") if s.strip()]
    work = Path(tempfile.mkdtemp(prefix="corpus-bench-", dir=args.work))
    rows = []
    try:
        for mb in sizes:
            folder, out = work / f"books_{mb:g}MB", work / f"prepared_{mb:g}MB"
            size = make_folder(folder, mb)
            wall, peak, text = run_prepare(folder, out, args.jobs)
            dups = re.search(r"duplicated paragraphs across books: ([\d,]+) distinct", text)
            rows.append((mb, size, wall, peak, dups.group(1) if dups else "?"))
            print(
                f"  {mb:g} MB: {size / 1e6 / wall:.1f} MB/s, peak {peak / 2**30:.2f} GB", flush=True
            )
            shutil.rmtree(folder), shutil.rmtree(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\n| folder | files' MB | wall s | MB/s | peak memory (GB) | duplicated paragraphs |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for mb, size, wall, peak, dups in rows:
        print(f"| {mb:g} MB | {size / 1e6:,.1f} | {wall:.1f} | {size / 1e6 / wall:.1f} | "
              f"{peak / 2**30:.2f} | {dups} |")  # fmt: skip
    mb, size, wall, peak, _ = rows[-1]
    speed, peak_gb = size / 1e6 / wall, peak / 2**30
    met = speed >= TARGET_MB_S and peak_gb <= TARGET_PEAK_GB
    verdict = "met" if met else "MISSED"
    print(f"\ntargets at {mb:g} MB: >= {TARGET_MB_S:g} MB/s: {speed:.1f}; "
          f"<= {TARGET_PEAK_GB:g} GB: {peak_gb:.2f} ({verdict})")  # fmt: skip
    return 1 if args.strict and not met else 0


if __name__ == "__main__":
    sys.exit(main())
