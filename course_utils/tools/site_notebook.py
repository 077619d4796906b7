"""One committed notebook as a website page: every widget output static, nothing re-run.

A page has no kernel and loads no ipywidgets JavaScript, so each widget output becomes HTML:
its own ``text/html`` fallback where it has one (quizzes, live controls), else a drawing of its
saved widget state (a tqdm bar at its final value). Outputs hidden in JupyterLab stay hidden
behind a toggle, every figure gets alt text saying what it shows, and labs are refused if they
still hold a solution or hidden tests.
"""

from __future__ import annotations

import ast
import html
import re

import nbformat

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
LEAKS = ("### BEGIN SOLUTION", "### BEGIN HIDDEN TESTS")
FIGURES = ("image/png", "image/jpeg", "image/svg+xml")
TITLES = ("suptitle", "set_title", "title")  # matplotlib's, figure first
LABELS = ("set_xlabel", "set_ylabel", "xlabel", "ylabel")


class PageError(ValueError):
    """A notebook that cannot become a page as it is (the message says what to fix)."""


def _model_id(reference: str) -> str:
    return reference.removeprefix("IPY_MODEL_")


def widget_html(model_id: str, state: dict) -> str | None:
    """Static HTML for a saved widget and its children, or None if any part is not saved.

    Boxes lay their children out in a row or a column, ``HTML`` widgets show their markup,
    progress bars a ``<progress>`` at their value, and any other control its description and
    value (``temperature: 1.0``).
    """
    model = state.get(model_id)
    if model is None:
        return None
    name, values = model["model_name"], model.get("state", {})
    if name in ("HBoxModel", "VBoxModel", "BoxModel"):
        children = [widget_html(_model_id(ref), state) for ref in values.get("children", [])]
        if None in children:
            return None
        layout = "column" if name == "VBoxModel" else "row"
        return f'<div class="course-widget course-widget-{layout}">{"".join(children)}</div>'
    if name in ("HTMLModel", "HTMLMathModel"):
        return f"<span>{values.get('value', '')}</span>"
    if name in ("FloatProgressModel", "IntProgressModel"):
        value, top = f"{values.get('value', 0):g}", f"{values.get('max', 100):g}"
        return f'<progress value="{value}" max="{top}">{value} / {top}</progress>'
    label = html.escape(values.get("description") or "", quote=False)
    if "value" in values:
        value = html.escape(str(values["value"]), quote=False)
        return f"<span>{label + ': ' if label else ''}{value}</span>"
    return f"<span>{label}</span>" if label else None


def static_outputs(nb: nbformat.NotebookNode) -> list[str]:
    """Make every widget output of ``nb`` static HTML, in place; drop those that cannot be
    drawn (no fallback and no saved state). Returns one note per dropped output."""
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    notes = []
    for number, cell in enumerate(nb.cells):
        kept = []
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if WIDGET_VIEW in data:
                if "text/html" not in data:
                    drawn = widget_html(data[WIDGET_VIEW]["model_id"], state)
                    if drawn is None:
                        plain = data.get("text/plain", "a widget")
                        notes.append(
                            f"cell {number}: {plain.splitlines()[0][:60]!r} has no saved state"
                        )
                        continue
                    data["text/html"] = drawn
                del data[WIDGET_VIEW]
            kept.append(output)
        if "outputs" in cell:
            cell.outputs = kept
    nb.metadata.pop("widgets", None)  # nothing on the page reads it any more
    return notes


def hide_hidden_outputs(nb: nbformat.NotebookNode) -> None:
    """Outputs collapsed in JupyterLab (``jupyter.outputs_hidden``, e.g. a quiz's answers) go
    behind myst-nb's "show output" toggle instead of in plain sight."""
    for cell in nb.cells:
        if cell.get("metadata", {}).get("jupyter", {}).get("outputs_hidden"):
            tags = cell.metadata.setdefault("tags", [])
            if "hide-output" not in tags:
                tags.append("hide-output")


def _literal(node: ast.AST) -> str | None:
    """A string argument as written: an f-string's fields become "…"."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_literal(part) or "…" for part in node.values)
    return None


def figure_alt(source: str, plain: str = "") -> str:
    """What a cell's figure shows, from the titles and axis labels its code sets (``"Figure:
    Loss at init vs embedding scale (axes: token embedding std, cross-entropy at init)"``),
    else from its text form (``<Figure size 1600x460 with 4 Axes>``)."""
    lines = source.splitlines()
    code = "\n".join(line for line in lines if not line.lstrip().startswith(("%", "!")))
    try:
        calls = [n for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Call) and n.args]
    except SyntaxError:
        calls = []
    found: dict[str, list[str]] = {"titles": [], "labels": []}
    for call in sorted(calls, key=lambda n: (n.lineno, n.col_offset)):
        name = getattr(call.func, "attr", getattr(call.func, "id", ""))
        text = _literal(call.args[0])
        kind = "titles" if name in TITLES else "labels" if name in LABELS else None
        if kind and text and " ".join(text.split()) not in found[kind]:
            found[kind].append(" ".join(text.split()))
    if not found["titles"] and not found["labels"]:
        axes = re.search(r"with (\d+) Axes", plain)
        count = f" with {axes[1]} {'axis' if axes[1] == '1' else 'axes'}" if axes else ""
        return f"Figure{count} drawn by the code above"
    alt = "Figure: " + "; ".join(found["titles"][:4]) if found["titles"] else "Figure"
    if found["labels"]:
        alt += f" (axes: {', '.join(found['labels'][:4])})"
    return alt


def describe_figures(nb: nbformat.NotebookNode) -> None:
    """Give each figure alt text (myst-nb's ``mystnb.image.alt``) saying what it shows: the
    cell's ``course_utils.alt`` metadata where an author wrote one, else :func:`figure_alt`."""
    for cell in nb.cells:
        outputs = [o for o in cell.get("outputs", []) if set(o.get("data", {})) & set(FIGURES)]
        if not outputs:
            continue
        alt = cell.metadata.get("course_utils", {}).get("alt") or figure_alt(
            cell.source, outputs[0]["data"].get("text/plain", "")
        )
        cell.metadata.setdefault("mystnb", {}).setdefault("image", {}).setdefault("alt", alt)


def refuse_leaks(nb: nbformat.NotebookNode, name: str) -> None:
    """Labs are published as handed out: no solution and no hidden test may reach a page."""
    for cell in nb.cells:
        for marker in LEAKS:
            if marker in cell.source:
                raise PageError(
                    f"{name} still holds '{marker}': regenerate the labs with "
                    "`python -m course_utils labs build` before building the site"
                )


def page(nb: nbformat.NotebookNode, header: str, name: str, lab: bool = False) -> list[str]:
    """Turn ``nb`` into its page in place: static widgets, hidden outputs kept hidden, figures
    described, and ``header`` (MyST Markdown: the download link and neighbours) after the first
    cell."""
    if lab:
        refuse_leaks(nb, name)
    notes = static_outputs(nb)
    hide_hidden_outputs(nb)
    describe_figures(nb)
    nb.cells.insert(1, nbformat.v4.new_markdown_cell(header))
    return notes
