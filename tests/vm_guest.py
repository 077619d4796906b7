"""Runs inside the VM test's guest (tests/test_vm.py) and prints one JSON object.

``held``: a memory hog (four 1.5 GiB processes) and a fork bomb (2,000) run as a hand-in's
kernel runs, in the sandbox with its per-process caps and a group of its own from the limiter
(2G and 256 tasks), without Jupyter or torch (cheap enough for an emulated guest): the
grader's first line, ``doctor``'s sandbox and limiter lines, the lowest memory available in
the guest meanwhile, and how many processes the fork bomb held. ``class``: a small class graded
by ``python -m course_utils grade`` (an honest hand-in beside the same two), and what ``doctor``
says."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

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
    """Samples MemAvailable and the number of processes every 50 ms until stopped."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.memory, self.processes, self.stop = available(), 0, threading.Event()

    def run(self) -> None:
        started = last = time.monotonic()
        while not self.stop.wait(0.05):
            now, free = time.monotonic(), available()
            self.memory = min(self.memory, free)
            count = sum(name.isdigit() for name in (p.name for p in Path("/proc").iterdir()))
            self.processes = max(self.processes, count)
            if now - last > 20:  # progress on stderr (the guest's log), for a slow emulated run
                last = now
                print(f"{now - started:6.0f} s: {free >> 20} MiB available, {count} processes",
                      file=sys.stderr, flush=True)  # fmt: skip


# what the hog and the fork bomb of tests/test_sandbox.py run, as programs of their own
HOG = "import time; block = bytearray(b'x') * (3 * 2**29); time.sleep(1)"
HOGS = f"""import subprocess, sys
hogs = [subprocess.Popen([sys.executable, "-c", {HOG!r}]) for _ in range(4)]
print([hog.wait() for hog in hogs])"""
FORK = (
    "import os, time\nn = 0\ntry:\n    for _ in range(2000):\n        if os.fork() == 0:\n"
    "            time.sleep(5)\n            os._exit(0)\n        n += 1\nexcept OSError:\n"
    "    pass\nprint(n)\n"
)


def held() -> dict:
    """The hog and the fork bomb, each in a sandbox and a group of its own, as a kernel."""
    from course_utils.grading import limiter, sandbox
    from course_utils.tools import doctor

    box = sandbox.check_sandbox(sandbox.parse_memory(MEMORY), TASKS)
    report = {
        "first_line": f"each hand-in runs in a sandbox: {box.describe()}; {box.limits()}",
        "doctor": [doctor.sandbox_line(), doctor.limiter_line()],
        "available_before": available(),
    }
    for name, program in (("hog", HOGS), ("forker", FORK)):
        group = limiter.make_group(box.limiter, box.memory, box.tasks)
        home = Path(tempfile.mkdtemp(prefix="course-vm-"))
        command = sandbox.command_line(box, home, [sys.executable, "-c", program], group=group)
        lowest = Lowest()
        lowest.start()
        started = time.monotonic()
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
            kills = limiter.oom_kills(group)  # what the grader reads before it removes the group
        finally:
            lowest.stop.set()
            lowest.join()
            limiter.remove_group(group)
        report[name] = {
            "stdout": done.stdout.strip(),
            "stderr": done.stderr[-2000:],
            "code": done.returncode,
            "lowest_available": lowest.memory,
            "most_processes": lowest.processes,
            "oom_kills": kills,
            "seconds": round(time.monotonic() - started, 1),
        }
    report["forked"] = int(report["forker"]["stdout"] or -1)
    report["lowest_available"] = report["hog"]["lowest_available"]
    return report


def hand_ins(folder: Path) -> None:
    from grading_helpers import answered, lab, save, solved
    from test_sandbox import FORKER, HOGS

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


def graded_class() -> dict:
    """A small class graded by the grader, and what ``doctor`` says."""
    from grading_helpers import FIXTURE, points, read_rows

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
    }
    return report


if __name__ == "__main__":
    report = held() if sys.argv[1:] == ["held"] else graded_class()
    report["cgroup"] = Path("/proc/self/cgroup").read_text().strip()
    print(json.dumps(report, indent=1))
