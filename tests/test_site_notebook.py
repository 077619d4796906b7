"""A stored notebook as a website page: widgets drawn from their saved state or HTML fallback."""

import copy

import nbformat
import pytest

from course_utils.tools.publish import execute
from course_utils.tools.site_notebook import (
    WIDGET_VIEW,
    PageError,
    describe_figures,
    figure_alt,
    hide_hidden_outputs,
    page,
    static_outputs,
)

CELLS = [
    "from tqdm.auto import tqdm\nfor _ in tqdm(range(20), desc='steps'):\n    pass",
    "import ipywidgets as widgets\nfrom course_utils.lessons.widgets import Question, Quiz, live\n"
    "_ = live(lambda n: f'n is {n}', n=widgets.IntSlider(value=3, description='n'))",
    "Quiz([Question('Which is even?', ['3', '4'], 1, 'Four is two twos.')])",
]


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """A small notebook run the way `publish` runs lessons: a progress bar, controls, a quiz."""
    path = tmp_path_factory.mktemp("notebooks") / "00_widgets.ipynb"
    nbformat.write(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS]), path
    )
    execute(path, timeout=120)
    return nbformat.read(path, as_version=4)


def _widget_output(nb, cell):
    return next(o for o in nb.cells[cell].outputs if WIDGET_VIEW in o.get("data", {}))


def test_publish_saves_the_state_of_every_widget_it_shows(published):
    state = published.metadata.widgets["application/vnd.jupyter.widget-state+json"]["state"]
    for cell in range(3):
        assert _widget_output(published, cell).data[WIDGET_VIEW]["model_id"] in state


def test_a_finished_progress_bar_is_drawn_at_its_final_state(published):
    nb = copy.deepcopy(published)
    assert "0/20" in _widget_output(nb, 0).data["text/plain"]  # what was displayed at the start
    bar = _widget_output(nb, 0)
    assert static_outputs(nb) == []
    drawn = bar.data["text/html"]
    assert "20/20" in drawn and '<progress value="20" max="20">' in drawn and "steps" in drawn
    assert WIDGET_VIEW not in bar.data and "widgets" not in nb.metadata


def test_quiz_and_controls_use_their_own_html(published):
    nb = copy.deepcopy(published)
    static_outputs(nb)
    controls = nb.cells[1].outputs[0].data
    assert controls["text/html"].endswith(
        "a saved picture (n = 3): run this cell in JupyterLab to move the controls</p>"
    )
    assert "n is 3" in nb.cells[1].outputs[1].data["text/plain"]  # the first frame, as displayed
    assert "<summary>show answer</summary>" in nb.cells[2].outputs[0].data["text/html"]


def test_a_widget_without_saved_state_is_left_off_with_a_note(published):
    nb = copy.deepcopy(published)
    del nb.metadata["widgets"]
    notes = static_outputs(nb)
    assert len(notes) == 1 and notes[0].startswith("cell 0: 'steps:")
    assert not any(WIDGET_VIEW in o.get("data", {}) for o in nb.cells[0].outputs)
    assert "text/html" in nb.cells[2].outputs[0].data  # the quiz needs no state


def test_outputs_hidden_in_jupyterlab_go_behind_a_toggle():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("quiz.answers_html()")])
    nb.cells[0].metadata["jupyter"] = {"outputs_hidden": True}
    hide_hidden_outputs(nb)
    assert nb.cells[0].metadata.tags == ["hide-output"]


@pytest.mark.parametrize("marker", ["### BEGIN SOLUTION", "### BEGIN HIDDEN TESTS"])
def test_a_lab_with_a_solution_or_hidden_tests_is_refused(marker):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"{marker}\nx = 1")])
    with pytest.raises(PageError, match="labs build"):
        page(nb, "header", "labs/00_x.ipynb", lab=True)


def test_a_figure_is_described_by_its_titles_and_axes_or_its_author():
    source = (
        "%matplotlib inline\n"
        "fig, (a, b) = plt.subplots(1, 2)\n"
        "fig.suptitle(f'width {w}: the C^2 terms take over')\n"
        "a.set_title('loss')\na.set_xlabel('step')\na.set_ylabel('nats')\nb.set_xlabel('step')\n"
    )
    assert figure_alt(source) == (
        "Figure: width …: the C^2 terms take over; loss (axes: step, nats)"
    )
    assert figure_alt("plt.imshow(x)", "<Figure size 640x480 with 4 Axes>") == (
        "Figure with 4 axes drawn by the code above"
    )
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(source), nbformat.v4.new_code_cell("plt.plot(x)")]
    )
    for cell in nb.cells:
        cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": "iVBOR"})]
    nb.cells[1].metadata["course_utils"] = {"alt": "A rising line"}
    describe_figures(nb)
    assert nb.cells[0].metadata["mystnb"]["image"]["alt"].startswith("Figure: width …")
    assert nb.cells[1].metadata["mystnb"]["image"]["alt"] == "A rising line"
