"""The grader's settings: one schema, checked when made, from which the ``grade`` and
``gradescope`` command lines, Gradescope's ``settings.json``, the worker's job and the limits
table of docs/instructors.md are all made (as :class:`~course_utils.engine.config.TrainConfig`
is for training).

``python -m course_utils.grading.settings`` prints that table; with ``--write`` it puts it into
docs/instructors.md (a test checks that the guide shows the table the schema gives).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path

from . import sandbox as sandboxes
from .limiter import DEFAULT_TASKS
from .outcomes import DISK, MEMORY, OUTPUT, TASKS, TIME

# The per-cell timeout, unless --timeout sets one: this many times the solution's slowest cell
# (measured by its reference run), and never under MIN_TIMEOUT seconds
TIMEOUT_FACTOR = 10
MIN_TIMEOUT = 30
DEFAULT_TOTAL_TIMEOUT = 1800  # seconds per submission, everything included
GRADE, GRADESCOPE = "grade", "gradescope"  # the commands whose options the schema makes
# Gradescope stops an autograder at 600 s by default: the solution's run and the start take the
# rest. Two endless loops cost 2 x 60 s, so the other exercises still run and score.
GRADESCOPE_TIMEOUT = 60
GRADESCOPE_TOTAL_TIMEOUT = 420
GRADESCOPE_MEMORY = 4 * 2**30


class UsageError(Exception):
    """A problem with the command line; ``main`` prints it on one line and exits with 2."""


# ---------------------------------------------------------------------------------------------
# What each setting is: its option, its text form, its check


def whole(text: str) -> int:
    """An integer from the command line's text (a ValueError saying what was read)."""
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"cannot read {text!r} as a whole number; write it like 30") from None


def size(text: str | int) -> int:
    """Bytes from ``4G``, ``512M`` or a number of bytes (settings.json keeps bytes)."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    return sandboxes.parse_memory(str(text))


def positive(what: str) -> Callable[[object], str]:
    """A check: "" for a whole number >= 1, else what is wrong with the value."""

    def check(value: object) -> str:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            return f"{value!r} is not a positive whole number of {what}"
        return ""

    return check


def is_bool(value: object) -> str:
    return "" if isinstance(value, bool) else f"{value!r} is not true or false"


def memory_text(value: object) -> str:
    """A check for a size kept as written (``1536M``): "" if it reads as one."""
    try:
        sandboxes.parse_memory(str(value)) if value else None
    except ValueError as exc:
        return str(exc)
    return ""


@dataclass(frozen=True)
class Option:
    """How one setting appears: its flag, its help, which commands have it, how its text is
    read and checked, its default where a command's differs, and the names it once had."""

    flag: str
    help: str
    commands: tuple[str, ...] = (GRADE, GRADESCOPE)
    parse: Callable[[str], object] = str  # the command line's text -> the value
    check: Callable[[object], str] = lambda value: ""  # "" or what is wrong with a value
    shown: dict[str, str] = field(default_factory=dict)  # command -> the default, as the guide says
    defaults: dict[str, object] = field(default_factory=dict)  # command -> its own default
    switch: bool | None = None  # a flag without a value: the value it sets (--no-sandbox: False)
    aliases: dict[str, bool] = field(default_factory=dict)  # hidden flags -> the value they set
    json: str = ""  # its key in settings.json, where not the field's name
    old_keys: tuple[str, ...] = ()  # keys an older settings.json used
    worker: bool = False  # passed in the worker's job


def setting(default: object, option: Option) -> object:
    return field(default=default, metadata={"option": option})


@dataclass(frozen=True)
class Settings:
    """How each hand-in is graded. Every field but the last two is a setting of the schema
    (an option, a key of settings.json, a row of the guide's table), checked when made: a bad
    value is a UsageError naming it. ``sandbox`` (the sandbox probed for this run; None:
    unsandboxed) and ``threads`` (the kernel's, from --jobs) are found at run time."""

    timeout: int | None = setting(None, Option(
        "--timeout", "seconds one cell may run before it is interrupted", parse=whole,
        check=lambda v: "" if v is None else positive("seconds")(v), worker=True,
        shown={GRADE: f"{TIMEOUT_FACTOR}x the solution's slowest cell, at least {MIN_TIMEOUT}"},
        defaults={GRADESCOPE: GRADESCOPE_TIMEOUT},
    ))  # fmt: skip
    total_timeout: int = setting(DEFAULT_TOTAL_TIMEOUT, Option(
        "--total-timeout", "seconds one hand-in may take in all", parse=whole,
        check=positive("seconds"), defaults={GRADESCOPE: GRADESCOPE_TOTAL_TIMEOUT},
        shown={GRADESCOPE: f"{GRADESCOPE_TOTAL_TIMEOUT}, inside Gradescope's 600 with the "
               "solution's own run"},
    ))  # fmt: skip
    memory: int | None = setting(None, Option(
        "--memory", "memory cap per sandboxed process and per hand-in in all, like 4G",
        parse=size, check=lambda v: "" if v is None else positive("bytes")(v),
        shown={GRADE: "80% of this machine's memory split between the jobs"},
        defaults={GRADESCOPE: GRADESCOPE_MEMORY},
    ))  # fmt: skip
    tasks: int = setting(DEFAULT_TASKS, Option(
        "--tasks", "processes and threads per hand-in in all", parse=whole,
        check=positive("tasks"),
    ))  # fmt: skip
    host_bytes: int = setting(sandboxes.MAX_HOST_BYTES, Option(
        "--disk", "what one hand-in may leave on the grading machine's disk, like 256M",
        parse=size, check=positive("bytes"),
    ))  # fmt: skip
    jobs: int = setting(1, Option(
        "--jobs", "hand-ins graded at once", commands=(GRADE,), parse=whole,
        check=positive("jobs"),
    ))  # fmt: skip
    sandboxed: bool = setting(True, Option(
        "--no-sandbox", "grade without bubblewrap: the hand-ins' code runs as you, with your "
        "files in reach (in Gradescope: a submission can read the solution in the bundle)",
        switch=False, check=is_bool, json="sandbox",
        shown={GRADE: "sandboxed", GRADESCOPE: "sandboxed (bwrap, or the kernel as nobody)"},
    ))  # fmt: skip
    forbid_calls: bool = setting(True, Option(
        "--allow-forbidden", "only report an answer that calls a torch function its exercise "
        "forbids (the solution's metadata names it); by default that exercise scores 0",
        switch=False, check=is_bool, old_keys=("forbid_reference",),
        shown=dict.fromkeys((GRADE, GRADESCOPE), "such an exercise scores 0"),
        aliases={"--allow-reference": False, "--forbid-reference": True, "--forbid-calls": True},
    ))  # fmt: skip
    memory_needed: str = setting("", Option(
        "--memory-needed", "the memory the autograder needs, like 2G, as its README and setup.sh "
        "state it", commands=(GRADESCOPE,), check=memory_text,
        shown={GRADESCOPE: "the solution's run, measured, plus a quarter, rounded up to 256M"},
    ))  # fmt: skip
    sandbox: sandboxes.Sandbox | None = None
    threads: int = 1

    def __post_init__(self) -> None:
        for name, option in schema().items():
            if problem := option.check(getattr(self, name)):
                raise UsageError(f"{option.flag}: {problem}; {fix(option)}")

    @classmethod
    def given(cls, command: str, values: dict, **runtime) -> Settings:
        """The settings of ``command`` from the values given (None: not given, its default),
        each read from its text (a UsageError naming the option for one that does not read)."""
        chosen = {}
        for name, option in schema(command).items():
            value = values.get(name)
            if value is None:
                value = option.defaults.get(command, default_of(name))
            elif isinstance(value, str) and option.parse is not str:
                try:
                    value = option.parse(value)
                except ValueError as exc:
                    raise UsageError(f"{option.flag}: {exc}") from None
            chosen[name] = value
        return cls(**chosen, **runtime)

    def key(self) -> dict:
        """What every cached result depends on: whether the hand-ins run sandboxed and the
        forbidden calls. Not --jobs, not the kernel's threads, not the limits: those decide
        only a hand-in that hit one (:meth:`limits`)."""
        sandboxed = self.sandbox is not None
        return {"sandboxed": sandboxed, "forbid_calls": self.forbid_calls}

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

    def job(self) -> dict:
        """The settings a worker needs (its job, with the lab and the hand-in): the schema's
        worker settings, the kernel's threads and the sandbox to start it in."""
        box = self.sandbox
        sandbox = None
        if box:
            sandbox = {"bwrap": box.bwrap, "memory": box.memory, "tasks": box.tasks,
                       "user": box.user}  # fmt: skip
        worker = {name: getattr(self, name) for name, o in schema().items() if o.worker}
        return {**worker, "threads": self.threads, "sandbox": sandbox}

    def to_json(self, command: str = GRADESCOPE) -> dict:
        """settings.json's keys: each setting of ``command`` (memory in bytes)."""
        return {
            option.json or name: getattr(self, name) for name, option in schema(command).items()
        }

    @classmethod
    def from_json(cls, data: dict, command: str = GRADESCOPE, **runtime) -> Settings:
        """The settings in a settings.json (an older one's keys read too); a ValueError naming
        the key whose value is wrong."""
        chosen = {}
        for name, option in schema(command).items():
            keys = [option.json or name, *option.old_keys]
            key = next((k for k in keys if k in data), None)
            if key is None:
                continue  # not written: its default
            value = data[key]
            if name in ("memory", "host_bytes") and isinstance(value, str):
                try:
                    value = size(value)
                except ValueError as exc:
                    raise ValueError(f"its {key}: {exc}") from None
            if problem := option.check(value):
                raise ValueError(f"its {key}: {problem}")
            chosen[name] = value
        return cls.given(command, chosen, **runtime)


def schema(command: str | None = None) -> dict[str, Option]:
    """field name -> its Option, in the schema's order (those of ``command`` only)."""
    return {
        f.name: f.metadata["option"]
        for f in fields(Settings)
        if "option" in f.metadata and (command is None or command in f.metadata["option"].commands)
    }


def default_of(name: str) -> object:
    return next(f.default for f in fields(Settings) if f.name == name)


def fix(option: Option) -> str:
    """The fix for a bad value, in a few words."""
    if option.switch is not None:
        return f"write true or false (or pass {option.flag})"
    what = "a size like 4G" if option.parse is size or option.check is memory_text else "1 or more"
    return f"pass {option.flag} with {what}, or leave it out for the default"


# ---------------------------------------------------------------------------------------------
# The command line and the guide's table, made from the schema


def add_options(parser: argparse.ArgumentParser, command: str) -> None:
    """The schema's options of ``command`` on ``parser``: each left out is None, which
    :meth:`Settings.given` reads as its default; old names are accepted, unlisted."""
    for name, option in schema(command).items():
        default = default_shown(name, option, command)
        if option.switch is not None:
            parser.add_argument(option.flag, dest=name, action="store_const",
                                const=option.switch, default=None, help=option.help)  # fmt: skip
        else:
            text = f"{option.help} (default: {default})".replace("%", "%%")  # not a format
            metavar = option.flag.lstrip("-").replace("-", "_").upper()
            parser.add_argument(option.flag, dest=name, default=None, metavar=metavar, help=text)
        for alias, value in option.aliases.items():
            parser.add_argument(alias, dest=name, action="store_const", const=value,
                                help=argparse.SUPPRESS)  # fmt: skip


def values_of(args: argparse.Namespace, command: str) -> dict:
    """The schema's values as parsed from the command line (None: not given)."""
    return {name: getattr(args, name, None) for name in schema(command)}


def default_shown(name: str, option: Option, command: str) -> str:
    """The default of a setting in ``command``, as a person reads it."""
    if command in option.shown:
        return option.shown[command]
    value = option.defaults.get(command, default_of(name))
    if option.parse is size and isinstance(value, int):
        return sandboxes.format_memory(value)
    return str(value)


def table() -> str:
    """The guide's table of the grader's settings, one row per setting of the schema."""
    rows = [
        "| option | `grade`'s default | `gradescope`'s default | settings.json | what it sets |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, option in schema().items():
        cells = [f"`{option.flag}`"]
        for command in (GRADE, GRADESCOPE):
            has = command in option.commands
            cells.append(default_shown(name, option, command) if has else "-")
        cells.append(f"`{option.json or name}`" if GRADESCOPE in option.commands else "-")
        cells.append(option.help)
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


GUIDE = Path(__file__).resolve().parents[2] / "docs" / "instructors.md"
BEGIN = "<!-- the grader's settings: python -m course_utils.grading.settings --write -->\n"
END = "<!-- end of the grader's settings -->\n"


def guide_table(text: str) -> str | None:
    """The table between the markers in the guide's ``text`` (None without the markers)."""
    match = re.search(re.escape(BEGIN) + r"(.*?)" + re.escape(END), text, re.S)
    return match.group(1) if match else None


def main(argv: list[str] | None = None) -> int:
    """Print the table, or with ``--write`` put it between the guide's markers."""
    parser = argparse.ArgumentParser(prog="python -m course_utils.grading.settings")
    parser.add_argument("--write", action="store_true", help=f"update {GUIDE.name}'s table")
    if not parser.parse_args(argv).write:
        print(table(), end="")
        return 0
    from ..core.atomic import atomic_write_text

    text = GUIDE.read_text(encoding="utf-8")
    if guide_table(text) is None:
        print(f"error: {GUIDE} has no {BEGIN.strip()} marker", file=sys.stderr)
        return 1
    start, rest = text.split(BEGIN, 1)
    atomic_write_text(GUIDE, start + BEGIN + table() + END + rest.split(END, 1)[1])
    print(f"wrote the settings table into {GUIDE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
