"""The lesson widgets' static fallbacks: what a page without a kernel or widget state shows."""

import json
from html.parser import HTMLParser

import ipywidgets as widgets

from course_utils.lessons.widgets import (
    QUIZ_DIR,
    NumberBox,
    Question,
    Quiz,
    _Controls,
    read_whole_number,
)

QUESTIONS = [
    Question(
        "The input is <bos> A B C. What is the target?",
        ["<bos> A B C", "A B C <eos>"],
        1,
        "Row t predicts the next token, ending with <eos>.",
    ),
    Question("What is 2 + 2?", ["3", "4"], 1, "Two and two make four.", {"3": "That is 2 + 1."}),
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


def test_a_wrong_choice_can_be_retried_before_the_explanation_shows():
    quiz = Quiz(QUESTIONS)
    choice, feedback = quiz.box.children[4:6]  # question 2: "What is 2 + 2?"
    choice.value = "3"
    assert feedback.value == "\u274c Not quite. That is 2 + 1. Try another answer."
    assert "four" not in feedback.value
    choice.value = "4"
    assert feedback.value == "\u2705 Right. Two and two make four."


def test_the_answers_stay_behind_a_disclosure_even_when_their_cell_is_expanded():
    parser = _TextOutsideDetails()
    parser.feed(Quiz(QUESTIONS).answers_html().data)
    assert "four" not in " ".join(parser.visible) and len(parser.summaries) == 1


def test_a_saved_quiz_says_it_is_a_picture_until_its_cell_runs():
    assert "a saved picture of the quiz: run this cell" in Quiz(QUESTIONS).static_html()


def test_live_controls_say_they_are_interactive_with_their_first_values():
    controls = {
        "V": widgets.IntSlider(value=100, min=50, max=50_000, description="V"),
        "temperature": widgets.FloatSlider(value=1.0, min=0.2, max=2.0),
    }
    bundle = _Controls(controls)._repr_mimebundle_()
    assert bundle["text/html"] == (
        '<p class="course-live">a saved picture (V = 100, temperature = 1.0): run this cell in '
        "JupyterLab to move the controls</p>"
    )
    # The plain text is the box's own repr, as before: what nbval compares stays the same.
    assert bundle["text/plain"].startswith("VBox(children=(IntSlider(value=100")
    assert "application/vnd.jupyter.widget-view+json" in bundle


def _all_quiz_items():
    for path in sorted(QUIZ_DIR.glob("*.json")):
        for item in json.loads(path.read_text(encoding="utf-8"))["questions"]:
            yield path.stem, item


def test_the_right_answer_is_not_the_tell_of_being_the_longest():
    """A student who always picks the longest option would score well above chance if the
    right one were usually strictly longest (36 of 60 questions once)."""
    items = list(_all_quiz_items())
    longest = [(lesson, item["prompt"][:40]) for lesson, item in items
               if len(item["right"]) > max(map(len, item["wrong"]))]  # fmt: skip
    assert len(longest) <= len(items) / 4, f"{len(longest)} of {len(items)}: {longest[:5]}"
    by_lesson = {}
    for lesson, _ in longest:
        by_lesson[lesson] = by_lesson.get(lesson, 0) + 1
    assert max(by_lesson.values(), default=0) <= 2, by_lesson  # no quiz gives it away


def test_quiz_12_counts_the_4_09m_model_right():
    """6 blocks at d=256 with d_ff 768, an untied head and V=140 hold 4,088,320 parameters."""
    from course_utils import GPT, GPTConfig

    config = GPTConfig(vocab_size=140, block_size=256, n_layer=6, n_head=8, n_embd=256,
                       d_ff=768, tie_weights=False)  # fmt: skip
    assert sum(p.numel() for p in GPT(config).parameters()) == 4_088_320
    (item,) = [i for lesson, i in _all_quiz_items() if "4.09M" in i["prompt"]]
    assert "4,088,320" in item["right"] and "4,738,560" not in item["right"]


def test_every_wrong_quiz_option_says_why_it_is_wrong():
    """Each wrong option of every lesson's quiz carries its reason (``why_wrong``), which a wrong
    pick shows."""
    missing, stray = [], []
    for lesson, item in _all_quiz_items():
        why = item.get("why_wrong", {})
        missing += [(lesson, w) for w in item["wrong"] if not why.get(w, "").strip()]
        stray += [(lesson, w) for w in why if w not in item["wrong"]]
    assert not missing, f"{len(missing)} wrong options without a why_wrong reason: {missing[:5]}"
    assert not stray, stray


def test_a_lessons_quiz_shows_the_reason_for_a_wrong_pick():
    quiz = Quiz.for_lesson("01_tokens_and_embeddings")
    question = quiz.questions[0]
    choice, feedback = quiz.box.children[1:3]
    wrong = next(o for i, o in enumerate(question.options) if i != question.answer)
    choice.value = wrong
    assert question.why_wrong[wrong] in feedback.value and feedback.value.startswith("\u274c")


TRAINED = "number this model was trained to add"


def _read(text: str, previous: int = 137) -> tuple[int, str]:
    return read_whole_number(text, previous, 0, 999, TRAINED)


def test_a_number_in_range_is_taken_as_typed_and_says_nothing():
    assert _read("864") == (864, "")
    assert _read(" 0 ") == (0, "")
    assert _read("999") == (999, "")
    assert _read("007") == (7, "")


def test_a_number_out_of_range_is_clamped_and_says_so():
    assert _read("1234") == (
        999,
        "1234 is more than 999, the largest number this model was trained to add: showing 999",
    )
    assert _read("1000")[0] == 999
    assert _read("-5") == (
        0,
        "-5 is less than 0, the smallest number this model was trained to add: showing 0",
    )
    assert _read("-1")[0] == 0


def test_text_that_is_no_whole_number_keeps_the_number_shown_and_says_so():
    assert _read("12.5") == (
        137,
        "\u201c12.5\u201d is not a whole number from 0 to 999: still showing 137",
    )
    assert _read("abc", previous=42)[0] == 42
    assert _read("1_000")[0] == 137  # Python's int() would take it; a student means no number
    assert _read("") == (137, "type a whole number from 0 to 999: still showing 137")
    long = _read("9" * 40)[1]
    assert long.startswith("9" * 19 + "\u2026 is more than 999") and len(long) <= 100


def test_the_number_box_updates_as_typed_and_shows_what_it_did():
    box = NumberBox(137, 0, 999, TRAINED, description="a")
    seen = []
    box.observe(lambda change: seen.append(change["new"]), names="value")
    assert box.text.continuous_update and box.description == "a"
    box.text.value = "1234"
    assert (box.value, box.note.value) == (999, _read("1234")[1])
    box.text.value = "12x"
    assert (box.value, box.note.value) == (999, _read("12x", previous=999)[1])
    box.text.value = "12"
    assert (box.value, box.note.value) == (12, "")
    box.text.value = "<b>12"
    assert (
        box.note.value
        == "\u201c&lt;b&gt;12\u201d is not a whole number from 0 to 999: still showing 12"
    )
    assert seen == [999, 12]
