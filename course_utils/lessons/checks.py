"""Exercise checks that say in one line what is wrong, instead of a bare AssertionError.

A failed check raises :class:`CheckFailed` (an AssertionError, so graders count it as a failure);
in Jupyter it renders as a single line of feedback rather than a traceback.
"""

from __future__ import annotations

import math
from numbers import Number

import numpy as np
import torch


class CheckFailed(AssertionError):
    """A check that did not pass; shown in notebooks as one line of feedback."""

    def _render_traceback_(self) -> list[str]:  # IPython uses this instead of a traceback
        return [f"\u274c {self}"]


def _fail(name: str, message: str) -> None:
    raise CheckFailed(f"{name}: {message}")


def _passed(name: str, detail: str = "") -> None:
    print(f"\u2705 {name}: correct{' (' + detail + ')' if detail else ''}")


def _as_tensor(value):
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value)
    return None


def check_tensor(name: str, got, expected, *, atol: float = 1e-6, rtol: float = 1e-5) -> None:
    """Type, shape, then values (to a tolerance); the message names the first mismatch."""
    if got is None:
        _fail(name, "got None: did you forget to return or assign a value?")
    want = _as_tensor(expected)
    have = _as_tensor(got)
    if have is None:
        _fail(name, f"wrong type: expected a tensor, got {type(got).__name__}")
    if tuple(have.shape) != tuple(want.shape):
        _fail(name, f"wrong shape: expected {tuple(want.shape)} got {tuple(have.shape)}")
    have = have.detach().cpu()
    want = want.detach().cpu()
    if want.is_floating_point() or have.is_floating_point():
        if not have.is_floating_point():
            _fail(name, f"wrong dtype: expected a floating-point tensor, got {have.dtype}")
        diff = (have.double() - want.double()).abs()
        limit = atol + rtol * want.double().abs()
        bad = ~(diff <= limit)  # NaN counts as bad
        if bool(bad.any()):
            index = tuple(int(i) for i in torch.nonzero(bad)[0])
            worst = float(diff.nan_to_num(nan=math.inf).max())
            _fail(
                name,
                f"values off: max error {worst:.3g} (tolerance {atol:g}); first wrong at index "
                f"{index}: expected {float(want[index]):.6g} got {float(have[index]):.6g}",
            )
    else:
        bad = have != want
        if bool(bad.any()):
            index = tuple(int(i) for i in torch.nonzero(bad)[0])
            count = int(bad.sum())
            _fail(
                name,
                f"{count} of {want.numel()} values differ; first at index {index}: "
                f"expected {want[index].item()} got {have[index].item()}",
            )
    _passed(name, f"shape {tuple(want.shape)}")


def check_value(name: str, got, expected, *, rel_tol: float = 1e-6, abs_tol: float = 0.0) -> None:
    """Numbers (exact for ints, with tolerance for floats), strings, sequences and the rest."""
    if got is None and expected is not None:
        _fail(name, "got None: did you forget to return or assign a value?")
    if _as_tensor(expected) is not None:
        check_tensor(name, got, expected, atol=abs_tol, rtol=rel_tol)
        return
    if isinstance(expected, bool) or isinstance(got, bool):
        if got is not expected:
            _fail(name, f"expected {expected} got {got!r}")
    elif isinstance(expected, int):
        if not isinstance(got, (int, np.integer)) or isinstance(got, bool):
            _fail(name, f"wrong type: expected an int, got {type(got).__name__} {got!r}")
        if got != expected:
            _fail(name, f"expected {expected:,} got {int(got):,} (off by {int(got) - expected:+,})")
    elif isinstance(expected, Number):
        if not isinstance(got, Number):
            _fail(name, f"wrong type: expected a number, got {type(got).__name__}")
        if not math.isclose(got, expected, rel_tol=rel_tol, abs_tol=abs_tol):
            _fail(name, f"expected about {expected:.6g} got {got:.6g}")
    elif isinstance(expected, str):
        if not isinstance(got, str):
            _fail(name, f"wrong type: expected a str, got {type(got).__name__}")
        if got != expected:
            at = next(
                (i for i, (a, b) in enumerate(zip(got, expected)) if a != b),
                min(len(got), len(expected)),
            )
            _fail(name, f"strings differ at character {at}: expected {expected!r} got {got!r}")
    elif isinstance(expected, (list, tuple)):
        if not isinstance(got, (list, tuple)):
            kind = type(expected).__name__
            _fail(name, f"wrong type: expected a {kind}, got {type(got).__name__}")
        if len(got) != len(expected):
            _fail(name, f"wrong length: expected {len(expected)} got {len(got)}")
        for i, (a, b) in enumerate(zip(got, expected)):
            if a != b:
                _fail(name, f"first difference at index {i}: expected {b!r} got {a!r}")
    elif got != expected:
        _fail(name, f"expected {expected!r} got {got!r}")
    _passed(name)


def check_true(name: str, condition: bool, message: str) -> None:
    """Pass when ``condition`` holds, else fail with ``message`` (which says what to fix)."""
    if not condition:
        _fail(name, message)
    _passed(name)


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
