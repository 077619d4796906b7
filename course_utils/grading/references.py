"""Answers that call the reference instead of writing it.

Where an exercise asks for what ``course_utils`` or PyTorch already has (a schedule, an
attention, a parameter ledger), its answer cell in the solution names that reference in its
metadata: ``{"course_utils": {"reference": ["course_utils.engine.training.lr_at", ...]}}``. A
grading run reads each hand-in's answer cell (its source only: nothing is run) and reports one
that imports or calls a reference: by its name (unless the cell defines that name itself), as an
attribute (``training.lr_at``), in an import, or as a string (``getattr(module, "lr_at")``).
Code that builds the name at run time (``getattr(m, "lr_" + "at")``, ``exec``) is not seen.
"""

from __future__ import annotations

import ast

META_KEY = "course_utils"


def exercise_references(nb) -> dict[str, dict]:
    """answer grade_id -> ``{"reference": [names], "test": grade_id}`` for each answer cell of a
    solution that names references, with the test cell that scores it (the next one)."""
    found, pending = {}, []
    for cell in nb.cells:
        meta = cell.get("metadata", {})
        grading = meta.get("nbgrader", {})
        names = meta.get(META_KEY, {}).get("reference", [])
        if grading.get("solution") and names:
            pending.append((grading["grade_id"], [str(n) for n in names]))
        elif grading.get("grade") and not grading.get("solution") and cell.cell_type == "code":
            for answer, refs in pending:
                found[answer] = {"reference": refs, "test": grading["grade_id"]}
            pending = []
    return found


def calls_in(source: str, references: list[str]) -> list[str]:
    """The references (as the metadata names them) that ``source`` imports or calls."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # not Python (a magic, a half-typed line): nothing to read
        return []
    own = _bound_names(tree)
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            used.add(node.attr)
        elif isinstance(node, ast.Name) and node.id not in own:
            used.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            used |= _imported(node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            used |= {node.value, node.value.rsplit(".", 1)[-1]}
    return [ref for ref in references if ref in used or ref.rsplit(".", 1)[-1] in used]


def _bound_names(tree: ast.AST) -> set[str]:
    """Names the cell binds itself: its functions, classes, variables and arguments."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return bound


def _imported(node: ast.Import | ast.ImportFrom) -> set[str]:
    """Every dotted name an import statement reaches, and each of their last parts."""
    names = set()
    module = getattr(node, "module", None) or ""
    for alias in node.names:
        full = f"{module}.{alias.name}" if module else alias.name
        names |= {full, alias.name, full.rsplit(".", 1)[-1]}
    return names


def reference_note(answer: str, called: list[str]) -> str:
    """The note a row and the feedback carry for an answer that calls its references."""
    short = ", ".join(dict.fromkeys(name.rsplit(".", 1)[-1] for name in called))
    return f"{answer} calls {short}, which the exercise asks you to write yourself"
