"""The lesson widgets' static fallbacks: what a page without a kernel or widget state shows."""

from html.parser import HTMLParser

import ipywidgets as widgets

from course_utils.lessons.widgets import Question, Quiz, _Controls

QUESTIONS = [
    Question(
        "The input is <bos> A B C. What is the target?",
        ["<bos> A B C", "A B C <eos>"],
        1,
        "Row t predicts the next token, ending with <eos>.",
    ),
    Question("What is 2 + 2?", ["3", "4"], 1, "Two and two make four."),
]


class _TextOutsideDetails(HTMLParser):
    """Collects the text a reader sees before opening any ``<details>`` disclosure."""

    def __init__(self) -> None:
        super().__init__()
        self.depth, self.in_summary, self.visible, self.summaries = 0, False, [], []

    def handle_starttag(self, tag, attrs):
        self.depth += tag == "details"
        self.in_summary = tag == "summary"

    def handle_endtag(self, tag):
        self.depth -= tag == "details"
        self.in_summary = False

    def handle_data(self, data):
        if self.in_summary:
            self.summaries.append(data)
        elif self.depth == 0:
            self.visible.append(data)


def test_quiz_bundle_keeps_the_widget_and_its_plain_text_and_adds_html():
    bundle = Quiz(QUESTIONS)._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"] == "Quiz with 2 questions (pick an answer)"
    assert bundle["text/html"].count("<details>") == 2


def test_quiz_html_shows_questions_and_options_and_hides_each_answer():
    parser = _TextOutsideDetails()
    parser.feed(Quiz(QUESTIONS).static_html())
    visible = " ".join(parser.visible)
    assert "The input is <bos> A B C. What is the target?" in visible  # escaped, so shown
    assert "A B C <eos>" in visible and "4" in visible  # the options are there to pick from
    assert "Two and two make four." not in visible
    assert "ending with <eos>" not in visible
    assert parser.summaries == ["show answer", "show answer"]


def test_quiz_widget_shows_angle_brackets_as_text():
    quiz = Quiz(QUESTIONS)
    prompt, choice, feedback = quiz.box.children[:3]
    assert "&lt;bos&gt;" in prompt.value
    choice.value = "A B C <eos>"
    assert feedback.value.startswith("\u2705") and "&lt;eos&gt;" in feedback.value


def test_live_controls_say_they_are_interactive_with_their_first_values():
    controls = {
        "V": widgets.IntSlider(value=100, min=50, max=50_000, description="V"),
        "temperature": widgets.FloatSlider(value=1.0, min=0.2, max=2.0),
    }
    bundle = _Controls(controls)._repr_mimebundle_()
    assert bundle["text/html"] == (
        '<p class="course-live">interactive in JupyterLab: V = 100, temperature = 1.0</p>'
    )
    # The plain text is the box's own repr, as before: what nbval compares stays the same.
    assert bundle["text/plain"].startswith("VBox(children=(IntSlider(value=100")
    assert "application/vnd.jupyter.widget-view+json" in bundle
