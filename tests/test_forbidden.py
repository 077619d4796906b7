"""The forbidden-call rule gives no false zeros: what an exercise asks the student to write is
forbidden only where the code its test runs reaches the library's callable (by identity, or by a
name the lab defines). A student's own function of the same name, a self-test in the answer
cell and a library module built only to count its parameters cost nothing; a real use is still
caught, and the message names the exercise and the callable in full."""

from __future__ import annotations

import csv

import nbformat
import pytest
from grading_helpers import require_sandbox, save

from course_utils.grading import command as grading
from course_utils.grading.forbidden import forbidden_uses, notebook_names, reached
from course_utils.tools.labs import LABS, SOLUTIONS

SETUP = """import torch
import torch.nn.functional as F
from torch import nn
from course_utils.engine.training import lr_at, TrainConfig
"""
LAYER_NORM = ["torch.nn.functional.layer_norm", "torch.nn.LayerNorm", "torch.layer_norm"]
OWN = """def layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt((x - mu).pow(2).mean(-1, keepdim=True) + eps) * w + b
"""
SELF_TEST = (  # the first case: its own layer_norm, checked against F.layer_norm
    OWN + "\nx, w, b = torch.randn(2, 5, 8), torch.randn(8), torch.randn(8)\n"
    "assert torch.allclose(layer_norm(x, w, b), F.layer_norm(x, (8,), w, b), atol=1e-5)\n"
)
COUNTS = """class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight


layernorm_4096 = sum(p.numel() for p in nn.LayerNorm(4096).parameters())
rmsnorm_4096 = sum(p.numel() for p in nn.RMSNorm(4096).parameters())
"""  # the second case: library modules built only to count their parameters
USES_F = """def layer_norm(x, weight, bias, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)
"""


@pytest.mark.parametrize(
    ("source", "found"),
    [
        (SELF_TEST, []),
        (OWN + "layer_norm(torch.ones(3), torch.ones(3), torch.zeros(3))\n", []),
        ("def f():\n    return sum(p.numel() for p in nn.LayerNorm(9).parameters())", []),
        ("from torch.nn.functional import layer_norm\n", []),  # imported, never reached
        ("x = torch.randn(3)  # F.layer_norm would be easier", []),
        ("%timeit layer_norm(x)", []),  # not Python: nothing read
        ("def f(layer_norm=None):\n    return layer_norm", []),
        (USES_F, ["torch.nn.functional.layer_norm"]),
        ("layer_norm = F.layer_norm\n", ["torch.nn.functional.layer_norm"]),
        ("ln = F.layer_norm\ndef layer_norm(x, w, b):\n    return ln(x, (3,), w, b)",
         ["torch.nn.functional.layer_norm"]),
        ("layer_norm = lambda x, w, b: F.layer_norm(x, (3,), w, b)",
         ["torch.nn.functional.layer_norm"]),
        ("def layer_norm(x, w, b):\n    return getattr(F, 'layer_norm')(x, (3,), w, b)",
         ["torch.nn.functional.layer_norm"]),
        ("def layer_norm(x, w, b):\n    return torch.nn.modules.normalization.F.layer_norm(x)",
         ["torch.nn.functional.layer_norm"]),  # another path to the same callable
        ("class LN(nn.modules.normalization.LayerNorm):\n    pass", ["torch.nn.LayerNorm"]),
        ("def layer_norm(x, w, b):\n    return torch.layer_norm(x, (3,), w, b)",
         ["torch.layer_norm"]),
        ("from torch.nn.functional import *\ndef layer_norm(x, w, b):\n    return layer_norm(x)",
         []),  # its own name, even beside a star import
        ("from torch.nn.functional import *\ndef ln(x, w, b):\n    return layer_norm(x)",
         ["torch.nn.functional.layer_norm"]),
    ],
)  # fmt: skip
def test_forbidden_is_what_the_test_run_reaches(source, found):
    assert reached(source, LAYER_NORM, notebook_names([SETUP, source])) == found


def test_a_name_the_lab_defines_is_forbidden_by_name_and_a_rebound_one_is_the_students():
    lr = ["course_utils.engine.training.lr_at"]
    calls = "def lr_schedule(s, n, p, w, r):\n    return lr_at(s, TrainConfig(n))"
    assert reached(calls, lr, notebook_names([SETUP, calls])) == lr
    rebound = "def lr_schedule(s, n, p, w, r):\n    return 0.0\n\n\nlr_at = lambda s, c: 0.0"
    assert reached(rebound, lr, notebook_names([SETUP, rebound])) == []
    own = "def counted_flops(m):\n    return 1\ndef f(m):\n    return counted_flops(m)"
    assert reached(own, ["counted_flops"], notebook_names([SETUP])) == []
    theirs = "def f(m):\n    return counted_flops(m)"
    assert reached(theirs, ["counted_flops"], notebook_names([SETUP])) == ["counted_flops"]


LAB03 = SOLUTIONS / "03_block_assembly.ipynb"


def lab03_hand_in(**answers):
    """Lab 03 as handed out, with the solution's answers except those given."""
    nb = nbformat.read(LABS / LAB03.name, as_version=4)
    solution = {c.metadata.get("nbgrader", {}).get("grade_id"): c.source
                for c in nbformat.read(LAB03, as_version=4).cells}  # fmt: skip
    for c in nb.cells:
        grade_id = c.metadata.get("nbgrader", {}).get("grade_id")
        if c.metadata.get("nbgrader", {}).get("solution"):
            c.source = answers.get(grade_id, solution[grade_id])
    return nb


def test_the_forbidden_answers_of_lab_03_as_the_grader_reads_them():
    forbidden = {"ex1-answer": LAYER_NORM, "ex2-answer": ["torch.nn.RMSNorm"]}
    honest = lab03_hand_in(**{"ex1-answer": SELF_TEST, "ex2-answer": COUNTS})
    assert forbidden_uses(honest, forbidden) == {}
    caught = lab03_hand_in(**{"ex1-answer": USES_F})
    assert forbidden_uses(caught, forbidden) == {"ex1-answer": ["torch.nn.functional.layer_norm"]}


@pytest.fixture(scope="module")
def lab03(tmp_path_factory):
    require_sandbox()
    subs = tmp_path_factory.mktemp("lab03") / "submissions"
    save(lab03_hand_in(**{"ex1-answer": SELF_TEST}), subs / "self_tester.ipynb")
    save(lab03_hand_in(**{"ex2-answer": COUNTS}), subs / "counter.ipynb")
    save(lab03_hand_in(**{"ex1-answer": USES_F}), subs / "uses_f.ipynb")
    out, feedback = subs.parent / "gradebook.csv", subs.parent / "feedback"
    argv = [LAB03.stem, str(subs), "--out", str(out), "--feedback", str(feedback)]
    assert grading.main([*argv, "--jobs", "2"]) == 0
    rows = {row["student"]: row for row in csv.DictReader(out.open(encoding="utf-8"))}
    return {"rows": rows, "feedback": feedback}


def test_a_self_tester_and_a_parameter_counter_score_full(lab03):
    for student in ("self_tester", "counter"):
        row = lab03["rows"][student]
        assert (row["status"], row["total"], row["max"], row["reason"]) == (
            "graded", "10", "10", ""
        ), student  # fmt: skip


def test_a_real_forbidden_use_is_caught_and_named(lab03):
    row = lab03["rows"]["uses_f"]
    assert (row["ex1-check"], row["total"]) == ("0", "8")
    note = (
        "Exercise 1: LayerNorm from scratch: your answer uses torch.nn.functional.layer_norm "
        "when its test runs; write it yourself instead"
    )
    assert row["reason"] == note
    text = (lab03["feedback"] / "uses_f.md").read_text(encoding="utf-8")
    assert (
        f"## Exercise 1: LayerNorm from scratch: 0 / 2\n\n\u274c {note}: this exercise scores 0"
        in text
    )
