"""The plumbing every ``python -m course_utils`` command shares: parse, run, report errors.

A command module defines ``configure(parser)`` (its arguments, an example in the epilog, and
``set_defaults(func=...)``); :func:`run_command` parses ``argv`` and calls ``func(args)``. A
problem with the user's input becomes one line ``error: ...`` and exit status 2, not a
traceback: a ``ValueError`` (what the course's own errors are) with its message, and any
``OSError`` the system raised on a bad path (a file where a folder belongs, a folder where a
file does, no permission, ...) as :func:`path_problem` words it, naming the path and the fix.
Set ``COURSE_DEBUG=1`` to see the traceback instead.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Callable
from pathlib import Path


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
    except (ValueError, OSError) as err:
        if os.environ.get("COURSE_DEBUG"):
            raise
        message = path_problem(err) if isinstance(err, OSError) else str(err)
        print(f"error: {' '.join(message.split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:  # Ctrl-C: the shell's status for SIGINT, no traceback
        print(f"interrupted: {err}" if str(err) else "interrupted", file=sys.stderr)
        return 130
    return 0 if status is None else int(status)


def _file_above(path: Path) -> Path | None:
    """The nearest of ``path``'s parents that is a file (why nothing below it can be made)."""
    return next((p for p in path.parents if p.is_file()), None)


def path_problem(err: OSError) -> str:
    """One line for an ``OSError``: the path it names, what is wrong with it and the fix. The
    course's own ``FileNotFoundError`` subclasses carry their message (no errno) and keep it."""
    name = err.filename2 if err.filename2 is not None else err.filename
    if err.errno is None or name is None:
        return str(err)
    path = Path(os.fsdecode(name))
    if isinstance(err, NotADirectoryError) or err.errno == errno.ENOTDIR:
        above = path if path.is_file() else _file_above(path)
        if above is not None and above != path:
            return (f"{above} is a file, not a folder ({path} would be inside it); pass a "
                    f"folder, or a path that does not exist yet")  # fmt: skip
        return f"{path} is a file, not a folder; pass a folder, or a path that does not exist yet"
    if isinstance(err, IsADirectoryError):
        return f"{path} is a folder, not a file; pass a file path, or move the folder away"
    if isinstance(err, FileExistsError):
        if path.is_file():
            return (f"{path} is a file, where a folder was to be made; pass a folder, or a "
                    f"path that does not exist yet")  # fmt: skip
        return f"{path} already exists; pass a path that does not exist yet, or move it away"
    if isinstance(err, FileNotFoundError):
        return f"{path} does not exist; check the path (or create it first)"
    if isinstance(err, PermissionError):
        return (f"permission denied: {path}; pass a path you may read and write, or change "
                f"its permissions")  # fmt: skip
    if err.errno == errno.ENOSPC:
        return f"no space left on the device writing {path}; free some space, or write elsewhere"
    if err.errno == errno.EROFS:
        return f"{path} is on a read-only file system; pass a path you may write"
    return f"{path}: {err.strerror or err}; check the path"
