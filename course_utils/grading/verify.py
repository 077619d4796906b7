"""Grading that does not take the kernel's word: the values a test cell checks are compared here,
outside the hand-in's kernel, with the values the solution's run expected.

A hand-in runs before its tests in the same Python process, so it can switch off anything in
there: patch the checks or ``fresh_checks``, hide errors from the grader, rewrite the test
cells. What it cannot do is produce the right values without the right code. So when a lab is
graded:

1. the solution runs once with the checks in ``reference`` mode: each check passes as usual and
   records its expected value, flagged ``hidden`` after its hidden tests' mark;
2. each hand-in's test cells run with every expected value cut out of their source
   (:func:`strip_expected`), so the answer key never reaches its kernel, and the checks in
   ``record`` mode record what they got;
3. a test cell scores only if its recorded values, compared here by the grader's own copy of the
   checks, match the solution's (:func:`verdict`). A record that is missing, forged into
   the wrong shape or out of order fails.

``check_true`` records only its condition, which a hand-in can fake; a cell is tamper-proof when
at least one ``check_value``, ``check_tensor`` or ``check_type`` in it records a value.
"""

from __future__ import annotations

import ast
import contextlib
import io
from typing import NamedTuple

from ..lessons import checks, recording
from .cells import parse_cell

# The check functions, and the position of the argument that holds the expected value.
EXPECTED_ARG = {"check_value": 2, "check_tensor": 2, "check_type": None, "check_true": None}
UNREPORTED = "this check did not report to the grader (were the checks changed?)"


def check_aliases(sources: list[str]) -> dict[str, str]:
    """Names bound to a check function anywhere in ``sources`` (``check = fresh_checks()
    .check_value``, ``from ... import check_value as cv``), mapped to the function's name."""
    aliases = {name: name for name in EXPECTED_ARG}
    for source in sources:
        for node in ast.walk(parse_cell(source) or ast.Module(body=[], type_ignores=[])):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.name in EXPECTED_ARG:
                        aliases[alias.asname or alias.name] = alias.name
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, function = node.targets[0], _called_check(node.value, aliases)
                if isinstance(target, ast.Name) and function:
                    aliases[target.id] = function
    return aliases


def _called_check(func: ast.expr, aliases: dict[str, str]) -> str | None:
    """The check function that ``func`` (a call's callee) names, if any."""
    if isinstance(func, ast.Name):
        return aliases.get(func.id)
    if isinstance(func, ast.Attribute) and func.attr in EXPECTED_ARG:
        return func.attr
    return None


def strip_expected(source: str, aliases: dict[str, str]) -> str:
    """``source`` with the expected-value argument of every check call replaced by ``...``."""
    try:  # the text itself, untransformed: the spans below are positions in it
        tree = ast.parse(source)
    except SyntaxError:  # IPython magics: such a cell is run as it is
        return source
    spans = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        function = _called_check(node.func, aliases)
        position = EXPECTED_ARG.get(function) if function else None
        if position is None:
            continue
        if len(node.args) > position:
            spans.append(node.args[position])
        spans += [kw.value for kw in node.keywords if kw.arg == "expected"]
    return _replace_spans(source, spans, "...")


def _replace_spans(source: str, nodes: list[ast.expr], text: str) -> str:
    """Replace each node's source span (ast offsets count UTF-8 bytes) by ``text``."""
    data = source.encode("utf-8")
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    spans = sorted(
        ((starts[n.lineno - 1] + n.col_offset, starts[n.end_lineno - 1] + n.end_col_offset))
        for n in nodes
    )
    out, last = [], 0
    for begin, end in spans:
        if begin < last:  # nested inside a span already cut
            continue
        out += [data[last:begin], text.encode("utf-8")]
        last = end
    out.append(data[last:])
    return b"".join(out).decode("utf-8")


def cell_records(cell) -> list[dict]:
    """The check records among a cell's outputs, in order."""
    records = []
    for output in cell.get("outputs", []):
        data = output.get("data", {}) if output.get("output_type") == "display_data" else {}
        record = data.get(recording.MIME) if isinstance(data, dict) else None
        if record is not None:
            records.append(record if isinstance(record, dict) else {"unreadable": True})
    return records


class Verdict(NamedTuple):
    """A test cell's records against the solution's: whether they match, the first failure's
    one-line message, and whether that check is a hidden one (its message is the instructor's)."""

    ok: bool
    message: str = ""
    hidden: bool = False


def verdict(records: list[dict], reference: list[dict]) -> Verdict:
    """Compare a hand-in's records with the solution's, in order. The message is "" when they
    match, or when the cell stopped before a check (its error says why); ``hidden`` comes from
    the solution's record (flagged in its own run), never from the hand-in's."""
    for index, expected in enumerate(reference):
        hidden = expected.get("hidden") is True
        if index >= len(records):
            return Verdict(False, "", hidden)
        got = records[index]
        if got.get("check") != expected.get("check") or got.get("name") != expected.get("name"):
            name = expected.get("name")
            return Verdict(False, f"\u274c {name}: {UNREPORTED}", hidden)
        failure = compare(got, expected)
        if failure:
            return Verdict(False, failure, hidden)
    return Verdict(True)


def compare(got: dict, expected: dict) -> str:
    """ "" when one recorded check matches the solution's, else its one-line message."""
    name = str(expected.get("name"))
    if expected.get("check") == "true":
        if got.get("got") is True:
            return ""
        return f"\u274c {name}: {got.get('message', 'the condition does not hold')}"
    try:
        value = recording.from_plain(got.get("got"))
        want = recording.from_plain(expected.get("expected"))
    except recording.Unreadable as exc:
        return f"\u274c {name}: its recorded value cannot be read back ({exc})"
    if isinstance(value, recording.TooLarge):
        return f"\u274c {name}: the value is too large to check ({value.size:,} elements)"
    hint = str(expected.get("hint", ""))  # the solution's record: the grader's own words
    return _run_check(expected.get("check"), name, value, want, expected.get("options", {}), hint)


def _run_check(check: str, name: str, value, want, options: dict, hint: str = "") -> str:
    """Run the grader's own copy of a check (which never records); "" or its message."""
    functions = {"value": checks._check_value, "tensor": checks._check_tensor}
    functions["type"] = checks._check_type
    if check not in functions:
        return f"\u274c {name}: unknown check {check!r}"
    run = functions[check]
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            checks.with_hint(lambda: run(name, value, want, **_options(check, options)), hint)
    except checks.CheckFailed as exc:
        return f"\u274c {exc}"
    except Exception as exc:  # a recorded value that breaks the check: it does not match
        return f"\u274c {name}: the value could not be checked ({type(exc).__name__}: {exc})"
    return ""


def _options(check: str, options: dict) -> dict:
    """The tolerances the solution's check used (its defaults where a record lacks them)."""
    defaults = {"value": {"rel_tol": 1e-6, "abs_tol": 0.0}, "tensor": {"atol": 1e-6, "rtol": 1e-5}}
    given = options if isinstance(options, dict) else {}
    return {k: float(given.get(k, v)) for k, v in defaults.get(check, {}).items()}
