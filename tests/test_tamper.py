"""Hidden tests a hand-in cannot switch off: hand-ins that tamper with the checking machinery in
every way its source suggests. Each one answers exercise 1 honestly, then tampers (in its
exercise 2 answer cell) and answers exercises 2 and 3 wrongly: the honest exercise keeps its 2
points, the tampered ones score 0.
"""

import csv
import json
import os
import subprocess
import sys

import nbformat
import pytest
from grading_helpers import (
    answered,
    feedback_of,
    grade_folder,
    lab,
    points,
    require_sandbox,
    save,
    solution,
    solved,
)

from course_utils.grading import command as grading
from course_utils.tools.labs import LABS, SOLUTIONS

WRONG_VOCAB = """

def char_vocab(text):
    return sorted(text)  # wrong: keeps duplicates"""
WRONG_ONE_HOT = """import torch


def one_hot(ids, vocab_size):
    return ids.float()  # wrong: not one-hot"""

PERMISSIVE = """def _always_pass(name, *args, **kwargs):
    print(f"\\u2705 {name}: correct")
"""

ATTACKS = {
    # the checks the test cells call, in the namespace and in the module
    "patch_checks": PERMISSIVE
    + """
import course_utils.lessons.checks as checks

checks.check_value = checks.check_tensor = checks.check_true = _always_pass
check_value = check_tensor = check_true = _always_pass""",
    # fresh_checks, which hidden tests import, hands out the patched module
    "patch_fresh_checks": PERMISSIVE
    + """
import course_utils.lessons.checks as checks

checks.check_value = checks.check_tensor = checks.check_true = _always_pass
check_value = check_tensor = _always_pass
checks.fresh_checks = lambda: checks""",
    # fresh_checks loads the file through importlib: make that load nothing
    "patch_importlib": PERMISSIVE
    + """
import importlib._bootstrap_external
import importlib.util

import course_utils.lessons.checks as checks

checks.check_value = checks.check_tensor = checks.check_true = _always_pass
check_value = check_tensor = _always_pass
importlib.util.module_from_spec = lambda spec: checks
importlib._bootstrap_external.SourceFileLoader.exec_module = lambda self, module: None""",
    # a whole fake checks module in sys.modules
    "fake_module": PERMISSIVE
    + """
import sys
import types

fake = types.ModuleType("course_utils.lessons.checks")
fake.check_value = fake.check_tensor = fake.check_true = _always_pass
fake.fresh_checks = lambda: fake
sys.modules["course_utils.lessons.checks"] = fake
check_value = check_tensor = _always_pass""",
    # what the checks rely on: their failure functions, math.isclose, Tensor.any
    "patch_internals": """import math

import torch

import course_utils.lessons.checks as checks

checks._fail = checks._differ = lambda name, message: None
math.isclose = lambda *args, **kwargs: True
torch.Tensor.any = lambda self, *args, **kwargs: torch.tensor(False)""",
    # values that lie: equal to anything, a tensor that answers what it is asked
    "lying_values": """import torch


class Anything(str):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = str.__hash__


class Agreeable(list):
    def __len__(self):
        return 4

    def __iter__(self):
        return iter([Anything("?")] * 4)

    def __ne__(self, other):
        return False


class Chameleon(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func.__name__ in ("__get__", "shape", "detach", "cpu", "double", "__sub__"):
            return super().__torch_function__(func, types, args, kwargs or {})
        return torch.zeros(())


def char_vocab(text):
    return Agreeable(sorted(text))""",
    # errors never reach the grader: every later cell is wrapped in try/except
    "hide_errors": """ip = get_ipython()
ip.input_transformers_post.append(
    lambda lines: ["try:\\n", *("    " + ln for ln in lines), "\\nexcept BaseException:\\n pass\\n"]
)""",
    # the test cells never run: an input transformer empties every cell that checks anything
    "neuter_tests": """ip = get_ipython()
ip.input_transformers_post.append(lambda ls: ["pass\\n"] if "check" in "".join(ls) else ls)""",
    # the checks record the expected value as if it were the answer (a replay)
    "replay_expected": """import importlib._bootstrap_external

import course_utils.lessons.checks as checks
from course_utils.lessons import recording


def _replay(name, got, expected, **options):
    recording.publish({"check": "value", "name": name, "got": recording.to_plain(expected)})


checks.check_value = checks.check_tensor = _replay
check_value = check_tensor = _replay
checks.fresh_checks = lambda: checks""",
    # the checks think they are in a student's notebook and compare in the kernel, where the
    # hand-in has made their failures return quietly
    "mode_off": """import os

import course_utils.lessons.checks as checks

os.environ["COURSE_UTILS_CHECKS"] = \"\"
checks._fail = checks._differ = lambda name, message: None""",
    # the answer reads the expected value off the test cell that calls it
    "peek_at_the_test": """import ast
import inspect


def char_vocab(text):
    caller = inspect.stack()[1]
    call = ast.parse("".join(caller.code_context or []).strip()).body[0].value
    return ast.literal_eval(call.args[2])""",
}
HONEST_THEN_0 = {"ex1_test": 2.0, "ex2_test": 0.0, "ex3_test": 0.0}
# The test cells each attack makes pass in a plain shell (its positive control). Exercise 3's
# hidden test takes fresh checks, which only the attacks on fresh_checks itself (or on IPython)
# reach; the others fool exercise 2's visible checks.
FOOLS_BOTH = {"fake_module", "hide_errors", "neuter_tests", "patch_fresh_checks",
              "patch_importlib", "replay_expected"}  # fmt: skip


# A positive control: the hand-in, hidden tests and all, run cell by cell in a plain IPython shell
# (the checks in a student's mode, no grader); prints the graded test cells that raised.
PLAIN_SHELL = """import json, sys
from IPython.core.interactiveshell import InteractiveShell

shell = InteractiveShell.instance()
failed = []
for cell in json.load(open(sys.argv[1], encoding="utf-8"))["cells"]:
    if cell["cell_type"] == "code":
        result = shell.run_cell("".join(cell["source"]), silent=True)  # a str or a list
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id", "")
        if grade_id.endswith("_test") and not result.success:
            failed.append(grade_id)
print("FAILED=" + json.dumps(failed))
"""


def fails_in_a_plain_shell(nb, folder) -> list[str]:
    """The test cells of ``nb`` (the solution's, hidden tests included) that fail when it runs
    in a plain IPython shell, with no grader."""
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / "hand_in.ipynb")
    env = {k: v for k, v in os.environ.items() if k != "COURSE_UTILS_CHECKS"}
    done = subprocess.run(
        [sys.executable, "-c", PLAIN_SHELL, str(folder / "hand_in.ipynb")],
        capture_output=True, text=True, env=env, timeout=600, cwd=folder,
    )  # fmt: skip
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("FAILED=")]
    assert lines, done.stderr[-2000:]
    return json.loads(lines[-1].removeprefix("FAILED="))


def attacked(name: str, nb):
    source = ATTACKS[name]
    source = source if "def char_vocab" in source else source + WRONG_VOCAB
    return answered(nb, ex2_answer=source, ex3_answer=WRONG_ONE_HOT)


def test_without_an_attack_the_wrong_answers_fail_in_a_plain_shell(tmp_path):
    wrong = answered(solution(), ex2_answer=WRONG_VOCAB, ex3_answer=WRONG_ONE_HOT)
    assert fails_in_a_plain_shell(wrong, tmp_path) == ["ex2_test", "ex3_test"]


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_each_attack_fools_the_checks_without_the_grader(attack, tmp_path):
    """The positive control: an attack the grader blocks must work where there is no grader,
    or blocking it proves nothing."""
    fooled = {"ex2_test", "ex3_test"} if attack in FOOLS_BOTH else {"ex2_test"}
    failed = fails_in_a_plain_shell(attacked(attack, solution()), tmp_path)
    assert not fooled & set(failed), failed


@pytest.fixture(scope="module")
def tampered(tmp_path_factory):
    root = tmp_path_factory.mktemp("tamper")
    for name in ATTACKS:
        save(attacked(name, solved(lab(), "ex1_answer")), root / "submissions" / f"{name}.ipynb")
    return grade_folder(root)


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_tampered_exercise_scores_0_and_the_honest_one_keeps_its_points(tampered, attack):
    row = tampered["rows"][attack]
    assert (row["status"], points(row)) == ("graded", HONEST_THEN_0), row["reason"]


def test_the_feedback_comes_from_the_graders_own_checks(tampered):
    for attack in ("patch_checks", "neuter_tests"):
        text = feedback_of(tampered, attack)
        assert "\u274c char_vocab('hello'): this check did not report to the grader" in text
    text = feedback_of(tampered, "lying_values")
    assert "\u274c char_vocab('hello'): wrong type: expected a list, got" not in text
    assert (
        "\u274c char_vocab('hello'): first difference at index 0: expected 'e' got 'e'" not in text
    )
    assert "\u274c char_vocab('hello'): expected 4 items got 5: extra 'l'" in text
    text = feedback_of(tampered, "hide_errors")
    assert "\u274c one_hot([0, 2], 3): wrong shape: expected (2, 3) got (2,)" in text


def test_a_replayed_or_peeked_expected_value_is_only_the_ellipsis_the_kernel_saw(tampered):
    # the test cells reach the kernel with every expected value cut out
    for attack in ("replay_expected", "peek_at_the_test"):
        assert "got ellipsis" in feedback_of(tampered, attack)


# ---------------------------------------------------------------------------------------------
# On a real lab: lab 10, whose schedule exercise once trusted the notebook's lr_at

LAB10 = SOLUTIONS / "10_training_loop.ipynb"
# the check once compared lr_schedule with the notebook's lr_at, in the kernel: rebind both
REBOUND = """def lr_schedule(step, steps, peak_lr, warmup_steps, min_lr_ratio):
    return 0.0


lr_at = lambda step, cfg: 0.0  # noqa: E731"""
CALLS_LR_AT = """def lr_schedule(step, steps, peak_lr, warmup_steps, min_lr_ratio):
    config = TrainConfig(steps, peak_lr, warmup_steps=warmup_steps, min_lr_ratio=min_lr_ratio)
    return lr_at(step, config)"""
FORGED = """from course_utils.lessons import checks

checks.check_true = checks.check_value = checks.check_tensor = lambda *args, **kwargs: None
check_true = check_value = check_tensor = checks.check_true"""


def lab10_hand_in(**answers):
    """Lab 10 with the solution's answers, except those given."""
    nb = nbformat.read(LABS / LAB10.name, as_version=4)
    source = nbformat.read(LAB10, as_version=4)
    for c in nb.cells:
        grade_id = c.metadata.get("nbgrader", {}).get("grade_id")
        if c.metadata.get("nbgrader", {}).get("solution"):
            solved = next(s for s in source.cells if s.metadata.get("nbgrader", {}).get(
                "grade_id") == grade_id).source  # fmt: skip
            c.source = answers.get(grade_id, solved)
    return nb


@pytest.fixture(scope="module")
def lab10(tmp_path_factory):
    require_sandbox()
    subs = tmp_path_factory.mktemp("lab10") / "submissions"
    save(lab10_hand_in(**{"ex2-answer": REBOUND}), subs / "rebound_reference.ipynb")
    save(lab10_hand_in(**{"ex2-answer": CALLS_LR_AT}), subs / "calls_reference.ipynb")
    blank = nbformat.read(LABS / LAB10.name, as_version=4)
    first = next(c for c in blank.cells if c.metadata.get("nbgrader", {}).get("solution"))
    first.source = FORGED
    save(blank, subs / "forged_checks.ipynb")
    subs.joinpath("linked.ipynb").symlink_to(LAB10)
    out, feedback = subs.parent / "gradebook.csv", subs.parent / "feedback"
    argv = [LAB10.stem, str(subs), "--out", str(out), "--feedback", str(feedback)]
    assert grading.main([*argv, "--jobs", "2"]) == 0  # forbidden calls score 0 by default
    rows = {row["student"]: row for row in csv.DictReader(out.open(encoding="utf-8"))}
    return {"rows": rows, "feedback": feedback}


def lab10_points(row):
    return {f"ex{i}-check": float(row[f"ex{i}-check"]) for i in range(1, 6)}


FULL10 = {f"ex{i}-check": 2.0 for i in range(1, 6)}


def test_a_rebound_reference_does_not_pass_lab_10s_schedule(lab10):
    row = lab10["rows"]["rebound_reference"]
    # exercise 5's run trains with the lab's own train_steps, which reads lr_at too: the
    # rebound lr_at spoils it as well
    zeros = {"ex2-check": 0.0, "ex5-check": 0.0}
    assert (row["status"], lab10_points(row)) == ("graded", {**FULL10, **zeros})
    text = (lab10["feedback"] / "rebound_reference.md").read_text(encoding="utf-8")
    ex2 = "## Exercise 2: warmup + cosine: 0 / 2\n\n\u274c lr_schedule over 200 steps"
    assert ex2 in text  # a visible check's message: the student may read it
    assert "values off" in text.split("## Exercise 2")[1].split("##")[0]


def test_calling_lr_at_is_reported_and_scores_0_by_default(lab10):
    row = lab10["rows"]["calls_reference"]
    assert lab10_points(row) == {**FULL10, "ex2-check": 0.0}
    assert row["reason"] == (
        "Exercise 2: warmup + cosine: your answer uses course_utils.engine.training.lr_at when "
        "its test runs; write it yourself instead"
    )
    text = (lab10["feedback"] / "calls_reference.md").read_text(encoding="utf-8")
    assert f"\u274c {row['reason']}: this exercise scores 0" in text


def test_a_blank_lab_with_forged_checks_and_a_link_to_the_key_score_0(lab10):
    forged = lab10["rows"]["forged_checks"]
    assert (forged["status"], forged["total"]) == ("graded", "0")
    text = (lab10["feedback"] / "forged_checks.md").read_text(encoding="utf-8")
    assert "is not done yet" in text  # the grader's own line for each untouched exercise
    linked = lab10["rows"]["linked"]
    assert (linked["status"], linked["total"]) == ("not_regular", "0")
    assert linked["reason"].startswith(f"linked.ipynb is a symbolic link (to {LAB10})")
