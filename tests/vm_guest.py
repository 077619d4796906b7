"""Runs inside the VM test's guest (tests/test_vm.py): grades a small class (an honest
hand-in, a memory hog of four 1.5 GiB processes, a fork bomb of 2,000) under a 2G and 256-task
cap per hand-in, and prints one JSON object: what the grader's first line and ``doctor`` said,
the gradebook's rows, the lowest memory available in the guest while it graded, and how many
processes the fork bomb held."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from grading_helpers import FIXTURE, lab, points, read_rows, save, solved  # noqa: E402
from test_sandbox import FORKER, HOGS  # noqa: E402

MEMORY = "2G"  # per hand-in, and per process (RLIMIT_DATA): the hog's four 1.5 GiB pass the latter
TASKS = 256
CELL_SECONDS = 300  # a cold `import torch` in an emulated guest (TCG) takes minutes


def available() -> int:
    """The guest's MemAvailable, in bytes."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no MemAvailable in /proc/meminfo")


class Lowest(threading.Thread):
    """Samples MemAvailable and the number of processes every 20 ms until stopped."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.memory, self.processes, self.stop = available(), 0, threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.02):
            self.memory = min(self.memory, available())
            count = sum(name.isdigit() for name in (p.name for p in Path("/proc").iterdir()))
            self.processes = max(self.processes, count)


def hand_ins(folder: Path) -> None:
    from grading_helpers import answered

    save(solved(lab()), folder / "honest.ipynb")
    for name, source in [("hogs", HOGS), ("forker", FORKER)]:
        nb = answered(solved(lab(), "ex2_answer", "ex3_answer"), ex1_answer=source)
        save(nb, folder / f"{name}.ipynb")


def forked(feedback: Path) -> int | None:
    """How many forks the fork bomb reported it held (None if it did not report)."""
    text = (feedback / "forker.md").read_text(encoding="utf-8")
    if "RuntimeError: forked " not in text:
        return None
    return int(text.split("RuntimeError: forked ")[1].split()[0])


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="course-vm-"))
    hand_ins(root / "submissions")
    out, feedback = root / "gradebook.csv", root / "feedback"
    command = [
        sys.executable,
        "-m",
        "course_utils",
        "grade",
        str(FIXTURE),
        str(root / "submissions"),
        "--out",
        str(out),
        "--feedback",
        str(feedback),
        "--timeout",
        str(CELL_SECONDS),
        "--total-timeout",
        str(4 * CELL_SECONDS),
        "--jobs",
        "1",
        "--memory",
        MEMORY,
        "--tasks",
        str(TASKS),
    ]
    doctor = subprocess.run(
        [sys.executable, "-m", "course_utils", "doctor"], capture_output=True, text=True
    )
    before = available()
    lowest = Lowest()
    lowest.start()
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.monotonic() - started
    lowest.stop.set()
    lowest.join()
    rows = read_rows(out) if out.exists() else {}
    report = {
        "first_line": (done.stdout.splitlines() or [""])[0],
        "doctor": [
            line for line in doctor.stdout.splitlines() if "limiter" in line or "sandbox" in line
        ],
        "code": done.returncode,
        "stderr": done.stderr[-3000:],
        "stdout": done.stdout[-3000:],
        "rows": {
            s: {"status": r["status"], "reason": r.get("reason", ""), "points": points(r)}
            for s, r in rows.items()
        },
        "forked": forked(feedback) if (feedback / "forker.md").exists() else None,
        "available_before": before,
        "lowest_available": lowest.memory,
        "most_processes": lowest.processes,
        "grading_seconds": round(seconds, 1),
        "cgroup": Path("/proc/self/cgroup").read_text().strip(),
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
