"""The figures the timing lessons measure, as each CPU class sees them.

    python benchmarks/lesson_figures.py [--lessons 03,09,13] [--cpu-class all] [--results]

Lessons 03 (RMSNorm against LayerNorm), 09 (the KV-cached step, matmul rates, MFU) and 13 (a
step's fixed cost, bf16, threads, batch size) print what they measure masked beside the claim
they check (``measured:``, ``wall:``), so their published outputs hold on any CPU while the
figures are this machine's. This runs each lesson top to bottom in a fresh kernel, as a student's
Run All does (the course's kernel settings: OpenMP threads wait without spinning, torch's
default threads), without saving it, and prints every masked figure it printed, a table per
lesson. With ``--cpu-class`` each class runs in its own process (``benchmarks/cpu_classes.py``),
so one host gives the AMX, AVX512_BF16, AVX-512 and AVX2 figures side by side. A timing
benchmark: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cpu_classes  # noqa: E402  (a sibling module)

ROOT = Path(__file__).resolve().parents[1]
MASKED = re.compile(r"measured:|wall:")


def lesson_path(number: str) -> Path:
    """The lesson whose file name starts with ``number`` (``03`` -> notebooks/03_....ipynb)."""
    found = sorted((ROOT / "notebooks").glob(f"{int(number):02d}_*.ipynb"))
    if not found:
        raise SystemExit(f"no lesson {number} in {ROOT / 'notebooks'}: name lessons as 03,09,13")
    return found[0]


def masked_lines(nb) -> list[tuple[int, str]]:
    """``(cell index, line)`` for every printed line of ``nb`` that carries a masked figure."""
    found = []
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            text = output.get("text", "") if output.get("output_type") == "stream" else ""
            found += [(index, line.strip()) for line in text.splitlines() if MASKED.search(line)]
    return found


def run_lesson(path: Path):
    """``path`` executed top to bottom in a fresh kernel in its own folder (not saved)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, kernel_name="python3", timeout=900,
                   resources={"metadata": {"path": str(path.parent)}}).execute()  # fmt: skip
    return nb


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lessons", default="03,09,13", help="lesson numbers, comma-separated")
    cpu_classes.add_option(p)
    return p.parse_args(argv)


def main(argv=None) -> int:
    args, per_class = cpu_classes.start(parse, argv)
    if per_class is not None:
        return per_class
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as kernel_env sets in a course kernel
    for number in [n.strip() for n in args.lessons.split(",") if n.strip()]:
        path = lesson_path(number)
        started = time.perf_counter()
        lines = masked_lines(run_lesson(path))
        took = time.perf_counter() - started
        print(f"\nlesson {path.stem}, run whole in {took:.0f} s:\n")
        print("| cell | what it printed |\n| ---: | --- |")
        for index, line in lines:
            print(f"| {index} | {line.replace('|', '/')} |")
    return 0


if __name__ == "__main__":
    import record  # a sibling module: --results FILE records the tables

    sys.exit(record.run(main))
