"""Answers that use what their exercise asks the student to write: the forbidden calls.

Where an exercise asks for what PyTorch or ``course_utils`` already has (a layer norm, a
schedule, a parameter ledger), its answer cell in the solution names those callables in its
metadata: ``{"course_utils": {"forbidden": ["torch.nn.functional.layer_norm", ...]}}``
(``"reference"`` in solutions written before; "reference" now names only the expected values).

An answer uses one when the code its test runs reaches it: the body of a function or class the
answer cell defines, a class's bases, or a name the cell binds to it (``RMSNorm = nn.RMSNorm``).
Names are resolved through the notebook's imports and aliases (``F`` -> ``torch.nn.functional``)
and compared with the forbidden ones by identity, in the grader's own process
(``torch.nn.modules.normalization.LayerNorm`` is ``torch.nn.LayerNorm``), or by name for a name
the lab itself defines. What the cell runs once at its top level (a self-test, an assert,
building a library module to count its parameters) is not reached by the test and costs
nothing; nor does a student's own function of the same name. Nothing of the hand-in is run:
code that builds a name at run time (``exec``, ``getattr(m, "lay" + "er_norm")``) is not seen.
"""

from __future__ import annotations

import ast
import functools
import importlib

from .cells import parse_cell

META_KEY = "course_utils"
FIELDS = ("forbidden", "reference")  # the second: solutions written before the rename
ROOTS = ("torch", "course_utils")  # the only modules a name is resolved in
COUNTING = {"parameters", "named_parameters", "buffers", "state_dict"}  # a module only counted
MISSING = object()


def exercise_forbidden(nb) -> dict[str, dict]:
    """answer grade_id -> ``{"forbidden": [names], "test": grade_id}`` for each answer cell of a
    solution that names forbidden callables, with the test cell that scores it (the next one)."""
    found, pending = {}, []
    for cell in nb.cells:
        meta = cell.get("metadata", {})
        grading = meta.get("nbgrader", {})
        names = next((meta.get(META_KEY, {}).get(k) for k in FIELDS if meta.get(META_KEY, {})
                      .get(k)), [])  # fmt: skip
        if grading.get("solution") and names:
            pending.append((grading["grade_id"], [str(n) for n in names]))
        elif grading.get("grade") and not grading.get("solution") and cell.cell_type == "code":
            for answer, forbidden in pending:
                found[answer] = {"forbidden": forbidden, "test": grading["grade_id"]}
            pending = []
    return found


def forbidden_uses(nb, forbidden: dict[str, list[str]]) -> dict[str, list[str]]:
    """answer grade_id -> the forbidden names (as the metadata names them) that its answer
    cells (every copy) reach when the exercise's test runs."""
    sources = [c.source for c in nb.cells if c.cell_type == "code"]
    names = notebook_names(sources)
    uses: dict[str, list[str]] = {}
    for cell in nb.cells:
        answer = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if cell.cell_type == "code" and answer in forbidden:
            found = reached(cell.source, forbidden[answer], names)
            uses[answer] = list(dict.fromkeys([*uses.get(answer, []), *found]))
    return {answer: found for answer, found in uses.items() if found}


def notebook_names(sources: list[str]) -> dict[str, str]:
    """Every name the notebook's cells bind to a dotted path by an import or a top-level alias
    (``F = torch.nn.functional``); ``"*"`` entries list the modules star-imported."""
    names: dict[str, str] = {}
    stars = []
    for source in sources:
        for node in getattr(parse_cell(source), "body", []):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    names[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0]
                    )
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    if alias.name == "*":
                        stars.append(node.module)
                    else:
                        names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                path = dotted(node.value, names)
                if isinstance(target, ast.Name) and path:
                    names[target.id] = path
    names["*"] = "\n".join(stars)
    return names


def dotted(node: ast.expr, names: dict[str, str]) -> str:
    """The dotted path an expression names (``F.layer_norm`` -> ``torch.nn.functional.
    layer_norm``, ``getattr(F, "layer_norm")`` likewise), "" if it names none."""
    if isinstance(node, ast.Name):
        return names.get(node.id, "")
    if isinstance(node, ast.Attribute):
        base = dotted(node.value, names)
        return f"{base}.{node.attr}" if base else ""
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr":
        args = node.args
        if len(args) >= 2 and isinstance(args[1], ast.Constant) and isinstance(args[1].value, str):
            base = dotted(args[0], names)
            return f"{base}.{args[1].value}" if base else ""
    return ""


def reached(source: str, forbidden: list[str], names: dict[str, str]) -> list[str]:
    """The forbidden names that the code of ``source`` (an answer cell) reaches when its test
    runs: what its functions and classes hold, and what it binds a name to."""
    tree = parse_cell(source)
    if tree is None:
        return []
    own = _own_names(tree, names)
    local = {k: v for k, v in names.items() if k not in own}
    counted = _counted_only(tree)
    found = []
    for node in _run_by_the_test(tree):
        for sub in ast.walk(node):
            if id(sub) in counted or not isinstance(sub, (ast.Name, ast.Attribute, ast.Call)):
                continue
            path = dotted(sub, local)
            if isinstance(sub, ast.Name) and not path and sub.id not in own:
                path = _starred(sub.id, local) or sub.id  # a name of the lab's own setup
            found += [name for name in forbidden if path and same(path, name)]
    return list(dict.fromkeys(found))


def _run_by_the_test(tree: ast.Module) -> list[ast.AST]:
    """The parts of an answer cell that run when its test does: function and class bodies
    (and a class's bases), and the value of each name it binds at its top level to a callable
    (an alias, a lambda, a ``partial``); not what the cell runs once when it is run."""
    parts: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            parts += node.body
        elif isinstance(node, ast.ClassDef):
            parts += [*node.bases, *node.body]
        elif isinstance(node, ast.Lambda):
            parts.append(node.body)
    for node in tree.body:
        value = getattr(node, "value", None)
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(
            value, (ast.Name, ast.Attribute, ast.Call)
        ):
            is_partial = isinstance(value, ast.Call) and getattr(
                value.func, "attr", getattr(value.func, "id", "")
            ) in ("partial", "getattr")
            if not isinstance(value, ast.Call) or is_partial:
                parts.append(value)
    return parts


def _counted_only(tree: ast.Module) -> set[int]:
    """The nodes of ``X(...).parameters()`` (and the like) calls' ``X``: a library module built
    only to count what it holds."""
    skip = set()
    for node in ast.walk(tree):
        func = getattr(node, "func", None)
        if isinstance(func, ast.Attribute) and func.attr in COUNTING:
            if isinstance(func.value, ast.Call):
                skip |= {id(n) for n in ast.walk(func.value.func)}
    return skip


def _own_names(tree: ast.Module, names: dict[str, str]) -> set[str]:
    """Names the cell binds itself: its functions, classes, arguments and variables, but not a
    top-level alias of something imported (``ln = F.layer_norm`` stays resolved)."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
    aliases = {
        node.targets[0].id
        for node in tree.body
        if isinstance(node, ast.Assign) and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name) and dotted(node.value, names)
    }  # fmt: skip
    return bound - aliases


def _starred(name: str, names: dict[str, str]) -> str:
    """``name`` resolved in a star-imported module of the notebook that has it, else ""."""
    for module in filter(None, names.get("*", "").split("\n")):
        if resolve(f"{module}.{name}") is not MISSING:
            return f"{module}.{name}"
    return ""


@functools.lru_cache(maxsize=4096)
def resolve(path: str):
    """The object a dotted path names, looked up in torch or course_utils only (modules are
    imported, never anything of the hand-in); MISSING if it names none."""
    parts = path.split(".")
    if parts[0] not in ROOTS:
        return MISSING
    try:
        obj = importlib.import_module(parts[0])
    except ImportError:
        return MISSING
    for i, part in enumerate(parts[1:], start=1):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            try:
                obj = importlib.import_module(".".join(parts[: i + 1]))
            except Exception:
                return MISSING
        except Exception:
            return MISSING
    return obj


def same(path: str, name: str) -> bool:
    """Whether the dotted ``path`` a hand-in reaches is the forbidden ``name``: the same object
    (by identity), or, for a name of the lab's own (no dots), the same name."""
    if "." not in name:
        return path == name
    if path == name:
        return True
    mine, theirs = resolve(path), resolve(name)
    return mine is not MISSING and mine is theirs


def forbidden_note(title: str, used: list[str]) -> str:
    """The note a row and the feedback carry for an exercise whose answer reaches forbidden
    callables: the exercise and each callable by its full name."""
    names = ", ".join(used)
    return f"{title}: your answer uses {names} when its test runs; write it yourself instead"
