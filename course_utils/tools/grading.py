"""Grade collected lab submissions with nbgrader's autograder, without a course database.

``python -m course_utils grade LAB SUBMISSIONS_DIR --out gradebook.csv [--feedback DIR]``

How it works, and why:

* The lab's solution notebook (``solutions/LAB.ipynb``: answers, test cells, hidden tests) goes
  once through nbgrader's own ``generate_assignment`` in a temporary course directory. That
  records every locked and test cell, hidden tests included, with its checksum, in a temporary
  sqlite gradebook. The instructor never sees either.
* Each submission is graded by nbgrader's ``autograde`` in a worker process of its own: a
  private copy of that gradebook, a fresh kernel whose working directory holds only that
  notebook, and a wall-time limit after which the worker and everything it started are killed.
  Autograde restores edited or deleted locked and test cells and puts the hidden tests back
  (OverwriteKernelspec, OverwriteCells), clears outputs, executes with a per-cell timeout that
  interrupts the kernel and carries on (Execute), limits the output and saves the scores.
* Bad input never stops the run: unreadable files, non-notebooks, notebooks of another lab,
  crashed or killed workers each become a row with a status and a reason. The CSV is written
  once at the end, atomically, sorted by student, with nothing in it that changes between runs.

Workers are forked from a multiprocessing forkserver that imported nbgrader once, which saves
seconds per submission; the forkserver shares nothing else with the parent (which has threads).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import logging
import multiprocessing
import os
import re
import shutil
import sys
import sysconfig
import tempfile
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from ..engine.io import atomic_write_text

# Row statuses: only GRADED rows were executed; the others score 0 and say why in `reason`.
GRADED = "graded"
CORRUPT = "corrupt"  # a notebook file that is no longer valid JSON / a valid notebook
NOT_A_NOTEBOOK = "not_a_notebook"
WRONG_LAB = "wrong_lab"
MISSING = "missing"  # a student folder without the lab's notebook
KILLED = "killed"  # ran past the total wall-time limit
ERROR = "error"  # nbgrader or the worker failed; the reason has the last error line

DEFAULT_TIMEOUT = 300  # seconds per cell
DEFAULT_TOTAL_TIMEOUT = 1800  # seconds per submission, everything included
IOPUB_TIMEOUT = 10  # seconds to wait for a cell's last output after its reply
# seconds for a kernel to start: importing torch in two kernels at once on a busy 2-core box
# took over nbclient's default 60 (CI)
KERNEL_STARTUP_TIMEOUT = 240

STUDENT = "student"  # the id inside each worker's private course directory
MARKER_ENV = "COURSE_UTILS_GRADING_RUN"  # tags every process a worker starts, to kill leftovers
_RUNNING: set[multiprocessing.process.BaseProcess] = set()  # live workers, killed on Ctrl-C
WORKER_PRELOAD = ["course_utils.tools.grading", "nbgrader.converters", "nbgrader.api"]

# Feedback limits: a student's print loop must not produce a megabyte of Markdown.
MAX_OUTPUT_LINES = 40
MAX_OUTPUT_CHARS = 4000
MAX_LINE_CHARS = 300
MAX_MESSAGE_CHARS = 500
MAX_REASON_CHARS = 300

# What the usual nbgrader failures mean, put before their error line in the reason column.
FAILURE_HINTS = {
    "DeadKernelError": "the kernel died (the notebook exited, crashed or ran out of memory): ",
    "CellTimeoutError": "a cell ran on after its timeout, ignoring the interrupt: ",
}

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class UsageError(Exception):
    """A problem with the command line; ``main`` prints it on one line and exits with 2."""


# ---------------------------------------------------------------------------------------------
# Results


@dataclass
class Submission:
    """One student's hand-in: the notebook to grade, or why there is none."""

    student: str
    path: Path | None
    status: str = ""  # set when it cannot be graded at all
    reason: str = ""
    note: str = ""  # something the instructor should know even when it is graded


@dataclass
class Result:
    """One gradebook row, plus what the feedback file shows."""

    student: str
    status: str
    reason: str = ""
    scores: dict[str, float] = field(default_factory=dict)
    feedback: dict[str, dict] = field(default_factory=dict)


@dataclass(frozen=True)
class Lab:
    """What generate_assignment made of the solution: the gradebook, the student version and
    the graded test cells (grade_id -> points, in notebook order: the CSV's columns)."""

    name: str
    db: Path
    release: Path
    tests: dict[str, float]

    @property
    def max_score(self) -> float:
        return sum(self.tests.values())


def total(result: Result, lab: Lab) -> float:
    return sum(result.scores.get(test, 0.0) for test in lab.tests)


# ---------------------------------------------------------------------------------------------
# Command line


def resolve_lab(arg: str) -> Path:
    """The solution notebook named by ``arg``: a lab name (``solutions/<name>.ipynb``) or a path.

    A path into ``labs/`` is refused: the student version has no hidden tests to grade with."""
    from .labs import LABS, SOLUTIONS

    path = Path(arg)
    if path.suffix == ".ipynb" or len(path.parts) > 1:
        if not path.is_file():
            raise UsageError(
                f"lab notebook {arg} does not exist; pass a lab name or the path to its solution"
            )
        if path.resolve().parent == LABS.resolve():
            raise UsageError(
                f"{arg} is the student version; grade against its solution: {SOLUTIONS / path.name}"
            )
        return path
    candidate = SOLUTIONS / f"{arg}.ipynb"
    if not candidate.is_file():
        known = ", ".join(sorted(p.stem for p in SOLUTIONS.glob("*.ipynb"))) or "none yet"
        raise UsageError(
            f"no lab named {arg!r}: {candidate} does not exist (labs with solutions: {known}); "
            "pass a lab name or the path to its solution notebook"
        )
    return candidate


def configure(parser: argparse.ArgumentParser) -> None:
    """The ``grade`` command's arguments."""
    parser.description = "Autograde collected submissions of one lab into a CSV gradebook."
    parser.epilog = (
        "example:\n  python -m course_utils grade 01_tokens_and_embeddings subs/ --out "
        "gradebook.csv --feedback feedback/ --jobs 2"
    )
    parser.add_argument("lab", help="lab name (solutions/LAB.ipynb) or path to its solution")
    parser.add_argument(
        "submissions", type=Path, help="folder of <student>.ipynb or <student>/<lab>.ipynb"
    )
    parser.add_argument("--out", type=Path, required=True, help="the CSV gradebook to write")
    parser.add_argument("--feedback", type=Path, help="write <student>.md feedback files here")
    parser.add_argument(
        "--timeout",
        type=int,
        default=DEFAULT_TIMEOUT,
        help=f"seconds one cell may run before it is interrupted (default {DEFAULT_TIMEOUT})",
    )
    parser.add_argument(
        "--total-timeout",
        type=int,
        default=DEFAULT_TOTAL_TIMEOUT,
        help=f"seconds one submission may take in all (default {DEFAULT_TOTAL_TIMEOUT})",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="submissions graded at once (default 1)"
    )
    parser.set_defaults(func=run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_utils grade")
    configure(parser)
    return run(parser.parse_args(sys.argv[1:] if argv is None else argv))


def run(args: argparse.Namespace) -> int:
    """``python -m course_utils grade``: exit 0 once the gradebook is written (a submission that
    could not be graded is a row with its status, not a failure), 2 for a usage error."""
    try:
        solution = resolve_lab(args.lab)
        if not args.submissions.is_dir():
            raise UsageError(
                f"submissions folder {args.submissions} does not exist; collect the notebooks "
                "into one folder as <student>.ipynb or <student>/<lab>.ipynb"
            )
        if args.timeout < 1 or args.total_timeout < 1 or args.jobs < 1:
            raise UsageError("--timeout, --total-timeout and --jobs must be positive")
        for path in filter(None, [args.out, args.feedback and args.feedback / "x.md"]):
            check_writable(path)
        results, lab = grade(
            solution,
            args.submissions,
            timeout=args.timeout,
            total_timeout=args.total_timeout,
            jobs=args.jobs,
            skip=[args.out, args.feedback],
        )
    except UsageError as problem:
        print(f"grade: error: {problem}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"grade: interrupted; {args.out} was not written", file=sys.stderr)
        return 130
    write_gradebook(results, lab, args.out)
    if args.feedback:
        write_feedback(results, lab, args.feedback)
    graded = sum(r.status == GRADED for r in results)
    print(f"wrote {args.out}: {len(results)} submissions, {graded} graded")
    return 0


def check_writable(path: Path) -> None:
    """Fail before grading, not after it, when ``path`` cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {path.parent}: {exc.strerror}") from None
    if path.is_dir() or not os.access(path.parent, os.W_OK):
        raise UsageError(f"cannot write {path}; pass a writable file path")


# ---------------------------------------------------------------------------------------------
# Parent: finding submissions, preparing the lab, running workers


def grade(
    solution: Path,
    submissions: Path,
    *,
    timeout: int = DEFAULT_TIMEOUT,
    total_timeout: int = DEFAULT_TOTAL_TIMEOUT,
    jobs: int = 1,
    skip: list[Path | None] | None = None,
    log: Callable[[str], None] = print,
) -> tuple[list[Result], Lab]:
    """Grade every submission in ``submissions`` against ``solution``; rows sorted by student.

    ``skip`` names paths inside ``submissions`` that are not hand-ins (the gradebook itself)."""
    with tempfile.TemporaryDirectory(prefix="course-grade-") as tmp:
        lab = prepare_lab(solution, Path(tmp) / "lab")
        found = find_submissions(submissions, lab.name, skip=[p for p in skip or [] if p])
        results = []
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = [
                pool.submit(grade_safely, lab, sub, Path(tmp) / f"s{i}", timeout, total_timeout)
                for i, sub in enumerate(found)
            ]
            try:
                for future in as_completed(futures):
                    results.append(future.result())
                    log(_progress_line(results[-1], lab))
            except KeyboardInterrupt:  # stop now, not once the running workers are done
                pool.shutdown(wait=False, cancel_futures=True)
                for proc in list(_RUNNING):
                    proc.kill()
                raise
    return sorted(results, key=lambda r: r.student), lab


def _progress_line(result: Result, lab: Lab) -> str:
    line = f"{result.student}: {total(result, lab):g}/{lab.max_score:g} {result.status}"
    return f"{line} ({result.reason})" if result.reason else line


@contextmanager
def _scripts_on_path() -> Iterator[None]:
    """Put this environment's scripts first on PATH for a while.

    nbgrader creates a gradebook by running the ``alembic`` script that sits next to this
    Python, which is not on PATH when the venv is not activated."""
    old = os.environ.get("PATH", "")
    os.environ["PATH"] = os.pathsep.join([sysconfig.get_path("scripts"), old])
    try:
        yield
    finally:
        os.environ["PATH"] = old


def prepare_lab(solution: Path, workdir: Path) -> Lab:
    """Run nbgrader's generate_assignment on the solution in a temporary course directory.

    The gradebook it writes holds each locked and test cell as in the source (hidden tests
    included), which is what autograde restores into every submission."""
    from nbgrader.converters import GenerateAssignment
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config

    name = solution.stem
    course = workdir / "course"
    (course / "source" / name).mkdir(parents=True)
    source = complete_kernelspec(nbformat.read(solution, as_version=4))
    nbformat.write(source, course / "source" / name / f"{name}.ipynb")
    db = workdir / "gradebook.db"
    config = Config()
    config.CourseDirectory.root = str(course)
    config.CourseDirectory.db_url = f"sqlite:///{db}"
    config.CourseDirectory.assignment_id = name
    app = GenerateAssignment(coursedir=CourseDirectory(config=config), config=config)
    app.force = True
    app.create_assignment = True
    with _scripts_on_path(), _captured_log(app.log) as records:
        try:
            app.start()
        except Exception as exc:
            reason = _failure_line(records, exc)
            message = f"nbgrader could not generate the lab from {solution}: {reason}"
            raise UsageError(message) from None
    release = course / "release" / name / f"{name}.ipynb"
    tests = _test_cells(nbformat.read(release, as_version=4))
    if not tests:
        raise UsageError(
            f"{solution} has no graded test cells (nbgrader metadata with points); "
            "is it a solution notebook?"
        )
    return Lab(name=name, db=db, release=release, tests=tests)


def complete_kernelspec(nb):
    """Give the kernelspec a display_name when a hand-in lacks one.

    nbconvert validates the notebook after every nbgrader preprocessor, and the notebook schema
    requires a display_name whenever there is a kernelspec; without one nbgrader fails."""
    kernelspec = nb.metadata.get("kernelspec")
    if isinstance(kernelspec, dict) and "display_name" not in kernelspec:
        kernelspec["display_name"] = str(kernelspec.get("name", "python3"))
    return nb


def _test_cells(nb) -> dict[str, float]:
    """grade_id -> points of the autograded test cells (grade cells that are not answers)."""
    tests = {}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution") and cell.cell_type == "code":
            tests[meta["grade_id"]] = float(meta.get("points", 0))
    return tests


def find_submissions(folder: Path, lab: str, skip: list[Path] = ()) -> list[Submission]:
    """One Submission per student: ``<student>.ipynb`` files and ``<student>/`` folders.

    Other files become rows too (status not_a_notebook) so nothing handed in goes unnoticed;
    hidden files and the paths in ``skip`` are ignored."""
    skipped = {Path(p).resolve() for p in skip}
    found: dict[str, list[Submission]] = {}
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(".") or entry.resolve() in skipped:
            continue
        if entry.is_dir():
            sub = _from_folder(entry, lab)
        elif entry.suffix == ".ipynb":
            sub = Submission(entry.stem, entry)
        else:
            reason = f"{entry.name} is not a notebook; expected {entry.stem}.ipynb"
            sub = Submission(entry.stem, None, NOT_A_NOTEBOOK, reason)
        found.setdefault(sub.student, []).append(sub)
    return [_one_per_student(subs) for _, subs in sorted(found.items())]


def _from_folder(folder: Path, lab: str) -> Submission:
    """The lab notebook in a student's folder (nested as nbgrader collects it, or misnamed when
    it is the only notebook there)."""
    notebooks = sorted(
        p
        for p in folder.rglob("*.ipynb")
        if not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )
    named = [p for p in notebooks if p.name == f"{lab}.ipynb"]
    if named:
        return Submission(folder.name, named[0])
    if len(notebooks) == 1:
        relative = notebooks[0].relative_to(folder).as_posix()
        note = f"graded {folder.name}/{relative} (expected {lab}.ipynb)"
        return Submission(folder.name, notebooks[0], note=note)
    others = ", ".join(p.name for p in notebooks[:3]) or "no notebook"
    return Submission(folder.name, None, MISSING, f"no {lab}.ipynb in {folder.name}/ ({others})")


def _one_per_student(subs: list[Submission]) -> Submission:
    """A student with several entries (alice.ipynb and alice/): grade the first gradable one and
    name the others in its note."""
    chosen = next((s for s in subs if s.path is not None), subs[0])
    others = [s.path.name if s.path else s.reason for s in subs if s is not chosen]
    if others:
        also = f"also found: {', '.join(others)}"
        chosen.note = "; ".join([chosen.note] * bool(chosen.note) + [also])
    return chosen


def grade_safely(
    lab: Lab, sub: Submission, workdir: Path, timeout: int, total_timeout: int
) -> Result:
    """grade_submission, except that nothing it raises can lose the student's row."""
    try:
        result = grade_submission(lab, sub, workdir, timeout, total_timeout)
    except Exception as exc:  # a bug or an OS error: report it in the row, grade the others
        result = Result(sub.student, ERROR, f"grading crashed: {type(exc).__name__}: {exc}")
    finally:  # nbgrader's read-only files go too: their folders are writable
        shutil.rmtree(workdir, ignore_errors=True)
    if sub.note:
        result.reason = "; ".join(filter(None, [sub.note, result.reason]))
    reason = result.reason.replace(str(workdir.parent), "<tmp>")  # no run-dependent paths
    result.reason = _one_line(reason, MAX_REASON_CHARS)
    return result


def grade_submission(
    lab: Lab, sub: Submission, workdir: Path, timeout: int, total_timeout: int
) -> Result:
    """Grade one submission in a worker process with a total wall-time limit."""
    if sub.status:
        return Result(sub.student, sub.status, sub.reason)
    workdir.mkdir(parents=True)
    job = {
        "lab": lab.name,
        "db": str(lab.db),
        "release": str(lab.release),
        "submission": str(sub.path.resolve()),
        "workdir": str(workdir),
        "timeout": timeout,
    }
    (workdir / "job.json").write_text(json.dumps(job), encoding="utf-8")
    returncode = run_with_limit(worker_process, (str(workdir),), workdir, total_timeout)
    result_file = workdir / "result.json"
    if result_file.exists():
        data = json.loads(result_file.read_text(encoding="utf-8"))
        return Result(sub.student, **data)
    if returncode is None:
        reason = f"ran past the {total_timeout} s limit for one submission (--total-timeout)"
        return Result(sub.student, KILLED, reason)
    if returncode < 0:
        reason = f"the grading process was killed by signal {-returncode} (by the notebook?)"
        return Result(sub.student, ERROR, reason)
    last = _last_lines(workdir / "worker.log", 1)
    return Result(sub.student, ERROR, f"the grading process failed (exit {returncode}): {last}")


def _worker_env(workdir: Path, marker: str) -> dict[str, str]:
    """What a worker sets in its environment, for its kernel: this venv's scripts first (the
    kernel spec runs ``python``), no IPython profile of the instructor's, a fixed hash seed so
    that a re-run gives the same results, and a marker that finds every process it started."""
    return {
        "PATH": os.pathsep.join([sysconfig.get_path("scripts"), os.environ.get("PATH", "")]),
        "IPYTHONDIR": str(workdir / "ipython"),
        "JUPYTER_RUNTIME_DIR": str(workdir / "runtime"),
        "PYTHONHASHSEED": "0",
        "MPLBACKEND": "Agg",
        MARKER_ENV: marker,
    }


def _worker_context():
    """The forkserver context, preloaded with nbgrader: a worker starts in milliseconds.
    (Spawn where there is no forkserver: slower, the same otherwise.)"""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(WORKER_PRELOAD)
    return context


def run_with_limit(target: Callable, args: tuple, workdir: Path, limit: float) -> int | None:
    """Run ``target(*args)`` in a worker process; its exit code (negative: killed by that
    signal), or None when it ran past ``limit`` seconds.

    Either way every process it started (the kernel, anything the notebook spawned) is killed
    afterwards, found by the environment marker even once re-parented."""
    marker = uuid.uuid4().hex
    proc = _worker_context().Process(target=_in_worker, args=(target, args, workdir, marker))
    proc.start()
    _RUNNING.add(proc)
    try:
        proc.join(limit)
        return proc.exitcode
    finally:
        _RUNNING.discard(proc)
        kill_processes(proc, marker)


def _in_worker(target: Callable, args: tuple, workdir: Path, marker: str) -> None:
    """Worker side of run_with_limit: work in ``workdir``, log to its worker.log, set the
    environment the kernel inherits, then run the target."""
    os.chdir(workdir)
    log = os.open(workdir / "worker.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.environ.update(_worker_env(workdir, marker))
    logging.basicConfig(level=logging.INFO, format="%(relativeCreated)6d ms %(name)s: %(message)s")
    target(*args)


def kill_processes(proc: multiprocessing.process.BaseProcess, marker: str) -> None:
    """Kill the worker, its descendants and any process carrying its marker, then reap it."""
    import psutil

    victims = []
    if proc.is_alive():  # not reaped yet, so its pid cannot belong to another process
        try:
            victims += psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            pass
    for candidate in psutil.process_iter():
        try:
            if candidate.pid != os.getpid() and candidate.environ().get(MARKER_ENV) == marker:
                victims.append(candidate)
        except psutil.Error:
            continue
    if proc.is_alive():
        proc.kill()
    for victim in victims:
        try:
            victim.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(victims, timeout=5)
    proc.join()


def _last_lines(path: Path, count: int) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(lines[-count:])


# ---------------------------------------------------------------------------------------------
# Output: the CSV gradebook and the feedback files


def gradebook_rows(results: list[Result], lab: Lab) -> list[list[str]]:
    """Header and rows of the gradebook, sorted by student, with no run-dependent values."""
    header = ["student", *lab.tests, "total", "max", "status", "reason"]
    rows = [header]
    for r in sorted(results, key=lambda r: r.student):
        points = [f"{r.scores.get(test, 0.0):g}" for test in lab.tests]
        reason = _one_line(r.reason, MAX_REASON_CHARS)
        rows.append(
            [r.student, *points, f"{total(r, lab):g}", f"{lab.max_score:g}", r.status, reason]
        )
    return rows


def write_gradebook(results: list[Result], lab: Lab, out: Path) -> None:
    """Write the CSV through a temporary file and os.replace: a reader (or a crash) never sees
    half a gradebook, and the previous one survives a failed run."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(gradebook_rows(results, lab))
    atomic_write_text(out, buffer.getvalue())


def write_feedback(results: list[Result], lab: Lab, folder: Path) -> None:
    """One Markdown file per student: the total, then each exercise's points and message."""
    folder.mkdir(parents=True, exist_ok=True)
    for result in results:
        atomic_write_text(folder / f"{result.student}.md", feedback_markdown(result, lab))


def feedback_markdown(result: Result, lab: Lab) -> str:
    lines = [
        f"# {lab.name}: feedback for {result.student}",
        "",
        f"Score: **{total(result, lab):g} / {lab.max_score:g}**",
        "",
    ]
    if result.status != GRADED:
        lines += [f"Not graded ({result.status}): {result.reason}"]
    else:
        lines += [f"Note: {result.reason}", ""] * bool(result.reason)
        for test, points in lab.tests.items():
            lines += _exercise_lines(test, result.scores.get(test, 0.0), points, result.feedback)
    return "\n".join(lines).rstrip() + "\n"


def _exercise_lines(test: str, score: float, points: float, feedback: dict) -> list[str]:
    """A test cell's section: points, message, what went wrong before it, its output."""
    info = feedback.get(test, {})
    lines = [f"## {test}: {score:g} / {points:g}", "", info.get("message", "not run"), ""]
    if info.get("before"):
        lines += [f"- before it: {problem}" for problem in info["before"]] + [""]
    if info.get("output"):
        lines += _fenced(info["output"])
    return lines


def _fenced(text: str) -> list[str]:
    """A code block whose fence no backtick run in ``text`` can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}text", text, fence, ""]


def _one_line(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def truncate(text: str) -> str:
    """At most MAX_OUTPUT_LINES lines of MAX_LINE_CHARS, MAX_OUTPUT_CHARS in all, saying how
    much was left out."""
    lines = text.splitlines()
    kept, size = [], 0
    for line in lines[:MAX_OUTPUT_LINES]:
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS] + f" \u2026 [{len(line) - MAX_LINE_CHARS} chars cut]"
        if size + len(line) > MAX_OUTPUT_CHARS:
            break
        kept.append(line)
        size += len(line) + 1
    if len(kept) < len(lines):
        kept.append(f"\u2026 [output truncated: {len(lines) - len(kept)} more lines]")
    return "\n".join(kept)


# ---------------------------------------------------------------------------------------------
# Worker: one submission, in its own process


def worker_process(workdir: str) -> None:
    """Grade the submission of ``workdir/job.json`` and write ``workdir/result.json``. If this
    raises, the worker exits with 1 and the parent reports the last line of its log."""
    job = json.loads((Path(workdir) / "job.json").read_text(encoding="utf-8"))
    result = grade_in_worker(job)
    atomic_write_text(Path(workdir) / "result.json", json.dumps(result))


def grade_in_worker(job: dict) -> dict:
    """Check the file is a notebook of this lab, autograde it, read the scores and messages."""
    nb, status, reason = load_submission(Path(job["submission"]))
    if status:
        return {"status": status, "reason": reason}
    release = nbformat.read(job["release"], as_version=4)
    if reason := wrong_lab_reason(nb, release, job["lab"]):
        return {"status": WRONG_LAB, "reason": reason}
    db_url = f"sqlite:///{Path(job['workdir']) / 'gradebook.db'}"
    shutil.copyfile(job["db"], Path(job["workdir"]) / "gradebook.db")
    notes = restored_cells(nb, release, db_url, job["lab"])
    course = Path(job["workdir"]) / "course"
    submitted = course / "submitted" / STUDENT / job["lab"]
    submitted.mkdir(parents=True)
    nbformat.write(complete_kernelspec(nb), submitted / f"{job['lab']}.ipynb")
    if failure := autograde(course, db_url, job["lab"], job["timeout"]):
        return {"status": ERROR, "reason": failure}
    graded = nbformat.read(
        course / "autograded" / STUDENT / job["lab"] / f"{job['lab']}.ipynb", as_version=4
    )
    feedback, timeouts = read_feedback(graded, _test_cells(release), job["timeout"])
    if timeouts:
        notes.insert(0, f"timed out after {job['timeout']} s: {', '.join(timeouts)}")
    return {
        "status": GRADED,
        "reason": "; ".join(notes),
        "scores": read_scores(db_url, job["lab"]),
        "feedback": feedback,
    }


def load_submission(path: Path):
    """(notebook, "", "") or (None, status, reason) for a file that is not a readable notebook."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return None, NOT_A_NOTEBOOK, f"{path.name} is not text (a binary file?), not a notebook"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if text.lstrip().startswith("{"):
            where = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
            return None, CORRUPT, f"{path.name} is not valid JSON ({where}): cut short or edited?"
        return None, NOT_A_NOTEBOOK, f"{path.name} is not a notebook (not JSON)"
    if not isinstance(data, dict) or "nbformat" not in data:
        return None, NOT_A_NOTEBOOK, f"{path.name} is JSON but not a notebook"
    try:  # not nbformat.validate: labs lose kernelspec.display_name, which nbgrader puts back
        nb = nbformat.reads(text, as_version=4)
    except Exception as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return None, CORRUPT, f"{path.name} is not a valid notebook: {message}"
    return nb, "", ""


def _grade_ids(nb) -> list[str]:
    ids = [cell.metadata.get("nbgrader", {}).get("grade_id") for cell in nb.cells]
    return [i for i in ids if i]


def wrong_lab_reason(nb, release, lab: str) -> str:
    """Why ``nb`` is not a copy of this lab ("" when it is): it shares no nbgrader cell with it."""
    ids = set(_grade_ids(nb))
    if ids & set(_grade_ids(release)):
        return ""
    if not ids:
        return (
            f"none of the cells of {lab} are in it (no nbgrader cells at all): "
            f"was it started from labs/{lab}.ipynb?"
        )
    sample = ", ".join(sorted(ids)[:3])
    return f"its cells ({sample}, ...) are not those of {lab}: a notebook of another lab?"


def restored_cells(nb, release, db_url: str, lab: str) -> list[str]:
    """Notes naming the locked cells (tests, instructions) the student edited or deleted; nbgrader
    puts them back. A cell counts as edited when its checksum matches neither the lab's nor the
    solution's (the solution's test cells carry the hidden tests)."""
    from nbgrader.api import Gradebook
    from nbgrader.utils import compute_checksum

    with Gradebook(db_url) as gb:
        source = {c.name: c.checksum for c in gb.find_notebook(lab, lab).source_cells}
    cells = {}
    for cell in nb.cells:
        cells.setdefault(cell.metadata.get("nbgrader", {}).get("grade_id"), cell)
    edited, deleted = [], []
    for cell in release.cells:
        meta = cell.metadata.get("nbgrader", {})
        if not meta.get("locked"):
            continue
        theirs = cells.get(meta["grade_id"])
        if theirs is None:
            deleted.append(meta["grade_id"])
            continue
        try:
            checksum = compute_checksum(theirs)
        except Exception:  # metadata mangled beyond checksumming: it was edited
            checksum = None
        if checksum not in (meta.get("checksum"), source.get(meta["grade_id"])):
            edited.append(meta["grade_id"])
    notes = [f"restored edited cells: {', '.join(edited)}"] * bool(edited)
    return notes + [f"restored deleted cells: {', '.join(deleted)}"] * bool(deleted)


@contextmanager
def _captured_log(logger: logging.Logger, quiet: bool = True) -> Iterator[list[logging.LogRecord]]:
    """Collect a logger's warnings and errors (nbgrader logs a failure's traceback, then raises a
    generic NbGraderException); ``quiet`` also keeps them off the console."""
    records: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Collect(level=logging.WARNING)
    old_level, old_propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    if quiet:
        logger.setLevel(logging.WARNING)
        logger.propagate = False
    try:
        yield records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
        logger.propagate = old_propagate


def _failure_line(records: list[logging.LogRecord], exc: Exception) -> str:
    """The exception line of the last traceback nbgrader logged, else ``exc`` itself."""
    for record in reversed(records):
        message = record.getMessage()
        if message.startswith("Traceback (most recent call last)"):
            return exception_line(message)
    return f"{type(exc).__name__}: {exc}"


def exception_line(traceback_text: str) -> str:
    """``Name: message`` from a formatted traceback: the first unindented line after its last
    frame."""
    lines = ANSI.sub("", traceback_text).rstrip().splitlines()
    frames = [i for i, line in enumerate(lines) if line.startswith("  File ")]
    for line in lines[frames[-1] + 1 if frames else 0 :]:
        if line and not line.startswith(" "):
            return line
    return lines[-1] if lines else ""


def autograde(course: Path, db_url: str, lab: str, timeout: int) -> str:
    """Run nbgrader's Autograde converter on the one submission in ``course``: "" on success,
    else the error line. The kernel runs in ``autograded/student/LAB/``, which holds only the
    sanitized notebook."""
    from nbgrader.converters import Autograde
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config

    config = Config()
    config.CourseDirectory.root = str(course)
    config.CourseDirectory.db_url = db_url
    config.CourseDirectory.assignment_id = lab
    config.CourseDirectory.student_id = STUDENT
    config.Execute.timeout = timeout
    config.Execute.iopub_timeout = IOPUB_TIMEOUT
    config.Execute.startup_timeout = KERNEL_STARTUP_TIMEOUT
    config.OverwriteCells.add_missing_cells = True  # deleted test cells come back, and run
    app = Autograde(coursedir=CourseDirectory(config=config), config=config)
    app.force = True
    app.create_student = True
    with _captured_log(app.log, quiet=False) as records:  # the worker's log keeps them
        try:
            app.start()
        except Exception as exc:
            line = _failure_line(records, exc)
            hint = next((h for name, h in FAILURE_HINTS.items() if name in line), "")
            return f"nbgrader could not grade it: {hint}{line}"
    return ""


def read_scores(db_url: str, lab: str) -> dict[str, float]:
    """The points autograde saved for each grade cell, from the worker's gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb:
        notebook = gb.find_submission_notebook(lab, lab, STUDENT)
        return {grade.name: float(grade.score or 0.0) for grade in notebook.grades}


def read_feedback(nb, tests: dict[str, float], timeout: int) -> tuple[dict[str, dict], list[str]]:
    """Per test cell: its message and (truncated) output, with the problems of the cells run
    since the previous test (an answer that raised or timed out). Also the timed-out cells."""
    feedback: dict[str, dict] = {}
    timeouts: list[str] = []
    before: list[str] = []
    for index, cell in enumerate(nb.cells, start=1):
        if cell.cell_type != "code":
            continue
        name = cell.metadata.get("nbgrader", {}).get("grade_id") or f"cell {index}"
        message = cell_message(cell, timeout, graded=name in tests)
        if any(o.get("ename") == "CellTimeoutError" for o in cell.get("outputs", [])):
            timeouts.append(name)
        if name in tests:
            output = truncate(output_text(cell))
            feedback[name] = {"message": message or "passed", "output": output, "before": before}
            before = []
        elif message:
            before.append(f"{name}: {message}")
    return feedback, timeouts


def cell_message(cell, timeout: int, graded: bool) -> str:
    """One line saying why a cell failed ("" if it did not): the CheckFailed text, a timeout,
    the error's last line, or, in a test cell, stderr output (nbgrader scores it as a failure)."""
    outputs = cell.get("outputs", [])
    errors = [o for o in outputs if o.output_type == "error"]
    if any(e.get("ename") == "CellTimeoutError" for e in errors):
        return f"timed out after {timeout} s and was interrupted"
    if errors:
        name, value = errors[0].get("ename", "Error"), str(errors[0].get("evalue", ""))
        if name == "CheckFailed":
            return _one_line(f"\u274c {value}", MAX_MESSAGE_CHARS)
        return _one_line(f"{name}: {value}" if value.strip() else name, MAX_MESSAGE_CHARS)
    stderr = [o.text for o in outputs if o.output_type == "stream" and o.name == "stderr"]
    if stderr and graded:
        first = next((line for line in "".join(stderr).splitlines() if line.strip()), "")
        return _one_line(f"wrote to stderr, which counts as a failure: {first}", MAX_MESSAGE_CHARS)
    return ""


def output_text(cell) -> str:
    """What a cell printed (streams and plain-text results, without colours). Not tracebacks:
    the message line says what failed, and a traceback would show the hidden tests' code."""
    parts = []
    for output in cell.get("outputs", []):
        if output.output_type == "stream":
            parts.append(output.text)
        elif output.output_type in ("execute_result", "display_data"):
            parts.append(output.get("data", {}).get("text/plain", "") + "\n")
    return ANSI.sub("", "".join(parts)).rstrip("\n")
