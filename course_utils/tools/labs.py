"""Generate the student labs from the solved notebooks with nbgrader's own preprocessors.

A solution carries nbgrader (schema 3) cell metadata: answer cells with ``### BEGIN SOLUTION`` /
``### END SOLUTION``, locked test cells with points, optionally ``### BEGIN HIDDEN TESTS``. The lab
is the solution with answers replaced by stubs, hidden tests removed, outputs cleared, checksums
recorded (for grading), then stripped clean like every lab.
"""

from __future__ import annotations

import difflib
import sys
import tempfile
from pathlib import Path

import nbformat
from nbgrader.preprocessors import (
    CheckCellMetadata,
    ClearHiddenTests,
    ClearMarkScheme,
    ClearOutput,
    ClearSolutions,
    ComputeChecksums,
    LockCells,
)

from ..core.cli import add_subcommand
from ..core.paths import LABS, SOLUTIONS
from .cleaning import strip


def _preprocessors():
    # The same order as nbgrader's generate_assignment: checksums are taken with the hidden
    # tests in place and again after they are cleared.
    return [
        LockCells(),
        ClearSolutions(),
        ClearOutput(),
        CheckCellMetadata(),
        ComputeChecksums(),
        ClearHiddenTests(),
        ClearMarkScheme(),
        ComputeChecksums(),
        CheckCellMetadata(),
    ]


# JupyterLab's Run All goes on past a cell with this tag when it raises (and nbclient does too),
# so an untouched lab shows every exercise's one line (not done, wrong and why, or correct)
# instead of stopping at the first. Grading reads each check cell's own result, not the tag.
RUN_ALL_TAG = "raises-exception"


def tag_exercises(nb) -> None:
    """Tag every code cell from the first answer cell on (answers, checks, and the cells between
    or after them that call an answer) so that Run All reaches every exercise."""
    started = False
    for cell in nb.cells:
        started = started or bool(cell.metadata.get("nbgrader", {}).get("solution"))
        if cell.cell_type == "code" and started:
            tags = cell.metadata.setdefault("tags", [])
            if RUN_ALL_TAG not in tags:
                tags.append(RUN_ALL_TAG)


def render_labs(solutions: list[Path]) -> dict[Path, str]:
    """The text of the lab each of ``solutions`` generates (one nbstripout run for them all:
    its start-up, not the cleaning, is what takes the time)."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "labs"  # strip() cleans by folder: as labs
        folder.mkdir()
        outs = {}
        for solution in solutions:
            nb = nbformat.read(solution, as_version=4)
            resources: dict = {}
            for preprocessor in _preprocessors():
                nb, resources = preprocessor.preprocess(nb, resources)
            tag_exercises(nb)
            outs[solution] = folder / solution.name
            nbformat.write(nb, outs[solution])
        result = strip(*outs.values()) if outs else None
        if result is not None and result.returncode:
            raise RuntimeError(f"nbstripout failed on the labs of {solutions}: {result.stderr}")
        return {solution: out.read_text(encoding="utf-8") for solution, out in outs.items()}


def render_lab(solution: Path) -> str:
    """The text of the lab that ``solution`` generates."""
    return render_labs([solution])[solution]


def build_all(solutions: Path = SOLUTIONS, labs: Path = LABS) -> list[Path]:
    labs.mkdir(exist_ok=True)
    written = []
    for solution, text in render_labs(sorted(solutions.glob("*.ipynb"))).items():
        target = labs / solution.name
        target.write_text(text, encoding="utf-8")
        written.append(target)
        print(f"built {target.relative_to(labs.parent)}")
    return written


def check_all(solutions: Path = SOLUTIONS, labs: Path = LABS) -> list[str]:
    """Problems found: a lab that differs from what its solution builds, or a lab with no
    solution. Empty when everything is in sync."""
    problems = []
    for solution, expected in render_labs(sorted(solutions.glob("*.ipynb"))).items():
        target = labs / solution.name
        if not target.exists():
            problems.append(f"{target}: missing; run `python -m course_utils labs build`")
            continue
        actual = target.read_text(encoding="utf-8")
        if actual != expected:
            diff = difflib.unified_diff(
                actual.splitlines(), expected.splitlines(), "committed", "built", lineterm="", n=1
            )
            excerpt = "\n".join(list(diff)[:12])
            problems.append(
                f"{target}: differs from what its solution builds; run "
                f"`python -m course_utils labs build`\n{excerpt}"
            )
    for lab in sorted(labs.glob("*.ipynb")):
        if not (solutions / lab.name).exists():
            problems.append(f"{lab}: has no solution in {solutions}; labs are generated only")
    return problems


def configure(parser) -> None:
    """The ``labs`` command: ``build`` and ``check``."""
    parser.description = "Regenerate labs/ from solutions/ (build) or check they are in sync."
    parser.epilog = (
        "examples:\n  python -m course_utils labs build\n  python -m course_utils labs check"
    )
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, summary, func in (
        ("build", "write every lab in labs/ from its solution", run_build),
        ("check", "fail when a committed lab differs from what its solution builds", run_check),
    ):
        child = add_subcommand(sub, name, summary, summary, f"python -m course_utils labs {name}")
        child.set_defaults(func=func)


def run_build(args) -> int:
    build_all()
    return 0


def run_check(args) -> int:
    problems = check_all()
    for p in problems:
        print(p, file=sys.stderr)
    print(f"labs: {len(problems)} problem(s)" if problems else "labs: in sync with solutions")
    return 1 if problems else 0
