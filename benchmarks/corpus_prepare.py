"""Throughput and peak memory of ``bookgpt prepare`` on folders of 10 MB, 100 MB and 1 GB.

    python benchmarks/corpus_prepare.py [--sizes 10,100,1000] [--jobs N] [--work DIR] [--strict]

Each folder is made from the default corpus (the King James Bible, 66 books): as many copies
as the size needs, each renamed and lightly varied (every copy changes a different tenth of its
verses: a word swapped for a synonym, so copies share most verses but not all), one ``.txt``
per book. Then ``python -m course_utils bookgpt prepare --corpus DIR`` runs in a fresh process
while this script samples the memory of that process and its workers (psutil, proportional
set size) every 50 ms. The table shows input MB/s (input bytes over prepare's wall time), the
peak memory of the whole process tree, and the audit's duplicate count, which such a folder must
show. Beside each prepare, in the same run, a plain pass over the same folder in a fresh process
(``--plain-pass``: read each file, decode it as UTF-8, encode every character to a byte id with
one table lookup, write the ids) is the reference: its MB/s is what the disk, the decoder and numpy
allow, with none of prepare's normalization, split, audit or second pass. Targets, as ratios on
the same host: prepare at least a third of the plain pass's MB/s at every size, and at most
1.5 GB of memory at 1 GB; ``--strict`` exits 1 when a target is missed.
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

TARGET_RATIO, TARGET_PEAK_GB = 1 / 3, 1.5
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


def plain_pass(folder: Path, out: Path) -> None:
    """The reference: read, decode, encode (one lookup per character) and write every file."""
    import numpy as np

    table = np.zeros(0x110000, dtype=np.uint8)  # code point -> id (here: its low byte)
    table[:] = np.arange(0x110000, dtype=np.uint32).astype(np.uint8)
    with open(out, "wb") as sink:
        for path in sorted(folder.glob("*.txt")):
            codes = np.frombuffer(path.read_bytes().decode("utf-8").encode("utf-32-le"), "<u4")
            sink.write(table[codes].tobytes())


def run_plain(folder: Path, out: Path) -> float:
    """Wall seconds of :func:`plain_pass` in a fresh process, as prepare runs."""
    began = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--plain-pass", str(folder), str(out)], check=True)
    return time.perf_counter() - began


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="10,100,1000", help="folder sizes in MB")
    p.add_argument("--jobs", type=int, default=None, help="prepare's --jobs (default: its own)")
    p.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temp one)")
    p.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    p.add_argument(
        "--plain-pass",
        nargs=2,
        type=Path,
        metavar=("FOLDER", "OUT"),
        help="run only the reference pass (what the benchmark times beside prepare)",
    )
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.plain_pass:
        plain_pass(*args.plain_pass)
        return 0
    sizes = [float(s) for s in args.sizes.split(",") if s.strip()]
    work = Path(tempfile.mkdtemp(prefix="corpus-bench-", dir=args.work))
    rows = []
    try:
        for mb in sizes:
            folder, out = work / f"books_{mb:g}MB", work / f"prepared_{mb:g}MB"
            size = make_folder(folder, mb)
            plain = run_plain(folder, work / "plain.bin")  # also warms the page cache
            wall, peak, text = run_prepare(folder, out, args.jobs)
            dups = re.search(r"duplicated paragraphs across books: ([\d,]+) distinct", text)
            rows.append((mb, size, wall, plain, peak, dups.group(1) if dups else "?"))
            rate, ref = size / 1e6 / wall, size / 1e6 / plain
            print(f"  {mb:g} MB: prepare {rate:.1f} MB/s, plain pass {ref:.1f} MB/s, "
                  f"peak {peak / 2**30:.2f} GB", flush=True)  # fmt: skip
            shutil.rmtree(folder), shutil.rmtree(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    met = report(rows)
    return 1 if args.strict and not met else 0


def report(rows) -> bool:
    """Print the table and the verdicts; whether every target was met."""
    print("\n| folder | files' MB | prepare s | prepare MB/s | plain pass MB/s | prepare/plain "
          "| peak memory (GB) | duplicated paragraphs |")  # fmt: skip
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for mb, size, wall, plain, peak, dups in rows:
        rate, ref = size / 1e6 / wall, size / 1e6 / plain
        print(f"| {mb:g} MB | {size / 1e6:,.1f} | {wall:.1f} | {rate:.1f} | {ref:.1f} | "
              f"{plain / wall:.2f} | {peak / 2**30:.2f} | {dups} |")  # fmt: skip
    worst = min(plain / wall for _, _, wall, plain, _, _ in rows)
    peak_gb = rows[-1][4] / 2**30
    fast, small = worst >= TARGET_RATIO, peak_gb <= TARGET_PEAK_GB
    print(f"\ntargets: prepare/plain >= 1/3 at every size: worst {worst:.3f} "
          f"({'met' if fast else 'MISSED'}); peak <= {TARGET_PEAK_GB:g} GB at {rows[-1][0]:g} "
          f"MB: {peak_gb:.2f} ({'met' if small else 'MISSED'})")  # fmt: skip
    met = fast and small
    return met


if __name__ == "__main__":
    import record  # a sibling module: --results FILE records the tables

    sys.exit(record.run(main))
