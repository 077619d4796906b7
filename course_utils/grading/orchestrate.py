"""Grading a class folder: the solution's reference run, each hand-in in a worker of its own,
the cache, the progress lines, and one student's re-grade merged into the stored rows."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import asdict, replace
from pathlib import Path

from ..lessons import recording
from . import limiter
from .cache import ResultCache, run_key
from .gradebook import (
    ADJUSTED,
    ERROR,
    GRADED,
    KILLED,
    LATE_PENALTY,
    NOTES,
    Lab,
    Result,
    read_outcomes,
    total,
)
from .nbgrader_lab import prepare_lab
from .outcomes import DISK, TIME
from .roster import Roster, apply_roster
from .scoring import finish, verified, with_forbidden, with_limits
from .settings import DEFAULT_TOTAL_TIMEOUT, MIN_TIMEOUT, TIMEOUT_FACTOR, Settings, UsageError
from .submissions import Submission, find_submissions, private_copy, readable
from .workers import DiskWatch, kill_running, last_lines, run_with_limit

COURSE_COLUMNS = (ADJUSTED, LATE_PENALTY, NOTES)  # gradebook columns that are no score
WORKDIR_PREFIX = "course-grade-"  # then the grader's pid: a killed run's folder is found again


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
                result = with_forbidden(result, uses, lab, settings.forbid_calls)
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


# ---------------------------------------------------------------------------------------------
# One job: the reference run or one hand-in, in a worker


def _job(lab: Lab, workdir: Path, settings: Settings, **fields) -> dict:
    forbidden = {answer: info["forbidden"] for answer, info in lab.forbidden.items()}
    return {"lab": lab.name, "db": str(lab.db), "release": str(lab.release),
            "workdir": str(workdir), **settings.job(), "forbidden": forbidden,
            "hidden": lab.hidden, **fields}  # fmt: skip


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
