"""Record what a benchmark printed, and where and when it ran, as a page under ``docs/results/``.

Every benchmark's ``__main__`` runs through :func:`run`, which takes ``--results [FILE]`` off the
command line (FILE defaults to ``docs/results/<script>.md``), runs the benchmark as it would run
without it, and then writes what it printed to FILE: its Markdown tables as tables, every other
line verbatim, under a line naming the command, the date, the host, its CPU and CPU class, torch,
Python, the thread count and the commit. The results page (``docs/results.md``) links these
pages, so a measurement is rerun rather than retyped.

Every page has its recording beside it (``<page>.json``), and the page is :func:`render` of it:
``printed`` (what a benchmark printed, written here by :func:`run`), ``tables`` (a benchmark's
own data, its tables made by the benchmark's ``recorded_tables``, prose around them) or
``transcribed`` (a page typed in before ``--results`` existed: its text is the record, kept
verbatim until the benchmark is rerun). ``tests/test_results.py`` renders every recording and
fails on a page that differs: a table edited by hand.
"""

from __future__ import annotations

import datetime
import importlib.util
import io
import json
import platform
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

OPTION = "--results"
ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"


def take_option(argv: list[str], script: str) -> tuple[Path | None, list[str]]:
    """``(FILE, the other arguments)``: FILE is None without ``--results``, and
    ``docs/results/<script>.md`` when the option names no file."""
    path, rest, i = None, [], 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith(f"{OPTION}="):
            path = Path(arg.split("=", 1)[1])
        elif arg == OPTION:
            following = argv[i + 1] if i + 1 < len(argv) else ""
            if following and not following.startswith("-"):
                path, i = Path(following), i + 1
            else:
                path = RESULTS / f"{script}.md"
        else:
            rest.append(arg)
        i += 1
    return path, rest


class _Tee(io.TextIOBase):
    """Writes go to the terminal as before and into a buffer kept for the record (and
    ``cpu_classes`` passes its children's output through it)."""

    records_children = True

    def __init__(self, terminal) -> None:
        self.terminal, self.kept = terminal, io.StringIO()

    def write(self, text: str) -> int:
        self.kept.write(text)
        return self.terminal.write(text)

    def flush(self) -> None:
        self.terminal.flush()


def _commit() -> str:
    try:
        found = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                               capture_output=True, text=True, timeout=10)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return found.stdout.strip() or "unknown"


def context() -> dict[str, str]:
    """Where and when a benchmark ran: what a reader needs to compare two recordings."""
    import torch

    from course_utils.core import cpu

    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "host": platform.node() or "unknown",
        "cpu": cpu._cpu_model(),
        "cpu class": cpu.cpu_class(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": str(torch.get_num_threads()),
        "commit": _commit(),
    }


def as_markdown(output: str) -> str:
    """The printed text as a page body: table lines stay a table, headings stay headings, and
    every other run of lines goes into a text block, exactly as printed."""
    blocks, text = [], []

    def close_text() -> None:
        if any(line.strip() for line in text):
            blocks.append("```text\n" + "\n".join(text).strip("\n") + "\n```")
        text.clear()

    table: list[str] = []
    for line in output.splitlines():
        if line.startswith("|"):
            close_text()
            table.append(line)
            continue
        if table:
            blocks.append("\n".join(table))
            table = []
        if line.startswith("## "):
            close_text()
            blocks.append(line)  # a CPU class's heading, one level under the page's title
        else:
            text.append(line)
    if table:
        blocks.append("\n".join(table))
    close_text()
    return "\n\n".join(blocks) + "\n"


def page(title: str, command: str, where: dict[str, str], output: str) -> str:
    """A recorded page: the title, one line of provenance, the benchmark's output."""
    facts = ", ".join(f"{key} {value}" for key, value in where.items() if key != "date")
    return (
        f"# {title}\n\n"
        f"Recorded {where['date']} by `{command}`: {facts}. Rerun that command with "
        f"`{OPTION}` to replace this page.\n\n" + as_markdown(output)
    )


def recording_path(page_path: Path) -> Path:
    """The recording a results page is rendered from: the JSON file beside it."""
    return page_path.with_suffix(".json")


def recorded_tables(benchmark: str, data: dict) -> str:
    """A ``tables`` recording's tables, made by its benchmark's ``recorded_tables(data)``."""
    spec = importlib.util.spec_from_file_location(
        benchmark, ROOT / "benchmarks" / f"{benchmark}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.recorded_tables(data)


def render(recording: dict) -> str:
    """A results page from its recording (the three kinds in the module's docstring)."""
    kind = recording["kind"]
    if kind == "printed":
        fields = (recording[key] for key in ("title", "command", "where", "output"))
        return page(*fields)
    if kind == "tables":
        tables = recorded_tables(recording["benchmark"], recording["data"])
        return recording["before"] + tables + recording["after"]
    if kind == "transcribed":
        return f"# {recording['title']}\n\n{recording['body']}"
    raise ValueError(f"recording of kind {kind!r}: printed, tables or transcribed")


def hand_edit(page_path: Path) -> str | None:
    """None when the page is what its recording renders; else one line naming the first line
    that differs and the fix."""
    recorded = recording_path(page_path)
    if not recorded.exists():
        return f"{page_path.name}: no recording beside it ({recorded.name}); rerun its benchmark"
    rendered = render(json.loads(recorded.read_text(encoding="utf-8"))).splitlines()
    on_page = page_path.read_text(encoding="utf-8").splitlines()
    for number, (want, got) in enumerate(zip(rendered, on_page, strict=False), start=1):
        if want != got:
            return (f"{page_path.name} line {number} is not what {recorded.name} renders "
                    f"({got[:60]!r}, recorded {want[:60]!r}): rerun the benchmark with "
                    f"{OPTION}, or change the recording and say why")  # fmt: skip
    if len(rendered) != len(on_page):
        return f"{page_path.name}: {len(on_page)} lines, {recorded.name} renders {len(rendered)}"
    return None


def write_recording(path: Path, recording: dict) -> None:
    """Write a recording beside ``path`` and the page rendered from it to ``path``."""
    from course_utils.engine.io import atomic_write_text

    text = json.dumps(recording, indent=1, ensure_ascii=False) + "\n"
    atomic_write_text(recording_path(path), text)
    atomic_write_text(path, render(recording))


def run(main: Callable[[list[str]], object], argv: list[str] | None = None) -> int:
    """Run a benchmark's ``main`` on ``argv`` (default: the command line), recording what it
    prints when ``--results`` is given; returns its exit status."""
    script = Path(sys.argv[0]).stem
    path, rest = take_option(sys.argv[1:] if argv is None else argv, script)
    if path is None:
        status = main(rest)
        return status if isinstance(status, int) else 0
    where = context()
    tee = _Tee(sys.stdout)
    sys.stdout = tee
    try:
        status = main(rest)
    finally:
        sys.stdout = tee.terminal
    module = sys.modules.get(getattr(main, "__module__", ""), None)
    doc = module.__doc__ if module is not None else None  # None's own __doc__ is text on 3.13
    title = ((doc or script).strip().splitlines() or [script])[0]
    command = shlex.join(["python", f"benchmarks/{script}.py", *rest])
    recording = {"kind": "printed", "title": title.rstrip("."), "command": command,
                 "where": where, "output": tee.kept.getvalue()}  # fmt: skip
    write_recording(path, recording)
    print(f"recorded: {path} (from {recording_path(path).name})")
    return status if isinstance(status, int) else 0
