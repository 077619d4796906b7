"""Labs are generated from solutions by nbgrader's preprocessors; empty answers fail every check
and a wrong answer (of the right type and shape) loses exactly its exercise's points."""

import ast
import builtins
import csv
import importlib
import json
import re
import shutil

import nbformat
import pytest
from grading_helpers import require_sandbox

from course_utils.grading import command as grading
from course_utils.grading.cells import parse_cell
from course_utils.grading.forbidden import exercise_forbidden, forbidden_uses
from course_utils.tools.labs import LABS, RUN_ALL_TAG, SOLUTIONS, check_all, render_lab

SOLVED = sorted(SOLUTIONS.glob("*.ipynb"))

# Per lab: an answer cell, a change that keeps its type and shape but makes its value wrong, and
# the test cell that must lose its points (and only it). Most are caught by a hidden test only.
WRONG = {
    "01_tokens_and_embeddings": ("ex4-answer", "65 * 128  #", "65 * 128 + 128  #", "ex4-check"),
    "02_attention": ("ex3-answer", "x.view(B, T, n_head, C // n_head).transpose(1, 2)",
                     "x.view(B, T, C // n_head, n_head).permute(0, 3, 1, 2)", "ex3-check"),
    "03_block_assembly": ("ex2-answer", "layernorm_4096 = 2 * 4096", "layernorm_4096 = 4096",
                          "ex2-check"),
    "04_torch_nn_internals": ("ex3-answer", "return (params + buffers) / 2**20",
                              "return params / 2**20", "ex3-check"),
    "05_stacked_model": ("ex1-answer", "(0 if tied else V * d)", "0", "ex1-check"),
    "06_initialization_variance": ("ex5-answer", "math.sqrt(2 * n_layer)", "math.sqrt(n_layer)",
                                   "ex5-check"),
    "07_loss_at_init": ("ex5-answer", 'first_check = "b"', 'first_check = "a"', "ex5-check"),
    "08_frozen_decoder_audit": ("ex3-answer", "(lse - z_y).sum() / valid.sum()",
                                "(lse - z_y).sum() / targets.numel()", "ex3-check"),
    "09_flop_accounting": ("ex5-answer", "train_flops_per_token = 3 *",
                           "train_flops_per_token = 2 *", "ex5-check"),
    "10_training_loop": ("ex1-answer", "m_hat = m / (1 - beta1**t)", "m_hat = m", "ex1-check"),
    "11_sumgpt": ("ex3-answer", "irreducible_loss = 5 *", "irreducible_loss = 6 *", "ex3-check"),
    "12_bookgpt": ("ex3-answer", "sharper = 0.5", "sharper = 2.0", "ex3-check"),
    "13_fast_on_your_cpu": ("ex3-answer", ">= 1.25", "> 1.25", "ex3-check"),
}  # fmt: skip


def _graded_cells(nb):
    return [c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade")]


def test_committed_labs_are_what_build_produces():
    assert check_all() == []


def test_a_hand_edited_lab_is_reported(tmp_path):
    solutions, labs = tmp_path / "solutions", tmp_path / "labs"
    solutions.mkdir()
    labs.mkdir()
    source = SOLVED[0]
    (solutions / source.name).write_bytes(source.read_bytes())
    lab = json.loads(render_lab(source))
    lab["cells"][0]["source"] = "edited by hand"
    (labs / source.name).write_text(json.dumps(lab), encoding="utf-8")
    (labs / "99_orphan.ipynb").write_text("{}", encoding="utf-8")
    problems = check_all(solutions, labs)
    assert len(problems) == 2
    assert "differs from what its solution builds" in problems[0]
    assert "has no solution" in problems[1]


@pytest.mark.parametrize("solution", SOLVED, ids=[p.name for p in SOLVED])
def test_lab_hides_solutions_and_hidden_tests_but_keeps_graded_cells(solution):
    text = (LABS / solution.name).read_text(encoding="utf-8")  # what build writes: checked above
    assert "### BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
    lab = nbformat.reads(text, as_version=4)
    graded = _graded_cells(lab)
    assert graded, "a lab needs graded test cells"
    assert all("checksum" in c.metadata.nbgrader and c.metadata.nbgrader["locked"] for c in graded)
    assert len(graded) == len(_graded_cells(nbformat.read(solution, as_version=4)))


ISSUE_EXAMPLE = "\u274c Exercise 1 is not done yet: build_vocab still raises NotImplementedError"


def test_every_lab_has_a_wrong_answer_to_grade():
    assert sorted(WRONG) == [p.stem for p in SOLVED]


def wrong_hand_in(solution):
    """The lab with every answer of the solution, one of them changed to a wrong value."""
    answer, old, new, _ = WRONG[solution.stem]
    source = nbformat.read(solution, as_version=4)
    nb = nbformat.read(LABS / solution.name, as_version=4)
    for c in nb.cells:
        grade_id = c.metadata.get("nbgrader", {}).get("grade_id")
        if c.metadata.get("nbgrader", {}).get("solution"):
            c.source = next(s for s in source.cells if s.metadata.get("nbgrader", {}).get(
                "grade_id") == grade_id).source  # fmt: skip
            if grade_id == answer:
                assert old in c.source, f"{solution.name}: {old!r} is not in {answer}"
                c.source = c.source.replace(old, new)
    return nb


@pytest.mark.parametrize("solution", SOLVED, ids=[p.name for p in SOLVED])
def test_grading_scores_the_solution_the_untouched_lab_and_a_wrong_answer(solution, tmp_path):
    """Through the instructor's grade command: every check of the solution passes, no check
    passes on an empty answer, and a wrong answer loses its exercise's points and no others."""
    require_sandbox()
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(solution, subs / "solved.ipynb")
    shutil.copy(LABS / solution.name, subs / "untouched.ipynb")
    nbformat.write(wrong_hand_in(solution), subs / "wrong.ipynb")
    out, feedback = tmp_path / "gradebook.csv", tmp_path / "feedback"
    argv = [solution.stem, str(subs), "--out", str(out), "--feedback", str(feedback)]
    assert grading.main([*argv, "--jobs", "2"]) == 0
    rows = {row["student"]: row for row in csv.DictReader(out.open(encoding="utf-8"))}
    untouched = (feedback / "untouched.md").read_text(encoding="utf-8").split("\n## ")[1:]
    not_done = [s.split(":")[0] for s in untouched if "is not done yet" not in s]
    assert not not_done, f"no one-line 'not done yet' message for {not_done}"
    if solution.stem == "01_tokens_and_embeddings":
        assert f"Exercise 1: a character tokenizer: 0 / 2\n\n{ISSUE_EXAMPLE}\n" in "\n## ".join(
            untouched
        )
    tests = {
        c.metadata.nbgrader["grade_id"]: float(c.metadata.nbgrader["points"])
        for c in _graded_cells(nbformat.read(solution, as_version=4))
    }
    for student in ("solved", "untouched", "wrong"):
        assert rows[student]["status"] == "graded", rows[student]["reason"]
    solved = {t: float(rows["solved"][t]) for t in tests}
    assert solved == tests, "the solution must earn every point"
    passing = [t for t in tests if float(rows["untouched"][t]) != 0]
    assert not passing, f"these checks pass on an empty answer: {passing}"
    lost = WRONG[solution.stem][3]
    wrong = {t: float(rows["wrong"][t]) for t in tests}
    assert wrong == {**tests, lost: 0.0}, f"only {lost} should lose its points"


def test_lab_11s_format_checks_name_the_first_failing_pair_and_both_strings():
    from course_utils.lessons.checks import CheckFailed

    source = nbformat.read(SOLUTIONS / "11_sumgpt.ipynb", as_version=4)
    check = next(c.source for c in source.cells if c.metadata.get("nbgrader", {}).get(
        "grade_id") == "ex1-check")  # fmt: skip
    checks_only = check[check.index("pairs = ") :]  # past the exact-string checks
    namespace = {"format_sum": lambda a, b, reverse=True: f"{a}+{b}={a + b}\n"}  # no padding
    exec("from course_utils.lessons.checks import check_true\n"
         "from course_utils.projects import sumgpt\n", namespace)  # fmt: skip
    with pytest.raises(CheckFailed, match=r"format_sum\(0, 3\) is '0\+3=3\\n', 6 characters"):
        exec(checks_only, namespace)
    from course_utils.projects.sumgpt import format_example

    def one_wrong(a, b, reverse=True):
        return "999+999=8991\n" if (a, b) == (194, 181) else format_example(a, b, reverse)

    namespace["format_sum"] = one_wrong
    with pytest.raises(
        CheckFailed,
        match=r"format_sum\(194, 181, reverse=True\) is "
        r"'999\+999=8991\\n' but sumgpt.format_example gives '194\+181=5730\\n'",
    ):
        exec(checks_only, namespace)


# ---------------------------------------------------------------------------------------------
# Hidden tests that record values, from names the notebook cannot rebind

HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", re.S)


def _test_cells(nb):
    return [c for c in _graded_cells(nb) if not c.metadata.nbgrader.get("solution")]


def _value_checks(tree) -> list[str]:
    """The check_value / check_tensor calls in ``tree``, by their callee's last name."""
    return [
        node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, (ast.Attribute, ast.Name))
        and (getattr(node.func, "attr", None) or getattr(node.func, "id", None))
        in ("check_value", "check_tensor")
    ]


def test_every_exercise_has_a_hidden_test_that_records_values():
    """The README's count: no graded exercise rests on its visible checks or on check_true."""
    without = []
    for solution in SOLVED:
        for cell in _test_cells(nbformat.read(solution, as_version=4)):
            hidden = HIDDEN.search(cell.source)
            if not hidden or not _value_checks(ast.parse(hidden.group(1))):
                without.append(f"{solution.stem} {cell.metadata.nbgrader['grade_id']}")
    assert without == []


def _module_bindings(statements) -> set[str]:
    """Names a block of statements binds at its own level (not inside functions, classes,
    lambdas or comprehensions, which have scopes of their own)."""
    bound, todo = set(), list(statements)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif not isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                                   ast.GeneratorExp)):  # fmt: skip
            todo.extend(ast.iter_child_nodes(node))
    return bound


def _answer_names(nb) -> set[str]:
    """What the answer cells of a solution define: the functions and values under test."""
    names = set()
    for cell in nb.cells:
        if (
            cell.get("metadata", {}).get("nbgrader", {}).get("solution")
            and cell.cell_type == "code"
        ):
            names |= _module_bindings(
                (parse_cell(cell.source) or ast.Module(body=[], type_ignores=[])).body
            )
    return names


@pytest.mark.parametrize("solution", SOLVED, ids=[p.name for p in SOLVED])
def test_hidden_tests_use_only_private_names_and_the_answers(solution):
    """A hidden test binds only private names (it never clobbers the student's) and reads only
    those, builtins and what the answer cells define: its references come from its own imports,
    never from names the notebook could rebind."""
    nb = nbformat.read(solution, as_version=4)
    allowed = _answer_names(nb) | set(dir(builtins))
    problems = []
    for cell in _test_cells(nb):
        hidden = HIDDEN.search(cell.source)
        tree = ast.parse(hidden.group(1)) if hidden else ast.Module(body=[], type_ignores=[])
        top = _module_bindings(tree.body)
        public = sorted(n for n in top if not n.startswith("_"))
        everywhere = {
            n.id
            for n in ast.walk(tree)
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
        }
        everywhere |= {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)} | top
        read = {
            n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
        }
        outside = sorted(read - everywhere - allowed)
        if public or outside:
            problems.append((cell.metadata.nbgrader["grade_id"], public, outside))
    assert problems == []


def _resolves(name: str, setup_names: set[str]) -> bool:
    if "." not in name:
        return name in setup_names
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for part in parts[cut:]:
                target = getattr(target, part)
            return True
        except AttributeError:
            return False
    return False


def _cell_body(source: str) -> list:
    """A code cell's statements as the grader reads them (magics turned into Python)."""
    tree = parse_cell(source)
    return tree.body if tree else []


@pytest.mark.parametrize("solution", SOLVED, ids=[p.name for p in SOLVED])
def test_each_forbidden_name_exists_and_the_solution_does_not_use_it(solution):
    nb = nbformat.read(solution, as_version=4)
    setup = set()
    for cell in nb.cells:
        if cell.cell_type == "code" and not cell.metadata.get("nbgrader", {}).get("grade"):
            if not cell.metadata.get("nbgrader", {}).get("solution"):
                setup |= _module_bindings(
                    (parse_cell(cell.source) or ast.Module(body=[], type_ignores=[])).body
                )
    forbidden = exercise_forbidden(nb)
    for answer, info in forbidden.items():
        assert info["test"] in {c.metadata.nbgrader["grade_id"] for c in _test_cells(nb)}
        assert [r for r in info["forbidden"] if not _resolves(r, setup)] == [], answer
    assert forbidden_uses(nb, {a: info["forbidden"] for a, info in forbidden.items()}) == {}


def test_every_answer_and_check_cell_of_a_lab_lets_run_all_go_on():
    for lab in sorted(LABS.glob("*.ipynb")):
        nb = nbformat.read(lab, as_version=4)
        exercise_cells = [
            c for c in nb.cells if {"solution", "grade"} & {
                k for k, v in c.metadata.get("nbgrader", {}).items() if v is True}
        ]  # fmt: skip
        untagged = [c.metadata.nbgrader.grade_id for c in exercise_cells
                    if RUN_ALL_TAG not in c.metadata.get("tags", [])]  # fmt: skip
        assert exercise_cells and not untagged, f"{lab.name}: Run All would stop at {untagged}"


LABS_BUILT = sorted(LABS.glob("*.ipynb"))


@pytest.mark.parametrize("lab", LABS_BUILT, ids=[p.stem for p in LABS_BUILT])
def test_run_all_on_an_untouched_lab_shows_one_line_per_exercise(lab):
    """nbclient, like JupyterLab's Run All, stops at an untagged cell that raises and goes on
    past a tagged one: every check of the untouched lab runs and says in one line that its
    exercise is not done yet, and no cell anywhere shows a traceback."""
    from nbclient import NotebookClient

    nb = nbformat.read(lab, as_version=4)
    NotebookClient(nb, kernel_name="python3", timeout=600,
                   resources={"metadata": {"path": str(LABS)}}).execute()  # fmt: skip
    errors = [(c.metadata.get("nbgrader", {}).get("grade_id", c.source[:40]), o.traceback)
              for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]  # fmt: skip
    tracebacks = [(cell, lines) for cell, lines in errors if len(lines) != 1]
    assert not tracebacks, f"{lab.name}: a traceback instead of one line: {tracebacks[0]}"
    lines = {
        c.metadata.nbgrader.grade_id: [o.get("traceback", [o.get("text", "")]) for o in c.outputs]
        for c in _graded_cells(nb)
    }
    assert lines
    for grade_id, outputs in lines.items():
        assert len(outputs) == 1 and len(outputs[0]) == 1, f"{grade_id}: {outputs}"
        assert re.match(r"\u274c Exercise \d+ is not done yet: ", outputs[0][0]), (
            f"{lab.name} {grade_id}: {outputs[0][0]}"
        )
