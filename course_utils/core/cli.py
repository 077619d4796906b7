"""The plumbing every ``python -m course_utils`` command shares: parse, run, report errors.

A command module defines ``configure(parser)`` (its arguments, an example in the epilog, and
``set_defaults(func=...)``); :func:`run_command` parses ``argv`` and calls ``func(args)``. A
problem with the user's input (a ``ValueError`` or a missing file, which is what the course's
own errors are) becomes one line ``error: ...`` and exit status 2, not a traceback; set
``COURSE_DEBUG=1`` to see the traceback instead.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable


def command_parser(prog: str, configure: Callable[[argparse.ArgumentParser], None]):
    """A parser for one command, as ``python -m course_utils CMD`` would build it."""
    parser = argparse.ArgumentParser(
        prog=prog, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    configure(parser)
    return parser


def add_subcommand(subparsers, name: str, summary: str, description: str, example: str):
    """A subcommand parser with its one-line help, a description and an example epilog."""
    return subparsers.add_parser(
        name,
        help=summary,
        description=description,
        epilog=f"example:\n  {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def run_command(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default: the process's) and run the chosen ``func``; its return value
    (None means 0) is the exit status."""
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        status = args.func(args)
    except (ValueError, FileNotFoundError) as err:
        if os.environ.get("COURSE_DEBUG"):
            raise
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:  # Ctrl-C: the shell's status for SIGINT, no traceback
        print(f"interrupted: {err}" if str(err) else "interrupted", file=sys.stderr)
        return 130
    return 0 if status is None else int(status)
