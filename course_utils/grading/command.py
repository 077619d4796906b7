"""Grade collected lab hand-ins with nbgrader's autograder, each in a sandbox, into a CSV gradebook.

``python -m course_utils grade LAB SUBMISSIONS_DIR --out gradebook.csv [--feedback DIR]``

How it works, and why:

* The lab's solution notebook (``solutions/LAB.ipynb``: answers, test cells, hidden tests) goes
  once through nbgrader's own ``generate_assignment`` in a temporary course directory. That
  records every locked and test cell, hidden tests included, with its checksum, in a temporary
  sqlite gradebook (:mod:`.nbgrader_lab`). The instructor never sees either.
* The solution runs once with its checks recording what they expect (:mod:`.verify`): hand-ins
  are compared with that, outside their kernels, so a hand-in cannot switch its tests off
  (:mod:`.scoring`).
* Each hand-in is repaired (:mod:`.repair`: copied cells, cells out of order, old formats) and
  graded by nbgrader's ``autograde`` in a worker process of its own (:mod:`.autograde`): a
  private copy of that gradebook, a kernel in a bubblewrap sandbox (:mod:`.sandbox`), and a
  wall-time limit after which the worker and everything it started are killed (:mod:`.workers`;
  :mod:`.orchestrate` runs them over the class folder).
* Bad input never stops the run: links and special files (never opened), unreadable files,
  non-notebooks, notebooks of another lab, crashed or killed workers, a hand-in past the disk
  cap each become a row with a status and a reason. Each result is kept
  in a cache folder next to the gradebook (:mod:`.cache`), so an interrupted run resumes; the
  CSV is written once at the end, atomically, sorted by student (:mod:`.gradebook`).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path

from . import sandbox as sandboxes
from .adjustments import AdjustmentError, refuse_hand_edits, remember_written
from .course_rules import (
    CourseOptionError,
    add_arguments,
    apply_rules,
    fill_hand_ins,
    lms_paths,
    rules_from,
    write_lms_file,
)
from .gradebook import (
    GRADED,
    outcomes_path,
    summary_rows,
    summary_text,
    write_csv,
    write_feedback,
    write_gradebook,
    write_outcomes,
)
from .orchestrate import grade, merged
from .roster import ATTENTION, RosterError, closing_block, read_roster
from .settings import GRADE, Settings, UsageError, add_options, values_of
from .submissions import find_submissions

EXAMPLE = "python -m course_utils grade 01_tokens_and_embeddings subs/ --out gradebook.csv"


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
    add_options(parser, GRADE)  # the grader's settings (:mod:`.settings`)
    parser.add_argument(
        "--cache", type=Path, help="folder for per-hand-in results (default: OUT's name with "
        ".cache, next to it); a re-run grades only what is not in it",
    )  # fmt: skip
    parser.add_argument("--no-cache", action="store_true", help="grade everything again")
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
            jobs=settings.jobs,
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


def settings_from(args: argparse.Namespace) -> Settings:
    """Check the options and probe the sandbox (a UsageError saying how to fix either)."""
    if not args.submissions.is_dir() and not args.submissions.is_file():
        raise UsageError(
            f"submissions folder {args.submissions} does not exist; collect the notebooks "
            "into one folder as <student>.ipynb or <student>/<lab>.ipynb"
        )
    settings = Settings.given(GRADE, values_of(args, GRADE))  # checked: a UsageError
    box = None
    if settings.sandboxed:
        try:
            memory = settings.memory or sandboxes.default_memory(settings.jobs)
            box = sandboxes.check_sandbox(memory, settings.tasks)
        except sandboxes.SandboxUnavailable as exc:
            raise UsageError(str(exc)) from None
    threads = max(1, (os.cpu_count() or 1) // settings.jobs)
    return replace(settings, sandbox=box, threads=threads)


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
