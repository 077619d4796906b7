"""Grade collected lab hand-ins with nbgrader's autograder, each in a sandbox, into a CSV gradebook.

``python -m course_utils grade LAB SUBMISSIONS_DIR --out gradebook.csv [--feedback DIR]``

How it works, and why:

* The lab's solution notebook (``solutions/LAB.ipynb``: answers, test cells, hidden tests) goes
  once through nbgrader's own ``generate_assignment`` in a temporary course directory. That
  records every locked and test cell, hidden tests included, with its checksum, in a temporary
  sqlite gradebook. The instructor never sees either.
* The solution runs once with its checks recording what they expect (:mod:`.verify`): hand-ins
  are compared with that, outside their kernels, so a hand-in cannot switch its tests off.
* Each hand-in is repaired (:mod:`.repair`: copied cells, cells out of order, old formats) and
  graded by nbgrader's ``autograde`` in a worker process of its own (:mod:`.autograde`): a
  private copy of that gradebook, a kernel in a bubblewrap sandbox (:mod:`.sandbox`), and a
  wall-time limit after which the worker and everything it started are killed (:mod:`.workers`).
* Bad input never stops the run: links and special files (never opened), unreadable files,
  non-notebooks, notebooks of another lab, crashed or killed workers, a hand-in past the disk
  cap each become a row with a status and a reason. Each result is kept
  in a cache folder next to the gradebook (:mod:`.cache`), so an interrupted run resumes; the
  CSV is written once at the end, atomically, sorted by student (:mod:`.gradebook`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import sys
import sysconfig
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import nbformat

from ..lessons import recording
from . import limiter
from . import sandbox as sandboxes
from .adjustments import AdjustmentError, refuse_hand_edits, remember_written
from .cache import ResultCache, run_key
from .course_rules import (
    CourseOptionError,
    add_arguments,
    apply_rules,
    fill_hand_ins,
    lms_paths,
    rules_from,
    write_lms_file,
)
from .forbidden import exercise_forbidden, forbidden_note
from .gradebook import (
    ADJUSTED,
    ERROR,
    GRADED,
    KILLED,
    LATE_PENALTY,
    MAX_REASON_CHARS,
    NOTES,
    Lab,
    Result,
    one_line,
    outcomes_path,
    read_outcomes,
    summary_rows,
    summary_text,
    total,
    write_csv,
    write_feedback,
    write_gradebook,
    write_outcomes,
)
from .outcomes import (
    DISK,
    INSTRUCTOR,
    MEMORY,
    OUTPUT,
    PASSED,
    STUDENT,
    TASKS,
    TIME,
    entry,
    set_message,
)
from .roster import ATTENTION, Roster, RosterError, apply_roster, closing_block, read_roster
from .submissions import Submission, find_submissions, private_copy, readable
from .verify import UNREPORTED, verdict
from .workers import DiskWatch, kill_running, last_lines, run_with_limit

# The per-cell timeout, unless --timeout sets one: this many times the solution's slowest cell
# (measured by its reference run), and never under MIN_TIMEOUT seconds
TIMEOUT_FACTOR = 10
MIN_TIMEOUT = 30
DEFAULT_TOTAL_TIMEOUT = 1800  # seconds per submission, everything included
EXAMPLE = "python -m course_utils grade 01_tokens_and_embeddings subs/ --out gradebook.csv"
COURSE_COLUMNS = (ADJUSTED, LATE_PENALTY, NOTES)  # gradebook columns that are no score
WORKDIR_PREFIX = "course-grade-"  # then the grader's pid: a killed run's folder is found again


class UsageError(Exception):
    """A problem with the command line; ``main`` prints it on one line and exits with 2."""


@dataclass(frozen=True)
class Settings:
    """How each hand-in is graded: limits, the sandbox (None: unsandboxed), kernel threads."""

    timeout: int | None = None  # per cell; None: derived from the solution's run (derive)
    total_timeout: int = DEFAULT_TOTAL_TIMEOUT
    sandbox: sandboxes.Sandbox | None = None
    threads: int = 1
    host_bytes: int = sandboxes.MAX_HOST_BYTES  # what one hand-in may leave on the disk
    forbid_reference: bool = True  # an answer that uses a forbidden callable scores 0
    memory_needed: str = ""  # what the solution's run needs (Gradescope's bundle measures it)

    def key(self) -> dict:
        """What every cached result depends on: whether the hand-ins run sandboxed and the
        forbidden calls. Not --jobs, not the kernel's threads, not the limits: those decide
        only a hand-in that hit one (:meth:`limits`)."""
        sandboxed = self.sandbox is not None
        return {"sandboxed": sandboxed, "forbid_reference": self.forbid_reference}

    def limits(self) -> dict:
        """Each kind of limit (:mod:`.outcomes`) as set for this run: a result that hit one
        kind is graded again when that kind's setting changes (a timed-out hand-in may pass
        with a longer --timeout, one out of memory with a larger --memory)."""
        box = self.sandbox
        return {
            TIME: [self.timeout, self.total_timeout],
            MEMORY: [box.memory, box.limiter.kind] if box else None,
            TASKS: [box.tasks, box.limiter.kind] if box else None,
            DISK: self.host_bytes,
            OUTPUT: None,  # fixed caps: no option raises them
        }


# ---------------------------------------------------------------------------------------------
# Command line


def resolve_lab(arg: str) -> Path:
    """The solution notebook named by ``arg``: a lab name (``solutions/<name>.ipynb``) or a path.

    A path into ``labs/`` is refused: the student version has no hidden tests to grade with."""
    from ..core.paths import LABS, SOLUTIONS

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


def configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The ``grade`` command's arguments; ``func`` runs it."""
    parser.description = "Autograde collected submissions of one lab into a CSV gradebook."
    parser.epilog = f"example: {EXAMPLE} --feedback feedback/ --jobs 2"
    parser.add_argument("lab", help="lab name (solutions/LAB.ipynb) or path to its solution")
    parser.add_argument(
        "submissions", type=Path, help="folder of <student>.ipynb or <student>/<lab>.ipynb, or "
        "one hand-in (its row replaces that student's in the gradebook)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, required=True, help="the CSV gradebook to write")
    parser.add_argument(
        "--feedback", type=Path, help="write <student>.md feedback files here (what hidden "
        "tests check and print left out; full copies for you in FEEDBACK.instructor/)",
    )  # fmt: skip
    parser.add_argument(
        "--roster", type=Path, help="the class: Canvas's gradebook export, Moodle's grading "
        "worksheet or a CSV with an id and a name column; hand-ins are matched to it, a "
        f"student with none is a row with status missing (exit status {ATTENTION}: see the "
        "closing block)",
    )  # fmt: skip
    add_arguments(parser)  # --due, --late-penalty, --late-cap, --adjustments, --format
    parser.add_argument(
        "--timeout", type=int, default=None,
        help=f"seconds one cell may run before it is interrupted (default: {TIMEOUT_FACTOR}x "
        f"the solution's slowest cell, at least {MIN_TIMEOUT})",
    )  # fmt: skip
    parser.add_argument(
        "--total-timeout", type=int, default=DEFAULT_TOTAL_TIMEOUT,
        help=f"seconds one submission may take in all (default {DEFAULT_TOTAL_TIMEOUT})",
    )  # fmt: skip
    parser.add_argument("--jobs", type=int, default=1, help="hand-ins graded at once (default 1)")
    parser.add_argument(
        "--memory", help="memory cap per sandboxed process and per hand-in in all, like 4G "
        "(default: 80%% of this machine's memory split between the jobs)",
    )  # fmt: skip
    parser.add_argument(
        "--tasks", type=int, default=limiter.DEFAULT_TASKS,
        help=f"processes and threads per hand-in in all (default {limiter.DEFAULT_TASKS})",
    )  # fmt: skip
    parser.add_argument(
        "--no-sandbox", action="store_true",
        help="grade without bubblewrap: the hand-ins' code runs as you, with your files in reach",
    )  # fmt: skip
    parser.add_argument(
        "--cache", type=Path, help="folder for per-hand-in results (default: OUT's name with "
        ".cache, next to it); a re-run grades only what is not in it",
    )  # fmt: skip
    parser.add_argument("--no-cache", action="store_true", help="grade everything again")
    parser.add_argument(
        "--allow-reference", dest="forbid_reference", action="store_false",
        help="only report an answer that calls what its exercise asks the student to write "
        "(the solution's metadata names it); by default that exercise scores 0",
    )  # fmt: skip
    parser.add_argument(  # the default since issue 35; kept so that old commands still work
        "--forbid-reference", dest="forbid_reference", action="store_true",
        help=argparse.SUPPRESS,
    )  # fmt: skip
    parser.set_defaults(func=run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """``python -m course_utils grade``: exit 0 once the gradebook is written (a submission that
    could not be graded is a row with its status, not a failure), 2 for a usage error, 3 once
    it is written with hand-ins on no roster row, roster students with no hand-in or
    adjustments for no one (named in the run's closing block)."""
    parser = configure(argparse.ArgumentParser(prog="python -m course_utils grade"))
    args = parser.parse_args(argv)
    return args.func(args)


def run(args: argparse.Namespace) -> int:
    """The ``grade`` command, from parsed arguments."""
    cache = None if args.no_cache else (args.cache or args.out.with_suffix(".cache"))
    try:
        solution = resolve_lab(args.lab)
        settings = settings_from(args)
        roster = read_roster(args.roster) if getattr(args, "roster", None) else None
        rules = rules_from(args, roster)
        refuse_hand_edits(args.out)  # the gradebook is output, never input
        print(f"grade: {sandbox_line(settings.sandbox)}", flush=True)
        for path in filter(None, [args.out, args.feedback and args.feedback / "x.md"]):
            check_writable(path)
        skip = [args.out, args.feedback, cache, summary_path(args.out), outcomes_path(args.out)]
        skip += lms_paths(args.out)
        results, lab = grade(
            solution,
            args.submissions,
            settings=settings,
            jobs=args.jobs,
            cache=cache,
            skip=skip,
            roster=roster,
        )
    except (UsageError, RosterError, CourseOptionError, AdjustmentError) as problem:
        print(f"grade: error: {problem}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"grade: interrupted; {args.out} was not written", file=sys.stderr)
        return 130
    regraded = results
    if args.submissions.is_file():  # one student: the others' rows kept, their files untouched
        results = merged(results, args.out, lab)
        # the kept rows' hand-ins looked at again (not graded) for their times
        others = find_submissions(args.submissions.parent, lab.name, [p for p in skip if p])
        fill_hand_ins(results, others, roster)
    problems = apply_rules(results, lab, rules)  # the late policy, the adjustments file
    write_gradebook(results, lab, args.out)
    write_outcomes(results, lab, args.out)
    remember_written(args.out)
    lms_file = write_lms_file(results, lab, rules, args.out, solution)
    rows = summary_rows(results, lab)
    write_csv(summary_path(args.out), rows)
    if args.feedback:
        instructor = args.feedback.with_name(args.feedback.name + ".instructor")
        write_feedback(regraded, lab, args.feedback, instructor)
    print(summary_text(rows))
    graded = sum(r.status == GRADED for r in results)
    also = f", {lms_file.name}" if lms_file else ""
    print(f"wrote {args.out} and {summary_path(args.out).name}{also}: {len(results)} students, "
          f"{graded} graded")  # fmt: skip
    block = closing_block(results, problems)  # one block, and its exit status
    if block:
        print("\n".join(block))
    return ATTENTION if block else 0


def summary_path(out: Path) -> Path:
    """The class summary, beside the gradebook: ``gradebook.csv`` -> ``gradebook.summary.csv``."""
    return out.with_name(f"{out.stem}.summary.csv")


def merged(results: list[Result], out: Path, lab: Lab) -> list[Result]:
    """One student re-graded (a file was passed): every other row kept as it was, read from the
    outcomes stored beside the gradebook at ``out`` (feedback included). A gradebook written
    before that file existed gives its CSV rows (scores, status, reason)."""
    import csv

    mine = {r.student for r in results}
    stored = read_outcomes(out, lab)
    if stored is not None:
        kept = [r for student, r in stored.items() if student not in mine]
        kept = [r.rescored(lab.tests) or r for r in kept]  # the points of this run
        return sorted([*results, *kept], key=lambda r: r.student)
    if not out.exists():
        return results
    with out.open(encoding="utf-8", newline="") as file:
        rows = list(csv.DictReader(file))
    kept = []
    for row in rows:
        student = row.get("student", "")
        student = student[1:] if student.startswith("'") else student  # spreadsheet-safe form
        if student and student not in mine:
            kept.append(_row_result(row, student))
    return sorted([*results, *kept], key=lambda r: r.student)


def _row_result(row: dict, student: str) -> Result:
    """A gradebook row read back as a Result (scores, status, reason; no feedback)."""
    fixed = {"student", "name", "file", "total", "max", "status", "reason", *COURSE_COLUMNS}
    scores = {k: float(v) for k, v in row.items() if k not in fixed and v not in (None, "")}

    def plain(text: str) -> str:
        return text[1:] if text.startswith("'") else text

    return Result(student, row.get("status", ""), plain(row.get("reason", "")), scores,
                  name=plain(row.get("name", "")), file=plain(row.get("file", "")))  # fmt: skip


def settings_from(args: argparse.Namespace) -> Settings:
    """Check the options and probe the sandbox (a UsageError saying how to fix either)."""
    if not args.submissions.is_dir() and not args.submissions.is_file():
        raise UsageError(
            f"submissions folder {args.submissions} does not exist; collect the notebooks "
            "into one folder as <student>.ipynb or <student>/<lab>.ipynb"
        )
    if min(args.timeout or 1, args.total_timeout, args.jobs, args.tasks) < 1:
        raise UsageError("--timeout, --total-timeout, --jobs and --tasks must be positive")
    try:
        memory = sandboxes.parse_memory(args.memory) if args.memory else None
    except ValueError as exc:
        raise UsageError(f"--memory: {exc}") from None
    box = None
    if not args.no_sandbox:
        try:
            memory = memory or sandboxes.default_memory(args.jobs)
            box = sandboxes.check_sandbox(memory, args.tasks)
        except sandboxes.SandboxUnavailable as exc:
            raise UsageError(str(exc)) from None
    threads = max(1, (os.cpu_count() or 1) // args.jobs)
    forbid = args.forbid_reference
    return Settings(args.timeout, args.total_timeout, box, threads, forbid_reference=forbid)


def sandbox_line(box: sandboxes.Sandbox | None) -> str:
    """What the grader says first: which sandbox each hand-in runs in, or that it runs in none."""
    if box is None:
        return "no sandbox (--no-sandbox): the hand-ins' code runs as you, with your files in reach"
    return f"each hand-in runs in a sandbox: {box.describe()}; {box.limits()}"


def check_writable(path: Path) -> None:
    """Fail before grading, not after it, when ``path`` cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {path.parent}: {exc.strerror}") from None
    if path.is_dir() or not os.access(path.parent, os.W_OK):
        raise UsageError(f"cannot write {path}; pass a writable file path")


# ---------------------------------------------------------------------------------------------
# Grading a folder


def grade(
    solution: Path,
    submissions: Path,
    *,
    settings: Settings | None = None,
    jobs: int = 1,
    cache: Path | None = None,
    skip: list[Path | None] | None = None,
    log: Callable[[str], None] = print,
    student: str | None = None,
    roster: Roster | None = None,
) -> tuple[list[Result], Lab]:
    """Grade every submission in ``submissions`` against ``solution``; rows sorted by student.

    ``skip`` names paths inside ``submissions`` that are not hand-ins (the gradebook itself);
    results already in ``cache`` for the same hand-in, solution and settings are reused. With
    ``student``, the whole folder is that one student's hand-in (Gradescope's layout); a file
    for ``submissions`` is one student's hand-in in a class folder. ``roster``: the class, as
    read (:mod:`.roster`). Each hand-in is read once, without following links, into a private
    copy."""
    settings = settings or Settings()
    remove_stale_workdirs()
    only = submissions if submissions.is_file() else None
    folder = submissions.parent if only else submissions
    with tempfile.TemporaryDirectory(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-") as tmp:
        lab = prepare_lab(solution, Path(tmp) / "lab")
        skipped = [p for p in skip or [] if p]
        found = find_submissions(folder, lab.name, skip=skipped, student=student, only=only)
        if not found and not roster:
            raise UsageError(
                f"no hand-ins in {readable(str(submissions))}: it is empty; collect the "
                "notebooks into it as <student>.ipynb or <student>/<lab>.ipynb"
            )
        if roster:  # one file re-graded: named by the roster, the others' rows kept as they are
            found = [s for s in apply_roster(found, roster) if s.file or not only]
        store = ResultCache(cache, run_key(solution, settings.key())) if cache else None
        results, todo, reference = [], [], None
        for i, sub in enumerate(found):
            if sub.path is not None:
                sub = private_copy(sub, folder, Path(tmp) / "hand-ins" / str(i))
            done = None
            if settings.timeout is None and sub.path is not None:  # once, before the first
                settings, reference = derive_timeout(lab, solution, settings, store, Path(tmp), log)
            if store and sub.path:
                done = store.get(sub.student, sub.path.read_bytes(), settings.limits(), lab.tests)
            if sub.path is None or done:
                results.append(finish(done or Result(sub.student, sub.status, sub.reason), sub))
            else:
                todo.append(sub)
        if todo:
            counter = Progress(len(found), len(found) - len(todo), log)
            results += _grade_all(lab, solution, todo, settings, jobs, store, Path(tmp), counter,
                                  reference)  # fmt: skip
    return sorted(results, key=lambda r: r.student), lab


def derive_timeout(lab, solution, settings, store, tmp: Path, log) -> tuple[Settings, dict]:
    """The settings with the per-cell timeout derived from the solution's own run (its slowest
    cell times TIMEOUT_FACTOR, at least MIN_TIMEOUT), said in one line; and that run's records.
    The solution's run itself has the whole-submission limit per cell."""
    trusted = replace(settings, timeout=settings.total_timeout)
    reference = reference_records(lab, solution, trusted, store, tmp / "ref")
    slowest = float(reference.get(SLOWEST) or 0.0)
    timeout = max(MIN_TIMEOUT, math.ceil(TIMEOUT_FACTOR * slowest))
    log(
        f"grade: per-cell timeout {timeout} s ({TIMEOUT_FACTOR}x the solution's slowest cell, "
        f"{slowest:.1f} s here, at least {MIN_TIMEOUT} s; --timeout sets another)"
    )
    return replace(settings, timeout=timeout), reference


class Progress:
    """The progress line: ``graded 7/21: alice: 8/10 graded``, counting the cached ones."""

    def __init__(self, total: int, done: int, log: Callable[[str], None]) -> None:
        self.total, self.done, self.log = total, done, log

    def __call__(self, line: str) -> None:
        if line.startswith("warning: "):
            self.log(line)
            return
        self.done += 1
        self.log(f"graded {self.done}/{self.total}: {line}")


def remove_stale_workdirs() -> None:
    """Remove the temporary folders of grading runs that were killed (their process is gone):
    ``kill -9`` leaves one behind, and the next run cleans it up."""
    pattern = re.compile(rf"{re.escape(WORKDIR_PREFIX)}(\d+)-")
    for folder in Path(tempfile.gettempdir()).glob(f"{WORKDIR_PREFIX}*"):
        match = pattern.match(folder.name)
        if not match or not folder.is_dir() or folder.stat().st_uid != os.getuid():
            continue
        try:
            os.kill(int(match.group(1)), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except PermissionError:  # alive, someone else's
            pass


def _grade_all(lab, solution, todo, settings, jobs, store, tmp, log, done=None) -> list[Result]:
    """Grade ``todo`` in ``jobs`` workers, after (and alongside) the solution's reference run
    (``done``: its records, when it already ran)."""
    results, warned = [], done is not None  # a derived timeout needs no warning
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        if done is None:
            reference = pool.submit(reference_records, lab, solution, settings, store, tmp / "ref")
        else:
            reference = Future()
            reference.set_result(done)
        futures = {
            pool.submit(grade_safely, lab, sub, tmp / f"s{i}", settings): sub
            for i, sub in enumerate(todo)
        }
        try:
            for future in as_completed(futures):
                result, records, uses = future.result()
                result = verified(result, records, reference.result(), lab)
                result = with_forbidden(result, uses, lab, settings.forbid_reference)
                result = with_limits(result, settings)
                result.points = dict(lab.tests)
                if store and futures[future].path:
                    content = futures[future].path.read_bytes()
                    store.put(result.student, content, result, settings.limits())
                results.append(result)
                if not warned:
                    warned = True
                    if warning := timeout_warning(reference.result(), settings.timeout):
                        log(warning)
                log(_progress_line(result, lab))
        except BaseException:  # Ctrl-C or a failed reference run: stop now, not after the rest
            pool.shutdown(wait=False, cancel_futures=True)
            kill_running()
            raise
    return results


SLOWEST = "__slowest_cell_seconds__"  # kept with the reference records: its slowest cell's time
PEAK = "__peak_bytes__"  # and the memory its worker and kernel peaked at


def measure_solution(solution: Path) -> dict:
    """Run the solution once (unsandboxed: it is the course's own) and return its records,
    with its slowest cell's seconds (SLOWEST) and the memory its run peaked at (PEAK), this
    process's own included (it is the grader, which runs beside each hand-in)."""
    import resource

    settings = Settings(timeout=DEFAULT_TOTAL_TIMEOUT)
    with tempfile.TemporaryDirectory(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-") as tmp:
        lab = prepare_lab(solution, Path(tmp) / "lab")
        records = reference_records(lab, solution, settings, None, Path(tmp) / "ref")
    grader = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {**records, PEAK: records.get(PEAK, 0) + grader}


def timeout_warning(reference: dict, timeout: float) -> str:
    """One line when --timeout leaves a hand-in less than twice the time the solution's own
    slowest cell took ("" otherwise): a correct but slower answer would be cut off."""
    slowest = reference.get(SLOWEST)
    if not isinstance(slowest, (int, float)) or timeout >= 2 * slowest:
        return ""
    return (
        f"warning: --timeout {timeout:g} s is under twice the solution's slowest cell "
        f"({slowest:.1f} s here): correct answers may time out; pass --timeout "
        f"{max(int(3 * slowest) + 1, 2)} or more"
    )


def _progress_line(result: Result, lab: Lab) -> str:
    line = f"{result.student}: {total(result, lab):g}/{lab.max_score:g} {result.status}"
    return f"{line} ({result.reason})" if result.reason else line


@contextmanager
def _alembic_in_process() -> Iterator[None]:
    """Let nbgrader read its database schema's version in this process.

    A new nbgrader gradebook asks for it by running the ``alembic`` script (which must be on
    PATH) in a subprocess, a start-up far slower than the same lookup through alembic's own API,
    and paid on every grading run. Any failure falls back to nbgrader's."""
    import nbgrader.api

    original = nbgrader.api.get_alembic_version

    def head() -> str:
        """The head revision of nbgrader's migrations, read by alembic's API."""
        try:
            from alembic.config import Config
            from alembic.script import ScriptDirectory
            from nbgrader.dbutil import _temp_alembic_ini

            with _temp_alembic_ini("sqlite:////tmp/gradebook.db") as ini:
                return ScriptDirectory.from_config(Config(ini)).get_current_head()
        except Exception:
            return original()

    nbgrader.api.get_alembic_version = head
    old_path = os.environ.get("PATH", "")  # the fallback runs the script next to this Python
    os.environ["PATH"] = os.pathsep.join([sysconfig.get_path("scripts"), old_path])
    try:
        yield
    finally:
        nbgrader.api.get_alembic_version = original
        os.environ["PATH"] = old_path


def prepare_lab(solution: Path, workdir: Path) -> Lab:
    """Run nbgrader's generate_assignment on the solution in a temporary course directory.

    The gradebook it writes holds each locked and test cell as in the source (hidden tests
    included), which is what autograde restores into every submission."""
    from nbgrader.converters import GenerateAssignment
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config

    from .autograde import captured_log, complete_kernelspec, failure_line, test_cells

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
    with _alembic_in_process(), captured_log(app.log) as records:
        try:
            app.start()
        except Exception as exc:
            reason = failure_line(records, exc)
            message = f"nbgrader could not generate the lab from {solution}: {reason}"
            raise UsageError(message) from None
    release = course / "release" / name / f"{name}.ipynb"
    tests = test_cells(nbformat.read(release, as_version=4))
    if not tests:
        raise UsageError(
            f"{solution} has no graded test cells (nbgrader metadata with points); "
            "is it a solution notebook?"
        )
    forbidden = exercise_forbidden(source)
    handed_out = _test_sources(nbformat.read(release, as_version=4))
    hidden = {
        t: handed_out.get(t, "") for t, cell in _test_sources(source).items()
        if t in tests and HIDDEN in cell
    }  # fmt: skip
    return Lab(name=name, db=db, release=release, tests=tests, forbidden=forbidden,
               titles=exercise_titles(source), hidden=hidden)  # fmt: skip


HIDDEN = "### BEGIN HIDDEN TESTS"


def _test_sources(nb) -> dict[str, str]:
    return {
        c.metadata["nbgrader"]["grade_id"]: c.source
        for c in nb.cells
        if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")
    }


def exercise_titles(nb) -> dict[str, str]:
    """test grade_id -> the Markdown heading above its exercise ("Exercise 1: the causal mask"),
    its points in parentheses left out: what a student's feedback calls the exercise."""
    titles, heading = {}, ""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            lines = [ln for ln in cell.source.splitlines() if ln.startswith("##")]
            if lines:
                title = lines[0].lstrip("#").strip()
                heading = re.sub(r"\s*\(\d+(\.\d+)?\s*points?\)\s*$", "", title)
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            if heading:
                used = heading in titles.values()
                titles[meta["grade_id"]] = f"{heading} ({meta['grade_id']})" if used else heading
    return titles


# ---------------------------------------------------------------------------------------------
# One job: the reference run or one hand-in, in a worker


def _job(lab: Lab, workdir: Path, settings: Settings, **fields) -> dict:
    box = settings.sandbox
    sandbox = None
    if box:
        sandbox = {"bwrap": box.bwrap, "memory": box.memory, "tasks": box.tasks, "user": box.user}
    forbidden = {answer: info["forbidden"] for answer, info in lab.forbidden.items()}
    return {"lab": lab.name, "db": str(lab.db), "release": str(lab.release),
            "workdir": str(workdir), "timeout": settings.timeout, "sandbox": sandbox,
            "threads": settings.threads, "forbidden": forbidden, "hidden": lab.hidden,
            **fields}  # fmt: skip


def run_job(job: dict, workdir: Path, settings: Settings) -> tuple[dict | None, int | None, str]:
    """Run ``job`` in a worker: its result (or None), the worker's exit code, and why the disk
    cap stopped it ("" if it did not)."""
    from .autograde import worker_process

    workdir.mkdir(parents=True)
    box = settings.sandbox
    group = limiter.make_group(box.limiter, box.memory, box.tasks) if box else limiter.Group()
    (workdir / "job.json").write_text(json.dumps(job | {"group": asdict(group)}), "utf-8")
    watch = DiskWatch(workdir, settings.host_bytes, [workdir / "k"])
    try:
        returncode = run_with_limit(
            worker_process, (str(workdir),), workdir, settings.total_timeout, watch
        )
    finally:
        limiter.remove_group(group)
    result_file = workdir / "result.json"
    if result_file.exists():
        return json.loads(result_file.read_text(encoding="utf-8")), returncode, watch.stopped
    return None, returncode, watch.stopped


def reference_records(lab: Lab, solution: Path, settings: Settings, store, workdir: Path):
    """grade_id -> the check records of the solution's run (cached with the results)."""
    if store and (cached := store.get_reference()) is not None:
        return cached
    job = _job(lab, workdir, settings, mode=recording.REFERENCE, solution=str(solution.resolve()))
    try:
        data, returncode, stopped = run_job(job, workdir, settings)
        if data is None or stopped:
            why = stopped or _worker_failure(returncode, workdir, settings.total_timeout)
            raise UsageError(f"the solution {solution} could not be run: {why}")
        if data["status"] != GRADED:
            raise UsageError(f"cannot grade against {solution}: {data['reason']}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    records = {**data["records"], SLOWEST: data.get("slowest", 0.0)}
    records[PEAK] = data.get("peak_bytes", 0)
    if store:
        store.put_reference(records)
    return records


def grade_safely(
    lab: Lab, sub: Submission, workdir: Path, settings: Settings
) -> tuple[Result, dict, dict]:
    """Grade one hand-in in a worker: its row (not yet verified), its check records and the
    forbidden callables its answers use. Nothing it raises can lose the student's row."""
    records: dict = {}
    uses: dict = {}
    try:
        job = _job(
            lab, workdir, settings, mode=recording.RECORD, submission=str(sub.path.resolve())
        )
        data, returncode, stopped = run_job(job, workdir, settings)
        if data is None:
            why = stopped or _worker_failure(returncode, workdir, settings.total_timeout)
            status = KILLED if returncode is None or stopped else ERROR
            hit = [DISK] if stopped else [TIME] if returncode is None else []
            result = Result(sub.student, status, why, limits=hit)
        else:
            records, uses = data.pop("records", {}), data.pop("forbidden", {})
            result = Result(sub.student, **data)
            result.reason = "; ".join(filter(None, [stopped, result.reason]))
            result.limits = sorted({*result.limits, *([DISK] if stopped else [])})
    except Exception as exc:  # a bug or an OS error: report it in the row, grade the others
        result = Result(sub.student, ERROR, f"grading crashed: {type(exc).__name__}: {exc}")
    finally:  # nbgrader's read-only files go too: their folders are writable
        shutil.rmtree(workdir, ignore_errors=True)
    result.reason = result.reason.replace(str(workdir.parent), "<tmp>")  # no run-dependent paths
    return finish(result, sub), records, uses


def _worker_failure(returncode: int | None, workdir: Path, limit: float) -> str:
    if returncode is None:
        return f"ran past the {limit:g} s limit for one submission (--total-timeout)"
    if returncode < 0:
        return f"the grading process was killed by signal {-returncode} (by the notebook?)"
    last = last_lines(workdir / "worker.log", 1)
    return f"the grading process failed (exit {returncode}): {last}"


def finish(result: Result, sub: Submission) -> Result:
    """The row as the gradebook shows it: the submission's note first, on one line."""
    result.name, result.file = sub.name or sub.student, sub.file
    result.hand_in = sub.hand_in  # the LMS's id, late mark, time; roster match
    if sub.note and not result.reason.startswith(sub.note):
        result.reason = "; ".join(filter(None, [sub.note, result.reason]))
    result.reason = one_line(result.reason, MAX_REASON_CHARS)
    return result


def verified(result: Result, records: dict, reference: dict, lab: Lab) -> Result:
    """The row with each test cell scored by its checks' values, compared here with the
    solution's: a cell whose values do not match scores 0, whatever its kernel reported."""
    if result.status != GRADED:
        return result
    for test in lab.tests:
        ok, message, hidden = verdict(records.get(test, []), reference.get(test, []))
        info = result.feedback.setdefault(test, entry())
        audience = INSTRUCTOR if hidden else STUDENT
        if message:
            set_message(info, message, audience)
        elif not ok and info.get("message") == PASSED:  # no error, yet a check is missing
            missing = reference[test][len(records.get(test, []))].get("name")
            set_message(info, f"\u274c {missing}: {UNREPORTED}", audience)
        if not ok:
            result.scores[test] = 0.0
    return result


def with_forbidden(result: Result, uses: dict, lab: Lab, forbid: bool) -> Result:
    """The row with each exercise whose answer uses a forbidden callable named in its reason and
    in the exercise's feedback (the exercise and each callable by its full name); with
    ``forbid`` (the default; ``--allow-reference`` turns it off) the exercise scores 0."""
    if result.status != GRADED:
        return result
    notes = []
    for answer, used in sorted(uses.items()):
        test = lab.forbidden.get(answer, {}).get("test")
        if test not in lab.tests:
            continue
        note = forbidden_note(lab.title(test), used)
        notes.append(note)
        info = result.feedback.setdefault(test, entry())
        info["before"] = [*info.get("before", []), note]
        if forbid:
            result.scores[test] = 0.0
            set_message(info, f"\u274c {note}: this exercise scores 0")
    if notes:
        result.reason = one_line("; ".join(filter(None, [*notes, result.reason])), MAX_REASON_CHARS)
    return result


def with_limits(result: Result, settings: Settings) -> Result:
    """The row with the exercise whose kernel was killed for memory (its ``limit`` field, set
    where the kernel died: the OOM kills its group counted, or "probably" where no group counts
    them) told so, in the student's feedback and the instructor's, with the limit and how to
    raise it."""
    if result.status != GRADED or MEMORY not in result.limits:
        return result
    box = settings.sandbox
    limit = ""
    if settings.memory_needed:  # in Gradescope: the container's memory is what ran out
        limit = f" (this lab needs about {settings.memory_needed}: give the autograder more)"
    elif box:
        limit = f" (the limit: {sandboxes.format_memory(box.memory)}; --memory raises it)"
    for info in result.feedback.values():
        hit = info.get("limit") or {}
        if hit.get("kind") == MEMORY and (hit.get("oom_kills") or hit.get("probably")):
            message = f"\u274c the kernel ran out of memory while this ran and was killed{limit}"
            note = f"ran out of memory{limit}"
            if hit.get("probably"):  # a SIGKILL, as the OOM killer sends; no group counted it
                message = f"\u274c the kernel was killed while this ran, probably for memory{limit}"
                note = f"probably ran out of memory (killed; no limiter counts OOM kills){limit}"
            set_message(info, message)
            result.reason = one_line("; ".join([note, result.reason]).strip("; "), MAX_REASON_CHARS)
            break
    return result
