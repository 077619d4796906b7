"""Driving nbgrader: the lab generated from its solution (every locked and test cell, hidden
tests included, recorded with its checksum), the exercises' titles and hidden test sources."""

from __future__ import annotations

import os
import re
import sysconfig
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import nbformat

from .forbidden import exercise_forbidden
from .gradebook import Lab
from .settings import UsageError


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
