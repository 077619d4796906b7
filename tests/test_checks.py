"""Exercise checks give one specific line of feedback and cannot be fooled by monkeypatching."""

import re

import pytest
import torch

import course_utils.lessons.checks as checks
from course_utils.lessons.checks import (
    CheckFailed,
    ValuesDiffer,
    check_tensor,
    check_true,
    check_type,
    check_value,
    fresh_checks,
)


def test_wrong_shape_names_both_shapes():
    with pytest.raises(
        CheckFailed, match=r"^logits: wrong shape: expected \(2, 10, 100\) got \(2, 10\)$"
    ):
        check_tensor("logits", torch.zeros(2, 10), torch.zeros(2, 10, 100))


def test_values_off_names_the_error_and_the_index():
    expected = torch.zeros(3, 4)
    got = expected.clone()
    got[1, 2] = 0.31
    with pytest.raises(CheckFailed, match=r"values off: max error 0\.31 .*index \(1, 2\)"):
        check_tensor("x", got, expected)


def test_wrong_type_and_none_are_named():
    with pytest.raises(CheckFailed, match="wrong type: expected a tensor, got list"):
        check_tensor("x", [1, 2], torch.tensor([1, 2]))
    with pytest.raises(CheckFailed, match="got None"):
        check_value("n", None, 3)
    with pytest.raises(CheckFailed, match="wrong type: expected an int, got float"):
        check_value("n", 3.0, 3)


def test_integer_tensors_are_compared_exactly():
    with pytest.raises(CheckFailed, match="1 of 3 values differ; first at index \\(2,\\)"):
        check_tensor("ids", torch.tensor([1, 2, 4]), torch.tensor([1, 2, 3]))


def test_equal_infinities_pass_and_opposite_ones_fail():
    check_tensor("mask", torch.tensor([0.0, -torch.inf]), torch.tensor([0.0, -torch.inf]))
    with pytest.raises(CheckFailed, match="values off"):
        check_tensor("mask", torch.tensor([0.0, torch.inf]), torch.tensor([0.0, -torch.inf]))


def test_nan_values_fail():
    with pytest.raises(CheckFailed, match="values off"):
        check_tensor("x", torch.tensor([float("nan")]), torch.tensor([1.0]))


def test_passing_checks_print_a_correct_line(capsys):
    check_value("count", 368, 368)
    check_value("loss", 4.6052, 4.60517, rel_tol=1e-4)
    check_value("text", "abc", "abc")
    check_tensor("emb", torch.ones(2, 3), torch.ones(2, 3))
    check_true("flag", True, "unused")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "\u2705 count: correct"
    assert len(lines) == 5


def test_exact_ints_strings_and_sequences_report_the_difference():
    with pytest.raises(CheckFailed, match=r"expected 368 got 400 \(off by \+32\)"):
        check_value("params", 400, 368)
    with pytest.raises(CheckFailed, match="strings differ at character 1"):
        check_value("s", "axc", "abc")
    with pytest.raises(CheckFailed, match="first difference at index 1"):
        check_value("ids", [1, 5, 3], [1, 2, 3])


def test_a_list_of_another_length_names_what_is_missing_and_what_is_extra():
    with pytest.raises(
        ValuesDiffer, match=r"^buffer names: expected 2 items got 1: missing 'scratch_pad'$"
    ):
        check_value("buffer names", ["total"], ["scratch_pad", "total"])
    with pytest.raises(CheckFailed, match=r"^v: expected 4 items got 5: extra 'l'$"):
        check_value("v", list("ehllo"), list("ehlo"))  # a duplicate counts
    with pytest.raises(
        CheckFailed, match=r"^k: expected 2 items got 3: missing 'b'; extra 'x', 'y'$"
    ):
        check_value("k", ("a", "x", "y"), ("a", "b"))
    with pytest.raises(CheckFailed, match=r"^n: expected 1 items got 9: extra 1, 2, 3, 4, 5, 6 "
                       r"and 2 more$"):  # fmt: skip
        check_value("n", list(range(9)), [0])
    with pytest.raises(CheckFailed, match=r"^u: expected 1 items got 2$"):  # unhashable items
        check_value("u", [[1], [2]], [[1]])
    with pytest.raises(CheckFailed, match=r"^l: expected 1 items got 2; likely cause: a hint$"):
        check_value("l", [[1], [2]], [[1]], hint="a hint")  # a hint is reached


def test_a_set_that_differs_names_what_is_missing_and_what_is_extra():
    check_value("s", {"b", "a"}, {"a", "b"})
    with pytest.raises(ValuesDiffer, match=r"^s: missing 'c'; extra 'd', 'e'$"):
        check_value("s", {"a", "e", "d"}, {"a", "c"})
    with pytest.raises(CheckFailed, match=r"^s: wrong type: expected a set, got list$"):
        check_value("s", ["a"], {"a"})
    with pytest.raises(CheckFailed, match=r"^s: missing 1; likely cause: count it$"):
        check_value("s", frozenset(), frozenset({1}), hint="count it")


def test_check_failures_render_as_one_line_in_jupyter():
    err = CheckFailed("x: wrong shape")
    assert err._render_traceback_() == ["\u274c x: wrong shape"]
    assert isinstance(err, AssertionError)


def test_fresh_checks_ignore_a_monkeypatched_module(monkeypatch):
    monkeypatch.setattr(checks, "check_value", lambda *args, **kwargs: None)
    checks.check_value("n", 1, 2)  # the patched one lets anything through
    with pytest.raises(AssertionError, match="expected 2 got 1"):
        fresh_checks().check_value("n", 1, 2)


def test_quizzes_come_from_data_files_with_the_right_answers_spread_evenly():
    from collections import Counter

    from course_utils.lessons.widgets import QUIZ_DIR, Quiz, load_questions

    lessons = sorted(p.stem for p in QUIZ_DIR.glob("*.json"))
    assert len(lessons) >= 11
    positions = Counter()
    for lesson in lessons:
        first, again = load_questions(lesson), load_questions(lesson)
        assert first == again  # the shuffle is fixed
        for q in first:
            assert len(set(q.options)) == len(q.options) and 0 <= q.answer < len(q.options)
            positions[q.answer] += 1
    assert max(positions.values()) - min(positions.values()) <= len(lessons) // 4 + 1
    quiz = Quiz.for_lesson(lessons[0])
    assert len(quiz.questions) == len(load_questions(lessons[0]))
    with pytest.raises(FileNotFoundError, match="no quiz for lesson"):
        load_questions("99_nothing")


def test_show_displays_a_plain_figure_as_a_png_image(monkeypatch):
    from IPython.display import Image
    from matplotlib.figure import Figure

    from course_utils.lessons import widgets

    shown = []
    monkeypatch.setattr(widgets, "display", shown.append)
    fig = Figure(figsize=(2, 1))
    fig.add_subplot().plot([0, 1])
    widgets.show(fig)
    assert len(shown) == 1 and isinstance(shown[0], Image) and shown[0].format == "png"
    assert shown[0].data[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "got, expected, message",
    [
        (torch.tensor([1.0, 2.0]), torch.tensor([1, 2]),
         "wrong dtype: expected an integer tensor (torch.int64) got torch.float32"),
        (torch.tensor([1, 2]), torch.tensor([1.0, 2.0]),
         "wrong dtype: expected a floating-point tensor (torch.float32) got torch.int64"),
        (torch.tensor([1, 0]), torch.tensor([True, False]),
         "wrong dtype: expected a boolean tensor (torch.bool) got torch.int64"),
    ],
    ids=["float-for-int", "int-for-float", "int-for-bool"],
)  # fmt: skip
def test_a_tensor_of_another_dtype_kind_fails_naming_both_dtypes(got, expected, message):
    with pytest.raises(CheckFailed, match=f"^x: {re.escape(message)}$"):
        check_tensor("x", got, expected)


def test_integer_tensors_of_another_width_still_pass():
    check_tensor("ids", torch.tensor([1, 2], dtype=torch.int32), torch.tensor([1, 2]))


def test_a_type_check_says_only_the_type_was_checked(capsys):
    check_type("params_saved_by_tying", 7, "int")  # a wrong value: only the type is checked
    line = capsys.readouterr().out.strip()
    assert line.startswith("\u2705 params_saved_by_tying is an int: only its type is checked")
    assert "graded when you hand the lab in" in line and "correct" not in line
    with pytest.raises(CheckFailed, match="wrong type: expected an int, got float 7.0"):
        check_type("n", 7.0, "int")
    with pytest.raises(CheckFailed, match="expected an int, got bool"):
        check_type("n", True, "int")
    with pytest.raises(ValueError, match="unknown kind 'integer'"):
        check_type("n", 7, "integer")


def test_a_sanity_check_says_the_value_is_graded_separately(capsys):
    check_true("loss in range", True, "unused", sanity=True)
    assert capsys.readouterr().out.strip() == f"\u2705 loss in range: {checks.SANITY_NOTE}"


def run_cells(*sources):
    """Run cells in a fresh IPython shell; what each printed (stdout, with tracebacks)."""
    import contextlib
    import io

    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_cell("import course_utils.lessons.checks as c; c._install_not_done_handler()")
    printed = []
    for source in sources:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            result = shell.run_cell(source)
        printed.append((out.getvalue().strip(), result.error_in_exec))
    return printed


def test_a_stub_that_raises_not_implemented_reports_one_line_and_still_fails():
    stub = "    # YOUR CODE HERE\n    raise NotImplementedError()"
    answer = f"# Exercise 1\ndef build_vocab(text):\n{stub}"
    printed = run_cells(
        answer, "build_vocab('abc')", "# YOUR CODE HERE\nraise NotImplementedError()"
    )
    assert printed[0] == ("", None)
    text, error = printed[1]
    assert text == "\u274c Exercise 1 is not done yet: build_vocab still raises NotImplementedError"
    assert isinstance(error, NotImplementedError)  # the cell fails: a grader scores it 0
    text, error = printed[2]
    assert text == "\u274c its answer cell is not done yet: it still raises NotImplementedError"
    assert isinstance(error, NotImplementedError)


def test_a_check_reading_a_name_its_stub_never_defined_reports_one_line():
    """As in Run All of an untouched lab: the answer cell raises its stub, so the check cell
    after it reads an undefined name; a NameError in a student's own cell keeps its traceback."""
    import contextlib
    import io

    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_cell("import course_utils.lessons.checks as c; c._install_not_done_handler()")
    shell.run_cell("from course_utils.lessons.checks import check_type")
    printed = []
    for source in (
        "# Exercise 4\n# YOUR CODE HERE\nraise NotImplementedError()",
        'check_type("saved", saved, "int")',
        "total = sum(undefined_list)",
        'check_type("other", other, "int")',
    ):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            result = shell.run_cell(source, store_history=True)  # as a kernel runs a cell
        printed.append((out.getvalue().strip(), result.error_in_exec))
    text, error = printed[1]
    assert text == (
        "\u274c Exercise 4 is not done yet: its answer cell still raises NotImplementedError, "
        "so saved is not defined"
    )
    assert isinstance(error, NameError)  # the cell still fails: a grader scores it 0
    text, error = printed[2]
    assert "Traceback" in text and "undefined_list" in text
    text, error = printed[3]
    assert text.startswith("\u274c other is not defined: this exercise is not done yet")
    assert isinstance(error, NameError)


def test_other_not_implemented_errors_keep_their_traceback():
    ((text, error),) = run_cells("raise NotImplementedError('torch has no kernel for this')")
    assert "Traceback" in text and "torch has no kernel for this" in text
    assert isinstance(error, NotImplementedError)


def test_a_hint_names_the_likely_cause_when_the_values_differ_and_only_then():
    hint = "no bias correction"
    with pytest.raises(CheckFailed, match=r"values off: .*; likely cause: no bias correction$"):
        check_tensor("p", torch.ones(3) * 3.16, torch.ones(3), hint=hint)
    with pytest.raises(CheckFailed, match=r"^p: wrong shape: expected \(3,\) got \(2,\)$"):
        check_tensor("p", torch.ones(2), torch.ones(3), hint=hint)
    with pytest.raises(CheckFailed, match=r"^n: expected 3 got 4 \(off by \+1\); likely cause: x$"):
        check_value("n", 4, 3, hint="x")
    with pytest.raises(CheckFailed, match=r"^n: wrong type: expected an int, got str '3'$"):
        check_value("n", "3", 3, hint="x")
    check_tensor("p", torch.ones(3), torch.ones(3), hint=hint)  # passes: no hint shown
