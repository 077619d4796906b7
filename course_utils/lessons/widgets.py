"""Interactive pieces for the lessons that still run headless under nbval.

``live`` shows controls and a rendered result and re-renders in place when a control moves; the
first render is an ordinary display, so a headless run records the same output as a live one.
``Quiz`` reveals feedback per answer without writing any cell output. Both carry a static
``text/html`` fallback beside the widget view, for pages drawn without a kernel or widget state
(the course website): the controls' first values, and the questions with each answer behind a
"show answer" disclosure.
"""

from __future__ import annotations

import html
import io
from dataclasses import dataclass

import ipywidgets as widgets
from IPython.display import HTML, Image, display
from matplotlib.figure import Figure


def _text(s: str) -> str:
    """Plain text for an HTML fragment: ``<bos>`` in a question is shown, not taken as a tag."""
    return html.escape(s, quote=False)


def _displayable(result):
    """Figures become PNG images (a plain ``Figure`` has no inline renderer of its own)."""
    if isinstance(result, Figure):
        buffer = io.BytesIO()
        result.savefig(buffer, format="png", bbox_inches="tight")
        return Image(data=buffer.getvalue(), format="png")
    return result


class _Controls:
    """A box of controls that also says, as static HTML, that it is interactive and where."""

    def __init__(self, controls: dict[str, widgets.ValueWidget]) -> None:
        self.controls = controls
        self.box = widgets.VBox(list(controls.values()))

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.box._repr_mimebundle_(**kwargs)
        values = ", ".join(
            f"{_text(w.description or name)} = {_text(str(w.value))}"
            for name, w in self.controls.items()
        )
        bundle["text/html"] = f'<p class="course-live">interactive in JupyterLab: {values}</p>'
        return bundle


def live(render, **controls: widgets.ValueWidget) -> dict:
    """Display ``controls``, then ``render(**values)``; re-render into the same place on change.

    ``render`` returns anything IPython can display: a matplotlib ``Figure`` built with
    ``matplotlib.figure.Figure`` (not pyplot, so it is not shown twice), a string, HTML, ...
    Returns the controls so a cell can set their values programmatically.
    """

    def values() -> dict:
        return {name: w.value for name, w in controls.items()}

    display(_Controls(controls))
    handle = display(_displayable(render(**values())), display_id=True)

    def on_change(_change) -> None:
        handle.update(_displayable(render(**values())))

    for control in controls.values():
        control.observe(on_change, names="value")
    return controls


@dataclass
class Question:
    prompt: str
    options: list[str]
    answer: int  # index into options
    explanation: str


class Quiz:
    """Multiple-choice questions; choosing an option shows whether it is right and why."""

    def __init__(self, questions: list[Question]) -> None:
        self.questions = questions
        rows = []
        for number, q in enumerate(questions, start=1):
            feedback = widgets.HTML(value="")
            choice = widgets.RadioButtons(options=q.options, value=None, layout={"width": "auto"})
            choice.observe(self._judge(q, feedback), names="value")
            rows.append(widgets.HTML(value=f"<b>{number}. {_text(q.prompt)}</b>"))
            rows += [choice, feedback]
        self.box = widgets.VBox(rows)

    @staticmethod
    def _judge(q: Question, feedback: widgets.HTML):
        def on_choice(change) -> None:
            if change["new"] is None:
                return
            right = q.options.index(change["new"]) == q.answer
            mark = "\u2705 Right." if right else "\u274c Not quite."
            feedback.value = f"{mark} {_text(q.explanation)}"

        return on_choice

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.box._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = f"Quiz with {len(self.questions)} questions (pick an answer)"
        bundle["text/html"] = self.static_html()
        return bundle

    def static_html(self) -> str:
        """The questions and their options, each answer and explanation behind a disclosure."""
        parts = ['<div class="course-quiz">']
        for number, q in enumerate(self.questions, start=1):
            options = "".join(f"<li>{_text(option)}</li>" for option in q.options)
            parts.append(
                f"<p><b>{number}. {_text(q.prompt)}</b></p><ul>{options}</ul>"
                "<details><summary>show answer</summary>"
                f"<p><b>{_text(q.options[q.answer])}</b> &mdash; {_text(q.explanation)}</p>"
                "</details>"
            )
        parts.append("</div>")
        return "".join(parts)

    def answers_html(self) -> HTML:
        items = "".join(
            f"<li><b>{_text(q.options[q.answer])}</b> &mdash; {_text(q.explanation)}</li>"
            for q in self.questions
        )
        return HTML(f"<ol>{items}</ol>")
