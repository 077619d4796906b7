"""Interactive pieces for the lessons that still run headless under nbval.

``live`` shows controls and a rendered result and re-renders in place when a control moves; the
first render is an ordinary display, so a headless run records the same output as a live one.
``show`` displays a static figure the same way. ``NumberBox`` takes a whole number as the
student types it and says, beside it, what it did with input it could not take as typed.
``Quiz`` reveals feedback per answer without writing any cell output. Both ``live`` and ``Quiz``
carry a static ``text/html`` fallback beside the widget view, for pages drawn without a kernel or
widget state (the course website): the controls' first values, and the questions with each answer
behind a "show answer" disclosure.
"""

from __future__ import annotations

import html
import io
import json
import random
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import ipywidgets as widgets
import traitlets
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
        bundle["text/html"] = (
            f'<p class="course-live">a saved picture ({values}): run this cell in JupyterLab '
            "to move the controls</p>"
        )
        return bundle


def show(figure: Figure) -> None:
    """Display a ``matplotlib.figure.Figure`` as a PNG image, as :func:`live` renders one.

    A figure built without pyplot has no inline renderer of its own: a bare ``fig`` at the end
    of a cell shows only ``<Figure size ...>``. Lessons call ``show(fig)`` for static plots.
    """
    display(_displayable(figure))


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


WHOLE_NUMBER = re.compile(r"[+-]?[0-9]+")


def read_whole_number(text: str, previous: int, low: int, high: int, what: str) -> tuple[int, str]:
    """The number a box shows for the typed ``text``, and one line saying what was done with it
    (empty when it is taken as typed): a number outside ``[low, high]`` is clamped, anything else
    keeps ``previous``. ``what`` names the limits, e.g. "number this model was trained to add"."""
    typed = text.strip()
    shown = typed if len(typed) <= 20 else typed[:19] + "…"
    if not typed:
        return previous, f"type a whole number from {low} to {high}: still showing {previous}"
    if not WHOLE_NUMBER.fullmatch(typed):
        return previous, (
            f"“{shown}” is not a whole number from {low} to {high}: still showing {previous}"
        )
    number = int(typed)
    if number > high:
        return high, f"{shown} is more than {high}, the largest {what}: showing {high}"
    if number < low:
        return low, f"{shown} is less than {low}, the smallest {what}: showing {low}"
    return number, ""


class NumberBox(widgets.HBox):
    """A text box for a whole number in ``[low, high]`` that updates as the student types, with a
    line beside it saying what it did with input it could not take as typed (see
    :func:`read_whole_number`); ``value`` is the number shown, what :func:`live` reads."""

    value = traitlets.Int()

    def __init__(self, value: int, low: int, high: int, what: str, description: str = "") -> None:
        self.text = widgets.Text(
            value=str(value), description=description, continuous_update=True,
            layout={"width": "12em"},
        )  # fmt: skip
        self.note = widgets.HTML(value="", layout={"flex": "1 1 0"})  # wraps, where a Label cuts
        super().__init__([self.text, self.note])
        self.value, self.low, self.high, self.what = value, low, high, what
        self.text.observe(self._read, names="value")

    @property
    def description(self) -> str:
        return self.text.description

    def _read(self, change) -> None:
        self.value, note = read_whole_number(
            change["new"], self.value, self.low, self.high, self.what
        )
        self.note.value = _text(note)  # the student's text, shown as typed


@dataclass
class Question:
    prompt: str
    options: list[str]
    answer: int  # index into options
    explanation: str
    why_wrong: dict[str, str] = field(default_factory=dict)  # wrong option -> why it is wrong


QUIZ_DIR = Path(__file__).parent / "quizzes"


def load_questions(lesson: str) -> list[Question]:
    """The quiz of ``lesson`` (e.g. ``"02_attention"``) from ``quizzes/<lesson>.json``.

    The file lists each question's right answer first (``"right"``, then ``"wrong"``, and in
    ``"why_wrong"`` what each wrong option gets wrong, which a wrong pick shows); the
    options are shuffled with a seed taken from the lesson's name, with the right answers spread
    evenly over the positions, so the notebook's source gives nothing away and no position is
    the usual answer.
    """
    path = QUIZ_DIR / f"{lesson}.json"
    if not path.is_file():
        known = sorted(p.stem for p in QUIZ_DIR.glob("*.json"))
        raise FileNotFoundError(f"no quiz for lesson {lesson!r} in {QUIZ_DIR}; known: {known}")
    items = json.loads(path.read_text(encoding="utf-8"))["questions"]
    rng = random.Random(zlib.crc32(lesson.encode()))
    number = int(lesson[:2]) if lesson[:2].isdigit() else rng.randrange(4)
    slots = [(number + i) % 4 for i in range(len(items))]  # each position as often, course-wide
    rng.shuffle(slots)
    questions = []
    for item, slot in zip(items, slots):
        wrong = list(item["wrong"])
        rng.shuffle(wrong)
        at = slot % (len(wrong) + 1)
        options = [*wrong[:at], item["right"], *wrong[at:]]
        why = item.get("why_wrong", {})
        questions.append(Question(item["prompt"], options, at, item["explanation"], why))
    return questions


SAVED_QUIZ = (
    '<p class="course-live">a saved picture of the quiz: run this cell in JupyterLab to pick '
    "answers here (each answer is behind its own disclosure below)</p>"
)


class Quiz:
    """Multiple-choice questions; a wrong choice says what it gets wrong and can be retried, the
    right one shows why (that explanation would give the answer away after a wrong one)."""

    @classmethod
    def for_lesson(cls, lesson: str) -> Quiz:
        """The lesson's quiz, loaded from its data file (:func:`load_questions`)."""
        return cls(load_questions(lesson))

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
            if q.options.index(change["new"]) == q.answer:
                feedback.value = f"\u2705 Right. {_text(q.explanation)}"
            else:
                why = q.why_wrong.get(change["new"])
                because = f" {_text(why)}" if why else ""
                feedback.value = f"\u274c Not quite.{because} Try another answer."

        return on_choice

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.box._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = f"Quiz with {len(self.questions)} questions (pick an answer)"
        bundle["text/html"] = self.static_html()
        return bundle

    def static_html(self) -> str:
        """The questions and their options, each answer and explanation behind a disclosure."""
        parts = [f'<div class="course-quiz">{SAVED_QUIZ}']
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
        """Every answer, behind one disclosure: hidden even where JupyterLab expands the cell's
        output when it runs again."""
        items = "".join(
            f"<li><b>{_text(q.options[q.answer])}</b> &mdash; {_text(q.explanation)}</li>"
            for q in self.questions
        )
        summary = "all the answers (open once you have tried the quiz)"
        return HTML(f"<details><summary>{summary}</summary><ol>{items}</ol></details>")
