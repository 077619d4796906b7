"""``python -m course_utils COMMAND`` (installed as ``gpt-course COMMAND`` too): one command-line
tree over the modules that own commands.

Each command lives in the module that does the work and registers its own arguments through a
``configure(parser)`` function; this table only names the module. A command's module is imported
when that command runs, so ``--help`` and ``doctor`` stay quick and need neither nbgrader nor a
prepared corpus.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from ..core.cli import run_command
from .python_check import refusal, venv_fix

# command -> (module, its configure function, one line of help)
COMMANDS = {
    "bookgpt": ("course_utils.projects.bookgpt", "configure",
                "BookGPT: prepare a book corpus, train (resumable, DDP), sample"),
    "sumgpt": ("course_utils.projects.sumgpt", "configure",
               "SumGPT: train the 3-digit adder or score a checkpoint"),
    "flops": ("course_utils.core.flops", "configure",
              "a forward/training FLOP table for a model configuration"),
    "inspect": ("course_utils.lessons.inspector", "configure",
                "parameter split, training memory and container audit of a model"),
    "open": ("course_utils.tools.open_course", "configure",
             "copy the lessons and labs into your folder and open JupyterLab there"),
    "doctor": ("course_utils.tools.doctor", "configure",
               "check this environment and say how to fix what is missing"),
    "grade": ("course_utils.grading.command", "configure",
              "autograde a folder of lab hand-ins into a CSV gradebook"),
    "gradescope": ("course_utils.grading.gradescope", "configure",
                   "write a Gradescope autograder bundle for a lab"),
    "labs": ("course_utils.tools.labs", "configure",
             "regenerate labs/ from solutions/, or check they are in sync"),
    "hosted": ("course_utils.tools.hosted", "configure",
               "put the course's install lines atop each lesson's and solution's first cell"),
    "normalize": ("course_utils.tools.normalize", "configure",
                  "store notebooks as JupyterLab writes them on open, lessons linking their lab"),
    "publish": ("course_utils.tools.publish", "configure",
                "re-run lessons or solutions, clean them, rebuild the labs"),
    "setup-git": ("course_utils.tools.cleaning", "configure_setup_git",
                  "install the per-folder nbstripout git filters"),
    "site": ("course_utils.tools.site", "configure",
             "build the course website (site/) from the committed notebooks"),
}  # fmt: skip

# (command, action) -> (module, the function adding that action's parser): actions whose work
# needs no torch get their parser from a module that does not import it, so they start at once
# (importing torch took a quarter of `bookgpt prepare`'s time on a 100 MB folder).
LIGHT_ACTIONS = {
    ("bookgpt", "prepare"): ("course_utils.projects.corpus.cli", "add_prepare_parser"),
}

EXAMPLES = """examples:
  gpt-course open ~/gpt-course     (the same as python -m course_utils open ~/gpt-course)
  python -m course_utils doctor
  python -m course_utils sumgpt train --steps 1200 --out runs/sumgpt
  python -m course_utils bookgpt prepare --corpus default --out data/bookgpt
  python -m course_utils bookgpt train --config cpu --out runs/bookgpt/cpu
  python -m course_utils COMMAND --help     (every command has its own examples)"""


def build_parser(selected: str | None = None, action: str | None = None) -> argparse.ArgumentParser:
    """The whole tree; only ``selected``'s module is imported to add its arguments, or, for an
    ``action`` of :data:`LIGHT_ACTIONS`, only that action's module."""
    script = Path(sys.argv[0]).name == "gpt-course"  # the console script, not python -m
    parser = argparse.ArgumentParser(
        prog="gpt-course" if script else "python -m course_utils",
        description="The course's commands: projects, lesson helpers, instructor and maintainer "
        "tools.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, function, summary) in COMMANDS.items():
        child = sub.add_parser(
            name, help=summary, description=summary,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )  # fmt: skip
        light = LIGHT_ACTIONS.get((name, action)) if name == selected else None
        if light is not None:
            actions = child.add_subparsers(dest="action", required=True, metavar="ACTION")
            getattr(importlib.import_module(light[0]), light[1])(actions)
        elif name == selected:
            getattr(importlib.import_module(module), function)(child)
    return parser


def main(argv: list[str] | None = None) -> int:
    wrong_python = refusal(how=venv_fix())  # the wheel's way in has no make to check it
    if wrong_python:
        print(wrong_python, file=sys.stderr)
        return 2
    argv = list(sys.argv[1:] if argv is None else argv)
    words = [a for a in argv if not a.startswith("-")]
    selected = words[0] if words and words[0] in COMMANDS else None
    action = words[1] if selected and len(words) > 1 else None
    return run_command(build_parser(selected, action), argv)
