"""Exercise checks that say in one line what is wrong, instead of a bare AssertionError.

A failed check raises :class:`CheckFailed` (an AssertionError, so graders count it as a failure);
in Jupyter it renders as a single line of feedback rather than a traceback, and so does a stub
that still raises ``NotImplementedError`` (and a check that reads a name such a stub never
defined). When a lab is graded, the checks record their values
for the grader to compare outside the kernel instead (see :mod:`course_utils.lessons.recording`).
"""

from __future__ import annotations

import linecache
import math
import re
from collections import Counter
from numbers import Number

import numpy as np
import torch

from course_utils.lessons import recording

# What check_type accepts, and how its messages name each kind.
TYPE_NAMES = {
    "int": "an int",
    "float": "a float",
    "number": "a number",
    "str": "a str",
    "bool": "a bool",
    "list": "a list",
    "tuple": "a tuple",
    "dict": "a dict",
    "tensor": "a tensor",
}
SANITY_NOTE = "only a sanity check: the exact value is graded when you hand the lab in"
EXERCISE_MARK = re.compile(r"^\s*#\s*Exercise\s+(\d+)\b")


class CheckFailed(AssertionError):
    """A check that did not pass; shown in notebooks as one line of feedback."""

    def _render_traceback_(self) -> list[str]:  # IPython uses this instead of a traceback
        return [f"\u274c {self}"]


class ValuesDiffer(CheckFailed):
    """A value of the right type and shape that is not the expected one (where a hint helps)."""


def _fail(name: str, message: str) -> None:
    raise CheckFailed(f"{name}: {message}")


def _differ(name: str, message: str) -> None:
    raise ValuesDiffer(f"{name}: {message}")


def with_hint(run, hint: str) -> None:
    """``run()``, its message ending in the likely cause ``hint`` when the values differ."""
    try:
        run()
    except ValuesDiffer as exc:
        if not hint:
            raise
        raise CheckFailed(f"{exc}; likely cause: {hint}") from None


def _passed(name: str, detail: str = "") -> None:
    print(f"\u2705 {name}: correct{' (' + detail + ')' if detail else ''}")


def _as_tensor(value):
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value)
    return None


def _recorded(check: str, name: str, got, expected, run, hint: str = "", **options) -> bool:
    """In a graded run, publish this check's value for the grader (True: nothing more to do).

    ``record`` (a hand-in) publishes what was got and compares nothing; ``reference`` (the
    solution) runs the check (``run()``), then publishes what was expected (and its hint)."""
    mode = recording.mode()
    if mode == recording.RECORD:
        record = {"check": check, "name": str(name), "got": recording.to_plain(got)}
        recording.publish(record)
        return True
    if mode == recording.REFERENCE:
        run()
        record = {"check": check, "name": str(name), "expected": recording.to_plain(expected)}
        recording.publish({**record, "options": options} | ({"hint": str(hint)} if hint else {}))
        return True
    return False


def _dtype_kind(tensor: torch.Tensor) -> str:
    if tensor.dtype == torch.bool:
        return "boolean"
    if tensor.is_complex():
        return "complex"
    return "floating-point" if tensor.is_floating_point() else "integer"


def check_tensor(
    name: str, got, expected, *, atol: float = 1e-6, rtol: float = 1e-5, hint: str = ""
) -> None:
    """Type, shape, dtype kind, then values (to a tolerance); the message names the first
    mismatch, and ``hint``, the likely cause, when the values differ."""

    def run():
        with_hint(lambda: _check_tensor(name, got, expected, atol=atol, rtol=rtol), hint)

    if not _recorded("tensor", name, got, expected, run, hint, atol=atol, rtol=rtol):
        run()


def _check_tensor(name: str, got, expected, *, atol: float, rtol: float) -> None:
    if got is None:
        _fail(name, "got None: did you forget to return or assign a value?")
    want = _as_tensor(expected)
    have = _as_tensor(got)
    if have is None:
        _fail(name, f"wrong type: expected a tensor, got {type(got).__name__}")
    if tuple(have.shape) != tuple(want.shape):
        _fail(name, f"wrong shape: expected {tuple(want.shape)} got {tuple(have.shape)}")
    if _dtype_kind(have) != _dtype_kind(want):
        _fail(
            name,
            f"wrong dtype: expected {'an' if _dtype_kind(want) == 'integer' else 'a'} "
            f"{_dtype_kind(want)} tensor ({want.dtype}) got {have.dtype}",
        )
    have = have.detach().cpu()
    want = want.detach().cpu()
    if want.is_floating_point() or want.is_complex():
        _check_close(name, have, want, atol, rtol)
    else:
        bad = have != want
        if bool(bad.any()):
            index = tuple(int(i) for i in torch.nonzero(bad)[0])
            count = int(bad.sum())
            _differ(
                name,
                f"{count} of {want.numel()} values differ; first at index {index}: "
                f"expected {want[index].item()} got {have[index].item()}",
            )
    _passed(name, f"shape {tuple(want.shape)}")


def _check_close(name: str, have: torch.Tensor, want: torch.Tensor, atol, rtol) -> None:
    if want.is_complex():
        have, want = torch.view_as_real(have), torch.view_as_real(want)
    diff = (have.double() - want.double()).abs()
    limit = atol + rtol * want.double().abs()
    # NaN counts as bad; an infinity must be matched exactly (its tolerance would be infinite)
    bad = ~(((diff <= limit) & torch.isfinite(want)) | (have == want))
    if bool(bad.any()):
        index = tuple(int(i) for i in torch.nonzero(bad)[0])
        worst = float(diff.nan_to_num(nan=math.inf).max())
        _differ(
            name,
            f"values off: max error {worst:.3g} (tolerance {atol:g}); first wrong at index "
            f"{index}: expected {float(want[index]):.6g} got {float(have[index]):.6g}",
        )


def check_value(
    name: str, got, expected, *, rel_tol: float = 1e-6, abs_tol: float = 0.0, hint: str = ""
) -> None:
    """Numbers (exact for ints, with tolerance for floats), strings, sequences and the rest;
    ``hint`` names the likely cause when the values differ."""

    def run():
        with_hint(lambda: _check_value(name, got, expected, rel_tol=rel_tol, abs_tol=abs_tol), hint)

    if not _recorded("value", name, got, expected, run, hint, rel_tol=rel_tol, abs_tol=abs_tol):
        run()


def _check_value(name: str, got, expected, *, rel_tol: float, abs_tol: float) -> None:
    if got is None and expected is not None:
        _fail(name, "got None: did you forget to return or assign a value?")
    if _as_tensor(expected) is not None:
        _check_tensor(name, got, expected, atol=abs_tol, rtol=rel_tol)
        return
    if isinstance(expected, bool) or isinstance(got, bool):
        if got is not expected:
            _differ(name, f"expected {expected} got {got!r}")
    elif isinstance(expected, int):
        if not isinstance(got, (int, np.integer)) or isinstance(got, bool):
            _fail(name, f"wrong type: expected an int, got {type(got).__name__} {got!r}")
        if got != expected:
            _differ(
                name, f"expected {expected:,} got {int(got):,} (off by {int(got) - expected:+,})"
            )
    elif isinstance(expected, Number):
        if not isinstance(got, Number):
            _fail(name, f"wrong type: expected a number, got {type(got).__name__}")
        if not math.isclose(got, expected, rel_tol=rel_tol, abs_tol=abs_tol):
            _differ(name, f"expected about {expected:.6g} got {got:.6g}")
    elif isinstance(expected, str):
        _check_str(name, got, expected)
    elif isinstance(expected, (list, tuple)):
        _check_sequence(name, got, expected)
    elif isinstance(expected, (set, frozenset)):
        _check_set(name, got, expected)
    elif got != expected:
        _differ(name, f"expected {expected!r} got {got!r}")
    _passed(name)


def _check_str(name: str, got, expected: str) -> None:
    if not isinstance(got, str):
        _fail(name, f"wrong type: expected a str, got {type(got).__name__}")
    if got != expected:
        at = next(
            (i for i, (a, b) in enumerate(zip(got, expected)) if a != b),
            min(len(got), len(expected)),
        )
        _differ(name, f"strings differ at character {at}: expected {expected!r} got {got!r}")


def _check_sequence(name: str, got, expected) -> None:
    if not isinstance(got, (list, tuple)):
        kind = type(expected).__name__
        _fail(name, f"wrong type: expected a {kind}, got {type(got).__name__}")
    if len(got) != len(expected):
        counted = _counted(got, expected)
        if counted is None:
            _differ(name, f"expected {len(expected)} items got {len(got)}")
        missing, extra = counted
        _differ(
            name, f"expected {len(expected)} items got {len(got)}: {_difference(missing, extra)}"
        )
    for i, (a, b) in enumerate(zip(got, expected)):
        if a != b:
            _differ(name, f"first difference at index {i}: expected {b!r} got {a!r}")


def _check_set(name: str, got, expected) -> None:
    if not isinstance(got, (set, frozenset)):
        kind = type(expected).__name__
        _fail(name, f"wrong type: expected a {kind}, got {type(got).__name__}")
    if got != expected:
        missing, extra = sorted(expected - got, key=repr), sorted(got - expected, key=repr)
        _differ(name, _difference(missing, extra))


def _counted(got, expected) -> tuple[list, list] | None:
    """The items of ``expected`` that ``got`` lacks and those it has too many of (duplicates
    counted), or None when the items cannot be counted (unhashable ones)."""
    try:
        have, want = Counter(got), Counter(expected)
    except TypeError:
        return None
    return list((want - have).elements()), list((have - want).elements())


def _difference(missing: list, extra: list, shown: int = 6) -> str:
    """``missing ['a']; extra ['b', 'c']``: what a collection lacks and what it should not have,
    the first ``shown`` of each (with how many more)."""

    def listed(items: list) -> str:
        more = f" and {len(items) - shown} more" if len(items) > shown else ""
        return ", ".join(repr(item) for item in items[:shown]) + more

    parts = [f"missing {listed(missing)}"] if missing else []
    parts += [f"extra {listed(extra)}"] if extra else []
    return "; ".join(parts) or "the same items in another order"


def check_true(name: str, condition: bool, message: str, *, sanity: bool = False) -> None:
    """Pass when ``condition`` holds, else fail with ``message`` (which says what to fix).

    ``sanity=True`` says, when it passes, that this was only a plausibility check and the exact
    value is graded separately (by a hidden test)."""
    mode = recording.mode()
    if mode == recording.RECORD:
        got = recording.to_plain(condition)
        recording.publish({"check": "true", "name": str(name), "got": got, "message": str(message)})
    elif mode == recording.REFERENCE:
        recording.publish({"check": "true", "name": str(name)})
    if not condition:
        _fail(name, message)
    if mode != recording.RECORD:
        print(f"\u2705 {name}: {SANITY_NOTE}" if sanity else f"\u2705 {name}: correct")


def check_type(name: str, value, kind: str) -> None:
    """Pass when ``value`` is of ``kind`` (a key of TYPE_NAMES, e.g. ``"int"``). Only the type
    is checked, and the passing line says so: the value is graded separately."""
    if kind not in TYPE_NAMES:
        raise ValueError(f"check_type: unknown kind {kind!r}; use one of {sorted(TYPE_NAMES)}")

    def run():
        _check_type(name, value, kind)

    if not _recorded("type", name, value, kind, run):
        run()


def _check_type(name: str, value, kind: str) -> None:
    wanted = TYPE_NAMES[kind]
    if not _is_kind(value, kind):
        _fail(name, f"wrong type: expected {wanted}, got {type(value).__name__} {value!r:.60}")
    print(
        f"\u2705 {name} is {wanted}: only its type is checked here; its value is graded when "
        "you hand the lab in"
    )


def _is_kind(value, kind: str) -> bool:
    if isinstance(value, bool):
        return kind == "bool"
    classes = {"int": (int, np.integer), "float": (float, np.floating), "number": (Number,)}
    classes |= {"str": (str,), "list": (list,), "tuple": (tuple,), "dict": (dict,)}
    classes |= {"tensor": (torch.Tensor, np.ndarray), "bool": (np.bool_,)}
    return isinstance(value, classes[kind])


def not_done_line(tb) -> str | None:
    """The one-line message for a ``raise NotImplementedError()`` stub in a notebook cell, or
    None when the exception came from anywhere else."""
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    line = linecache.getline(code.co_filename, tb.tb_lineno).strip()
    if line != "raise NotImplementedError()":
        return None
    marks = (EXERCISE_MARK.match(text) for text in linecache.getlines(code.co_filename))
    number = next((m.group(1) for m in marks if m), None)
    what = "its answer cell" if code.co_name == "<module>" else code.co_name
    if number is None:
        return f"\u274c {what} is not done yet: it still raises NotImplementedError"
    return f"\u274c Exercise {number} is not done yet: {what} still raises NotImplementedError"


# The execution counts of answer cells that raised their stub, with their exercise's number: a
# check cell run right after one reads names that stub never defined.
_STUBS_RUN: dict[int, str] = {}
CHECK_CALL = re.compile(r"\bcheck_(?:value|tensor|type|true)\s*\(")


def _innermost(tb):
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb


def _record_stub(shell, tb) -> None:
    """Remember that the cell now running is an exercise's answer cell still raising its stub."""
    code = _innermost(tb).tb_frame.f_code
    if code.co_name != "<module>" or shell is None:
        return
    marks = (EXERCISE_MARK.match(text) for text in linecache.getlines(code.co_filename))
    number = next((m.group(1) for m in marks if m), None)
    if number is not None:
        _STUBS_RUN[shell.execution_count] = number


def not_defined_line(shell, value, tb) -> str | None:
    """The one-line message for a check cell that reads a name its exercise's answer has not
    defined (the answer cell still raises its stub, or was never run), or None when the
    NameError came from anywhere else (a student's own code keeps its traceback)."""
    name = getattr(value, "name", None)
    code = _innermost(tb).tb_frame.f_code
    if name is None or code.co_name != "<module>":
        return None
    if not CHECK_CALL.search("".join(linecache.getlines(code.co_filename))):
        return None
    number = _STUBS_RUN.get(shell.execution_count - 1) if shell is not None else None
    if number is not None:
        return (
            f"\u274c Exercise {number} is not done yet: its answer cell still raises "
            f"NotImplementedError, so {name} is not defined"
        )
    return (
        f"\u274c {name} is not defined: this exercise is not done yet, or a cell above (the "
        "setup cell, the answer cell) has not been run"
    )


def _show_not_done(shell, etype, value, tb, tb_offset=None):
    """IPython's handler for NotImplementedError and NameError: one line for a stub (and for a
    check reading a name the stub never defined), else the usual traceback. The cell still
    fails (an error output), so a grader scores it 0."""
    if issubclass(etype, NameError):
        line = not_defined_line(shell, value, tb)
    else:
        line = not_done_line(tb) if not value.args else None
        if line is not None:
            _record_stub(shell, tb)
    if line is None:
        stb = shell.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset)
    else:
        stb = [line]
    shell._showtraceback(etype, value, stb)  # IPython leaves showing it to the handler
    return stb


def _install_not_done_handler() -> None:
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None and hasattr(shell, "set_custom_exc"):
        shell.set_custom_exc((NotImplementedError, NameError), _show_not_done)


_install_not_done_handler()


def fresh_checks():
    """A private copy of this module, loaded from its file rather than ``sys.modules``.

    Hidden tests use it so that a student who monkeypatches ``course_utils.lessons.checks`` (say,
    to make every check pass) changes nothing in the grading:
    ``check = fresh_checks().check_value``.
    """
    import importlib.util

    spec = importlib.util.spec_from_file_location("_course_checks_fresh", __file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
