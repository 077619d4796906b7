"""The figure check: every measured figure in the course's prose is one a cell prints, one a
recorded results page holds, or one the allow-list names as a source document's or the course's.

A *measured figure* is a number with a unit of time, rate, size, ratio or percent ("78.9 s",
"0.21x", "15-20%"), or words that quantify a measurement ("about a minute", "about as fast as").
Exact arithmetic is not one: a number with no such unit (a parameter count), and a bound a cell
asserts ("at least 3x", "under 80%") are left alone; a ratio, percent or size counts only in a
sentence that measures ("about", "faster", "took", ...). ``python -m course_utils.tools.figures``
prints what fails, one line each: file, cell, figure, sentence.
"""

from __future__ import annotations

import fnmatch
import json
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = Path(__file__).with_name("figures_allowed.toml")

NUMBER = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
UNITS = {  # unit as written -> its canonical name
    **dict.fromkeys(["ns"], "ns"),
    **dict.fromkeys(["µs", "us"], "us"),
    **dict.fromkeys(["ms", "millisecond", "milliseconds"], "ms"),
    **dict.fromkeys(["s", "sec", "second", "seconds"], "s"),
    **dict.fromkeys(["min", "minute", "minutes"], "min"),
    **dict.fromkeys(["h", "hour", "hours"], "h"),
    **dict.fromkeys(["x", "×", "times"], "x"),
    "%": "%",
}
RATE = r"[KMGT]?FLOP/s|tokens/s|tok/s|chars/s|[KMGT]i?B/s|it/s|steps/s|updates/s"
SIZE = r"[KMGT]i?B"
UNIT = "|".join(sorted((re.escape(u) for u in UNITS), key=len, reverse=True))
FIGURE = re.compile(
    rf"(?<![\w.,/$-])(?P<low>{NUMBER})(?:\s*(?:-|–|to)\s*(?P<high>{NUMBER}))?"
    rf"(?:\s*|-)(?P<unit>{RATE}|{SIZE}|{UNIT})(?![\w/])"
)
TIME = {"ns", "us", "ms", "s", "min", "h"}
# Words that quantify a measurement with no digits in it.
WORDED = re.compile(
    r"\b(?:about|around|roughly|nearly|almost|some|in)\s+(?:a|an|one|two|three|four|five|ten|"
    r"half an?|a few)\s+(?:milli|micro)?(?:second|minute|hour)s?\b"
    r"|\b(?:about|roughly|nearly|almost|just|twice|half|three times|ten times)\s+as\s+"
    r"(?:fast|slow|quick|long)\s+as\b",
    re.I,
)
# A bound the sentence claims (and a cell asserts), not a measured value.
BOUND = re.compile(
    r"(?:at least|at most|more than|less than|fewer than|under|below|above|over|within|"
    r"up to|no more than|at best|>=|<=|≥|≤|<|>)\s*$",
    re.I,
)
# A sentence that measures: a ratio, percent or size in it is a measured figure.
MEASURES = re.compile(
    r"\b(?:about|around|roughly|approximately|nearly|almost|faster|slower|quicker|as fast|"
    r"took|takes|ran|runs in|measured|speed-?up|most of|costs?)\b|~|≈",
    re.I,
)


@dataclass(frozen=True)
class Figure:
    """One figure as written: its text, its value (or range) and its canonical unit."""

    text: str
    low: float | None
    high: float | None
    unit: str | None
    decimals: int = 0


@dataclass(frozen=True)
class Flag:
    """A figure the check could not trace, with where it stands."""

    file: str
    cell: str
    figure: str
    sentence: str
    why: str = "traced to no printed line, results table or allow-list entry"

    def __str__(self) -> str:
        return f"{self.file} cell {self.cell}: {self.figure!r} {self.why}: {self.sentence}"


MACHINE = "restates a figure that depends on the machine (nbval masks it): point at its line"


def _value(text: str) -> float:
    return float(text.replace(",", ""))


def _canonical(unit: str) -> str:
    return UNITS.get(unit, unit)


def _matches(text: str):
    """FIGURE's matches in ``text``, less products ("2 x 60") and decades ("the 30s")."""
    for m in FIGURE.finditer(text):
        product = _canonical(m["unit"]) == "x" and re.match(r"\s*[\d$(]", text[m.end() :])
        if not (product or re.fullmatch(r".*\d[sh]", m[0])):
            yield m


def figures(sentence: str, bounded: bool = False) -> list[Figure]:
    """The measured figures of one sentence; ``bounded=True`` keeps those after a bound word."""
    found, measures = [], bool(MEASURES.search(sentence))
    sentence = re.sub(r'"[^"]*"|“[^”]*”', '""', sentence)  # a quotation is checked word for word
    for m in _matches(sentence):
        unit = _canonical(m["unit"])
        if not bounded and BOUND.search(sentence[: m.start()]):
            continue
        if unit not in TIME and not measures:
            continue  # a ratio, percent or size in a sentence that does not measure
        decimals = len(m["low"].split(".")[1]) if "." in m["low"] else 0
        high = _value(m["high"]) if m["high"] else _value(m["low"])
        found.append(Figure(m[0], _value(m["low"]), high, unit, decimals))
    for m in WORDED.finditer(sentence):
        if bounded or not BOUND.search(sentence[: m.start()]):
            found.append(Figure(m[0], None, None, None))
    return found


def _digits(number: str) -> int:
    """Significant digits as written: 3 in 0.215, 1,589 and 34.2; 2 in 0.21."""
    return len(re.sub(r"\D", "", number).lstrip("0"))


def printed_values(text: str, bare: bool = False) -> set[tuple[float, str]]:
    """Every (value, canonical unit) printed in ``text``; with ``bare``, unit-less numbers too
    (unit "#" at three significant digits or more, else '')."""
    values = set()
    for m in _matches(text):
        values |= {(_value(n), _canonical(m["unit"])) for n in (m["low"], m["high"]) if n}
    if bare:  # a bare number: a ratio printed as "= 15", or a table's cell, its unit in the header
        found = re.findall(rf"(?<![\w.]){NUMBER}", text)
        values |= {(_value(n), "#" if _digits(n) >= 3 else "") for n in found}
    return values


SCALE = {  # a unit's size in its family's base unit (seconds, bytes)
    "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0,
    "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
    "KiB": 2.0**10, "MiB": 2.0**20, "GiB": 2.0**30, "TiB": 2.0**40,
}  # fmt: skip


def _as_written(value: float, unit: str, figure: Figure) -> list[float]:
    """A printed value in the figure's unit: the same unit, another of its family (1536.94 MiB
    as 1.5 GiB), or a bare number read as the figure's kind (a ratio 1.0078 as 0.8% more, a
    count of bytes as 21 MB)."""
    if unit == figure.unit:
        return [value]
    if unit in SCALE and figure.unit in SCALE and (unit in TIME) == (figure.unit in TIME):
        return [value * SCALE[unit] / SCALE[figure.unit]]
    if unit not in ("", "#"):
        return []
    if figure.unit == "x":
        return [value]
    if unit == "":  # too few digits to be read as a percent or a size but by chance
        return []
    if figure.unit == "%":
        return [100 * value, 100 * abs(value - 1)]
    if figure.unit in SCALE and figure.unit not in TIME:
        return [value / SCALE[figure.unit]]
    return []


def is_printed(figure: Figure, printed: set[tuple[float, str]], any_unit: bool = False) -> bool:
    """The figure is a printed value at the prose's precision (in any unit of its family), or
    a range one lies in; a ratio may be printed bare ("block 0 / the others = 15"), and with
    ``any_unit`` (a results table, its unit in the header) any figure may."""
    if figure.low is None:
        return False
    for value, unit in printed:
        found = [value] if any_unit and unit in ("", "#") else _as_written(value, unit, figure)
        for v in found:
            if figure.low != figure.high and figure.low <= v <= figure.high:
                return True
            if round(v, figure.decimals) == figure.low:
                return True
    return False


def _recorded(figure: Figure, recorded: set[tuple[float, str]]) -> bool:
    """A results page holds the figure, precise enough not to be there by chance: bare (a
    table's cell, its unit in the header) at four significant digits or three with a decimal
    (1,589; 34.2), with its unit printed beside it at three or at two with a decimal (0.21x)."""
    digits = _digits(figure.text.split("-")[0].split("–")[0])
    if digits >= 4 or (digits == 3 and figure.decimals > 0):
        return is_printed(figure, recorded, any_unit=True)
    return (digits >= 3 or (digits == 2 and figure.decimals > 0)) and is_printed(figure, recorded)


def sentences(markdown: str) -> list[str]:
    """Prose split into sentences (a table row is one); code blocks and comments left out."""
    text = re.sub(r"```.*?```|<!--.*?-->", "", markdown, flags=re.S)
    out = []
    for para in re.split(r"\n\s*\n", text):
        lines = [line.strip() for line in para.splitlines() if line.strip()]
        if lines and all(line.startswith("|") for line in lines):
            out += [line for line in lines if not re.fullmatch(r"[|:\-\s]+", line)]
            continue
        items = re.split(r"\n(?=(?:[-*]|\d+\.)\s)", "\n".join(line.lstrip("> ") for line in lines))
        for item in items:  # a list item is its own sentence
            joined = " ".join(item.split("\n"))
            out += [s for s in re.split(r"(?<=[.!?;])\s+(?=[A-Z(*`\[$])", joined) if s]
    return out


def recorded_data(markdown: str) -> str:
    """What a results page recorded: its tables' rows and its text blocks, as plain text."""
    blocks = re.findall(r"```text\n(.*?)```", markdown, flags=re.S)
    rows = [line for line in markdown.splitlines() if line.startswith("|")]
    return "\n".join(blocks + rows)


def load_allowed(path: Path = ALLOWED) -> list[dict]:
    """The allow-list: each entry a file pattern, the figure as written, a kind and a reason."""
    entries = tomllib.loads(path.read_text(encoding="utf-8"))["figure"]
    for entry in entries:
        missing = {"file", "figure", "kind", "reason"} - entry.keys()
        if missing or entry["kind"] not in ("source", "fact"):
            raise ValueError(f"{path.name}: entry {entry} needs file, figure, kind (source or "
                             f"fact) and reason; missing {sorted(missing)}")  # fmt: skip
    return entries


def _allowed(entries: list[dict], file: str, figure: Figure) -> bool:
    said = " ".join(figure.text.lower().split())
    return any(
        fnmatch.fnmatch(file, e["file"]) and " ".join(e["figure"].lower().split()) == said
        for e in entries
    )


def masked(printed: str, config: Path) -> tuple[str, str]:
    """``printed`` split by nbval's masks: (what every machine prints, what this one printed
    where nbval masks it: wall times and measured figures)."""
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    parser.read(config, encoding="utf-8")
    spans = []
    for section in parser.sections():
        spans += [m.span() for m in re.finditer(parser[section]["regex"], printed)]
    keep, machine, at = [], [], 0
    for a, b in sorted(spans):
        if b > at:
            keep.append(printed[at : max(a, at)])
            machine.append(printed[max(a, at) : b])
            at = b
    keep.append(printed[at:])
    return " ".join(keep), "\n".join(machine)


def notebook_texts(path: Path) -> tuple[list[tuple[str, str]], str]:
    """A notebook's markdown cells as (cell label, text), and everything its cells printed."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    cells, printed = [], []
    for i, cell in enumerate(nb["cells"]):
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            cells.append((f"{i} ({cell.get('id', '?')})", source))
        for out in cell.get("outputs", []):
            printed.append("".join(out.get("text", "")))
            printed.append("".join(out.get("data", {}).get("text/plain", "")))
    return cells, "\n".join(printed)


def course_files(root: Path = ROOT) -> list[Path]:
    """Every file the check reads: lessons, solved labs, the docs pages and the README."""
    return [
        *sorted((root / "notebooks").glob("*.ipynb")),
        *sorted((root / "solutions").glob("*.ipynb")),
        *sorted((root / "docs").rglob("*.md")),
        root / "README.md",
    ]


def check(root: Path = ROOT, allowed: list[dict] | None = None) -> list[Flag]:
    """Every measured figure in the course's prose that nothing traces."""
    allowed = load_allowed() if allowed is None else allowed
    pages = sorted((root / "docs" / "results").glob("*.md"))
    recorded_text = "\n".join(recorded_data(p.read_text("utf-8")) for p in pages)
    recorded = printed_values(recorded_text, bare=True)
    flags = []
    for path in course_files(root):
        name = path.relative_to(root).as_posix()
        if path.suffix == ".ipynb":
            cells, printed = notebook_texts(path)
            stable, masked_text = masked(printed, root / "nbval_sanitize.cfg")
            printed, machine = printed_values(stable, bare=True), printed_values(masked_text)
        else:
            text = path.read_text(encoding="utf-8")
            cells, printed, machine = [("-", text)], set(), set()
            if path.parent.name == "results":  # the page's own data is not its prose
                if re.search(r"^Seeded ", text, re.M):
                    continue  # a transcription of earlier sessions' notes: all of it the record
                cells = [("-", re.sub(r"```text\n.*?```", "", text, flags=re.S))]
        for label, text in cells:
            for sentence in sentences(text):
                if name.startswith("docs/results/") and sentence.startswith("|"):
                    continue  # a results page's table is the recording itself
                for fig in figures(sentence):
                    if is_printed(fig, printed) or _allowed(allowed, name, fig):
                        continue
                    if is_printed(fig, machine):  # this machine's figure, which nbval masks
                        flags.append(Flag(name, label, fig.text, sentence, MACHINE))
                    elif not _recorded(fig, recorded):
                        flags.append(Flag(name, label, fig.text, sentence))
    return flags


def main() -> int:
    flags = check()
    for flag in flags:
        print(flag)
    print(f"{len(flags)} figures nothing traces", file=sys.stderr)
    return 1 if flags else 0


if __name__ == "__main__":
    sys.exit(main())
