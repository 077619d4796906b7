"""The package's shape: layers that import downwards only, one command tree, short functions."""

import argparse
import ast
import contextlib
import io
from pathlib import Path

import pytest

from course_utils.tools import cli

PACKAGE = Path(__file__).resolve().parent.parent / "course_utils"
# What each layer may import from the package (besides itself).
ALLOWED = {
    "core": set(),
    "engine": {"core"},
    "lessons": {"core", "engine"},
    "projects": {"core", "engine"},
    "grading": {"core", "engine", "lessons"},
    "tools": {"core", "engine", "lessons", "projects", "grading"},
}


def modules(root: Path = PACKAGE):
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        yield path, parts


def imported_names(path: Path, parts: tuple[str, ...]):
    """Every name a module imports, as absolute dotted parts (relative imports resolved), at
    its top or inside a function."""
    package = ["course_utils", *parts[:-1]]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = [*base, *(node.module.split(".") if node.module else [])]
            yield from (target + [alias.name] for alias in node.names)
        elif isinstance(node, ast.Import):
            yield from (alias.name.split(".") for alias in node.names)


def imported_layers(path: Path, parts: tuple[str, ...]) -> set[str]:
    """The layers (core, engine, ...) a module imports from, relative or absolute."""
    return {
        name[1]
        for name in imported_names(path, parts)
        if name[:1] == ["course_utils"] and len(name) > 1 and name[1] in ALLOWED
    }


@pytest.mark.parametrize("path, parts", list(modules()), ids=lambda v: getattr(v, "name", ""))
def test_imports_go_down_the_layers_only(path, parts):
    if len(parts) == 1:  # __init__ and __main__ re-export from every layer
        return
    layer = parts[0]
    wrong = imported_layers(path, parts) - ALLOWED[layer] - {layer}
    assert not wrong, f"{path.relative_to(PACKAGE)} ({layer}) imports from {sorted(wrong)}"


def test_the_layering_check_catches_an_upward_import(tmp_path):
    bad = tmp_path / "model.py"
    bad.write_text("from ..tools import grading\nfrom course_utils.engine.io import atomic_write\n")
    assert imported_layers(bad, ("core", "model")) == {"tools", "engine"}


def imported_modules(path: Path, parts: tuple[str, ...], known: set[str]) -> set[str]:
    """The package's modules (dotted names in ``known``) that a module imports."""
    found = set()
    for name in imported_names(path, parts):
        for end in range(len(name), 0, -1):  # the longest prefix that is a module
            if ".".join(name[:end]) in known:
                found.add(".".join(name[:end]))
                break
    return found


def import_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the import graph as a list of modules, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module, path):
        state[module] = 1
        for dep in sorted(graph.get(module, ())):
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            if dep not in state and (cycle := visit(dep, [*path, dep])):
                return cycle
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (cycle := visit(module, [module])):
            return cycle
    return None


def import_graph(found) -> dict[str, set[str]]:
    """module -> the package's modules it imports, for ``(path, parts)`` pairs. A package's
    ``__init__`` is the package itself, so importing the package (``from . import corpus``)
    leads to what its ``__init__`` imports; only ``course_utils/__init__``, which re-exports
    from every layer, is left out."""
    named = {}
    for path, parts in found:
        if parts != ("__init__",):
            name = parts[:-1] if parts[-1] == "__init__" else parts
            named[".".join(["course_utils", *name])] = (path, parts)
    return {m: imported_modules(p, parts, set(named)) - {m} for m, (p, parts) in named.items()}


def test_no_two_modules_import_each_other_even_lazily():
    """The modules, sub-packages' ``__init__`` included, form no import cycle."""
    graph = import_graph(modules())
    assert import_cycle(graph) is None, " -> ".join(import_cycle(graph))


def test_the_cycle_check_follows_a_package_to_what_its_init_imports(tmp_path):
    (tmp_path / "projects" / "corpus").mkdir(parents=True)
    (tmp_path / "projects" / "corpus" / "__init__.py").write_text("from .writer import prepare\n")
    (tmp_path / "projects" / "corpus" / "writer.py").write_text("from ..bookgpt import CONFIGS\n")
    (tmp_path / "projects" / "bookgpt.py").write_text("from . import corpus\n")
    assert import_cycle(import_graph(modules(tmp_path))) == [
        "course_utils.projects.bookgpt", "course_utils.projects.corpus",
        "course_utils.projects.corpus.writer", "course_utils.projects.bookgpt",
    ]  # fmt: skip


def test_the_cycle_check_finds_a_lazy_cycle(tmp_path):
    (tmp_path / "labs.py").write_text("from .publish import ROOT\n")
    (tmp_path / "publish.py").write_text("def publish():\n    from . import labs\n")
    known = {"course_utils.tools.labs", "course_utils.tools.publish"}
    graph = {
        f"course_utils.tools.{n}": imported_modules(tmp_path / f"{n}.py", ("tools", n), known)
        for n in ("labs", "publish")
    }
    assert import_cycle(graph) == [
        "course_utils.tools.labs", "course_utils.tools.publish", "course_utils.tools.labs"
    ]  # fmt: skip


def test_no_function_is_longer_than_a_screen():
    long = []
    benchmarks = sorted((PACKAGE.parent / "benchmarks").glob("*.py"))
    for path in [p for p, _ in modules()] + benchmarks:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > 60:
                    long.append(f"{path.name}:{node.lineno} {node.name} {lines}")
    assert not long


def command_lines():
    """Every command and subcommand of the tree, as argv prefixes."""
    found = []

    def walk(parser, prefix):
        found.append(prefix)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    walk(child, [*prefix, name])

    for name in cli.COMMANDS:
        walk(cli.build_parser(name)._subparsers._group_actions[0].choices[name], [name])
    return found


@pytest.mark.parametrize("argv", command_lines(), ids=" ".join)
def test_every_command_answers_help_with_an_example(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        cli.main([*argv, "--help"])
    assert done.value.code == 0
    text = out.getvalue()
    assert "example" in text and f"python -m course_utils {argv[0]}" in text, text


def test_the_tree_lists_every_command():
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        cli.main(["--help"])
    assert all(name in out.getvalue() for name in cli.COMMANDS)
    assert len(command_lines()) >= len(cli.COMMANDS) + 6  # sumgpt, bookgpt and labs have more


ATOMIC_WRITER = PACKAGE / "core" / "atomic.py"


def renames_into_place(path: Path) -> list[int]:
    """The lines where a module calls ``os.replace`` or ``os.rename`` (a write of its own)."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute)
        and node.attr in ("replace", "rename")
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    ]


def test_one_atomic_writer_at_the_lowest_layer_that_needs_it():
    assert renames_into_place(ATOMIC_WRITER), "core/atomic.py is the writer"
    others = {
        str(path.relative_to(PACKAGE)): lines
        for path, _ in modules()
        if path != ATOMIC_WRITER and (lines := renames_into_place(path))
    }
    assert not others, f"write through course_utils.core.atomic, not a rename of your own: {others}"
    assert imported_layers(ATOMIC_WRITER, ("core", "atomic")) == set()


def test_the_rename_check_sees_a_writer_of_its_own(tmp_path):
    own = tmp_path / "cpu.py"
    own.write_text("import os\n\ndef save(tmp, path):\n    os.replace(tmp, path)\n")
    assert renames_into_place(own) == [4]
