"""Checking a hand-in's values outside its kernel: what the checks record, how expected values
are cut out of test cells, and how records are compared (no kernels here)."""

import ast
import json
import math
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

from course_utils.grading.verify import check_aliases, strip_expected, verdict
from course_utils.lessons import checks, recording


def round_trip(value):
    return recording.from_plain(json.loads(json.dumps(recording.to_plain(value))))


@pytest.mark.parametrize(
    "value",
    [None, True, 3, -(2**70), 0.1, "text", [1, "a", None], (1, (2.5, "b")), {"P": None, 3: [1]},
     np.int64(7), np.float32(0.25), complex(1, -2), {"a", 2}, frozenset({(1, "b")})],
    ids=lambda v: type(v).__name__,
)  # fmt: skip
def test_plain_values_come_back_equal_and_of_the_same_type(value):
    back = round_trip(value)
    assert back == value and type(back) is type(value)


def test_tensors_and_arrays_come_back_bit_for_bit():
    for value in [torch.randn(3, 4), torch.tensor([1, 2], dtype=torch.long),
                  torch.tensor([float("nan"), math.inf]), torch.ones(2, dtype=torch.bfloat16),
                  torch.zeros(0, 3), torch.tensor(5)]:  # fmt: skip
        back = round_trip(value)
        assert back.dtype == value.dtype and back.shape == value.shape
        bits = [t.reshape(-1).view(torch.uint8).tolist() for t in (back, value)]
        assert bits[0] == bits[1]
    array = np.arange(6, dtype=np.int16).reshape(2, 3)
    assert np.array_equal(round_trip(array), array) and round_trip(array).dtype == np.int16
    meta = round_trip(torch.empty(2, 3, device="meta"))
    assert meta.device.type == "meta" and meta.shape == (2, 3)


class AlwaysEqual(int):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = int.__hash__

    def __repr__(self):
        return "8320"


class LyingTensor(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return torch.ones(2, 2)  # whatever is asked, the "right" answer


def test_an_object_that_lies_about_itself_is_recorded_as_what_it_is():
    liar = AlwaysEqual(5)
    assert liar == 8320  # it fools a check in its own kernel
    assert round_trip(liar) == 5 and type(round_trip(liar)) is int
    lying = torch.zeros(2, 2).as_subclass(LyingTensor)
    assert round_trip(lying).sum().item() == 0  # not the ones it claims to be
    assert type(round_trip(object())).__name__ == "object"


@pytest.mark.parametrize(
    "forged",
    [{"tensor": "float32", "shape": [2], "bytes": "AAAA"}, {"tensor": "no_dtype", "shape": []},
     {"int": "12abc"}, {"no": "tag"}, {"dict": [[[1], 2]]}, {"tensor": "int8", "shape": [10**9]}],
    ids=["short-bytes", "bad-dtype", "bad-int", "no-tag", "list-key", "huge-shape"],
)  # fmt: skip
def test_a_forged_record_is_unreadable_not_a_crash(forged):
    with pytest.raises(recording.Unreadable):
        recording.from_plain(forged)


def test_large_values_are_recorded_as_too_large():
    assert recording.to_plain(torch.zeros(recording.MAX_ELEMENTS + 1)) == {
        "too_large": recording.MAX_ELEMENTS + 1
    }


# ---------------------------------------------------------------------------------------------
# Cutting expected values out of test cells

SETUP = "from course_utils.lessons.checks import check_tensor, check_value as cv\nimport torch"
CELL = """hidden = fresh_checks()
check = fresh_checks().check_value
cv("a", f(1), 8_320)
check("b", f(2), expected=[1, 2])
hidden.check_tensor("c", g(), torch.tensor([0.5]), atol=1e-3)
check_true("d", ok, f"got {x}")
for T in (1, 3):
    check_tensor(f"e{T}", h(T), reference(T))
"""


def test_every_expected_value_is_cut_out_and_nothing_else():
    stripped = strip_expected(CELL, check_aliases([SETUP, CELL]))
    assert "8_320" not in stripped and "[1, 2]" not in stripped and "0.5" not in stripped
    assert "reference(T)" not in stripped
    assert stripped.count("...") == 4
    assert 'cv("a", f(1), ...)' in stripped and 'check("b", f(2), expected=...)' in stripped
    assert 'check_true("d", ok, f"got {x}")' in stripped  # its condition is what it records
    assert "atol=1e-3" in stripped and stripped.endswith("h(T), ...)\n")


def test_a_cell_that_is_not_python_is_left_as_it_is():
    assert strip_expected("%timeit f(1)", {}) == "%timeit f(1)"


# ---------------------------------------------------------------------------------------------
# Comparing records with the solution's


def reference(name, expected, **options):
    return {"check": "value", "name": name, "expected": recording.to_plain(expected),
            "options": options}  # fmt: skip


def verify_cell(records, refs):
    """Whether ``records`` match the solution's ``refs``, and the first failure's message."""
    return verdict(records, refs)[:2]


def got(name, value, check="value"):
    return {"check": check, "name": name, "got": recording.to_plain(value)}


def test_matching_records_pass_and_a_wrong_value_gets_the_checks_message():
    refs = [reference("a", 3), reference("b", 0.5, rel_tol=1e-3)]
    assert verify_cell([got("a", 3), got("b", 0.5004)], refs) == (True, "")
    assert verify_cell([got("a", 4), got("b", 0.5)], refs) == (
        False,
        "\u274c a: expected 3 got 4 (off by +1)",
    )


def test_missing_forged_or_reordered_records_fail():
    refs = [reference("a", 3), reference("b", [1, 2])]
    assert verify_cell([got("a", 3)], refs) == (False, "")  # the cell stopped: its error says why
    ok, message = verify_cell([got("b", [1, 2]), got("a", 3)], refs)
    assert not ok and "a: this check did not report to the grader" in message
    ok, message = verify_cell([got("a", 3), {"check": "value", "name": "b", "got": {"x": 1}}], refs)
    assert not ok and "its recorded value cannot be read back" in message
    assert verify_cell([], []) == (True, "")


def test_a_replayed_expected_value_is_an_ellipsis_and_fails():
    refs = [reference("a", 8320)]
    ok, message = verify_cell([got("a", ...)], refs)
    assert not ok and "wrong type: expected an int, got ellipsis" in message


def test_tensor_and_type_checks_use_the_solutions_tolerance_and_kind():
    refs = [{"check": "tensor", "name": "t", "expected": recording.to_plain(torch.ones(2)),
             "options": {"atol": 0.1, "rtol": 0.0}},
            {"check": "type", "name": "n", "expected": "int"}]  # fmt: skip
    values = [got("t", torch.ones(2) + 0.05, "tensor"), got("n", 7, "type")]
    assert verify_cell(values, refs) == (True, "")
    ok, message = verify_cell([got("t", torch.ones(2) + 0.5, "tensor"), values[1]], refs)
    assert not ok and message.startswith("\u274c t: values off")


def test_the_graders_checks_never_record(monkeypatch, capsys):
    monkeypatch.setenv(recording.MODE_ENV, recording.RECORD)  # as in a graded kernel
    assert verify_cell([got("a", 4)], [reference("a", 3)])[0] is False
    assert capsys.readouterr().out == ""
    with pytest.raises(checks.CheckFailed):
        checks._check_value("a", 4, 3, rel_tol=0, abs_tol=0)


def test_the_solutions_hint_reaches_the_graders_message_and_the_hand_ins_does_not():
    hinted = {**reference("p", 1.0), "hint": "no bias correction"}
    ok, message = verify_cell([got("p", 3.16)], [hinted])
    assert not ok and message.endswith("; likely cause: no bias correction")
    forged = {**got("p", 3.16), "hint": "the grader is broken"}  # a hand-in's own words
    assert "broken" not in verify_cell([forged], [reference("p", 1.0)])[1]


def test_a_reference_run_records_the_hint_and_a_hand_in_does_not(monkeypatch):
    published = []
    monkeypatch.setattr(recording, "publish", published.append)
    monkeypatch.setenv(recording.MODE_ENV, recording.REFERENCE)
    checks.check_value("p", 1.0, 1.0, hint="no bias correction")
    monkeypatch.setenv(recording.MODE_ENV, recording.RECORD)
    checks.check_value("p", 3.0, ..., hint="no bias correction")
    assert [r.get("hint") for r in published] == ["no bias correction", None]


# ---------------------------------------------------------------------------------------------
# Hidden tests that test the answer

SOLVED = sorted((Path(__file__).resolve().parents[1] / "solutions").glob("*.ipynb"))
HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", re.S)


def _bound(tree) -> set[str]:
    """Names a cell binds at its top level: functions, classes, assignments, imports."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def _read(tree) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def hidden_reads_an_answer(test_source: str, answer_sources: list[str]) -> bool:
    """Whether the hidden part of a test cell reads a name its exercise's answer cells bind,
    directly or through a function the cell's visible part defines (``schedule`` calling the
    student's ``lr_schedule``)."""
    answers = set().union(*(_bound(ast.parse(s)) for s in answer_sources))
    hidden = HIDDEN.search(test_source)
    if not hidden or not answers:
        return False
    visible = ast.parse(HIDDEN.sub("", test_source))
    helpers = {
        node.name: _read(node)
        for node in visible.body
        if isinstance(node, (ast.FunctionDef, ast.ClassDef))
    }  # fmt: skip
    reads = _read(ast.parse(hidden.group(1)))
    reads |= set().union(*(helpers[name] for name in reads & set(helpers)))
    return bool(reads & answers)


def exercises(nb):
    """(lab test cell id, its source, the answer cells' sources since the previous test)."""
    answers = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code":
            continue
        if meta.get("solution"):
            answers.append(cell.source)
        elif meta.get("grade"):
            yield meta["grade_id"], cell.source, answers
            answers = []


def test_every_hidden_test_reads_its_exercises_answer():
    """A hidden test that reads no answer passes every hand-in: it tests nothing."""
    blind = [
        f"{solution.stem} {grade_id}"
        for solution in SOLVED
        for grade_id, source, answers in exercises(nbformat.read(solution, as_version=4))
        if not hidden_reads_an_answer(source, answers)
    ]
    assert blind == []


def test_a_hidden_test_that_reads_no_answer_is_found():
    answer = "def f(x):\n    return x + 1"

    def cell(visible, hidden):
        return f"{visible}\n### BEGIN HIDDEN TESTS\n{hidden}\n### END HIDDEN TESTS\n"

    reads = cell("check_value('a', 1, 1)", "check_value('f(2)', f(2), 3)")
    blind = cell("check_value('a', f(1), 2)", "check_value('x', 3, 3)")
    helper = cell("def g():\n    return f(5)", "check_value('g', g(), 6)")
    assert hidden_reads_an_answer(reads, [answer])
    assert hidden_reads_an_answer(helper, [answer])
    assert not hidden_reads_an_answer(blind, [answer])
    assert not hidden_reads_an_answer("check_value('f', f(1), 2)\n", [answer])  # no hidden part
