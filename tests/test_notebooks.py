"""The notebook contract: clean in git, fully executed where outputs are published, named alike."""

import json
import re
import shutil

import nbformat
import pytest

from course_utils.tools import normalize
from course_utils.tools.cleaning import ROOT, course_notebooks, strip

NOTEBOOKS = course_notebooks()
WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE_MIME = "application/vnd.jupyter.widget-state+json"
NAME = re.compile(r"^\d\d_[a-z0-9_]+\.ipynb$")


def _ids(paths):
    return [str(p.relative_to(ROOT)) for p in paths]


def test_the_course_has_notebooks_to_check():
    assert any(p.parent.name == "notebooks" for p in NOTEBOOKS)


FOLDERS = sorted({p.parent.name for p in NOTEBOOKS})


@pytest.mark.parametrize("folder", FOLDERS)
def test_notebooks_are_clean_for_git(folder):
    """Each folder's notebooks in one nbstripout run (its start-up is what takes the time)."""
    result = strip(*[p for p in NOTEBOOKS if p.parent.name == folder], verify=True)
    assert result.returncode == 0, (
        f"a notebook of {folder}/ carries volatile metadata or outputs its folder strips: run "
        f"`python -m course_utils setup-git` and re-commit it (or `python -m course_utils "
        f"publish` for lessons and solutions)\n{result.stdout}{result.stderr}"
    )


def _copy_with(tmp_path, folder, change):
    lesson = next(p for p in NOTEBOOKS if p.parent.name == "notebooks")
    copy = tmp_path / folder / lesson.name
    copy.parent.mkdir()
    nb = json.loads(lesson.read_text(encoding="utf-8"))
    change(nb)
    text = json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"  # as nbformat
    copy.write_text(text, encoding="utf-8")
    return copy


def _add_execute_time(nb):
    nb["cells"][0]["metadata"]["ExecuteTime"] = {"end_time": "2026-01-01T00:00:00Z"}


def _add_widget_state(nb):
    nb["metadata"]["widgets"] = {WIDGET_STATE_MIME: dict(normalize.STATE_BEFORE_A_RUN)}


def test_a_dirty_notebook_fails_the_cleanliness_check(tmp_path):
    for folder in ("notebooks", "labs"):
        assert strip(_copy_with(tmp_path, folder, _add_execute_time), verify=True).returncode


def test_lessons_keep_their_widget_state_and_labs_lose_it(tmp_path):
    lesson = _copy_with(tmp_path, "notebooks", _add_widget_state)
    lab = _copy_with(tmp_path, "labs", _add_widget_state)
    assert strip(lesson, verify=True).returncode == 0
    assert strip(lab, verify=True).returncode != 0
    strip(lesson), strip(lab)
    assert "widgets" in nbformat.read(lesson, as_version=4).metadata
    assert "widgets" not in nbformat.read(lab, as_version=4).metadata


def _widget_views(nb):
    return [
        o.data[WIDGET_VIEW_MIME]["model_id"]
        for c in nb.cells
        for o in c.get("outputs", [])
        if WIDGET_VIEW_MIME in o.get("data", {})
    ]


LESSONS = [p for p in NOTEBOOKS if p.parent.name == "notebooks"]


@pytest.mark.parametrize("path", LESSONS, ids=_ids(LESSONS))
def test_a_lesson_stores_the_widget_state_jupyterlab_writes_before_a_run(path):
    """The course's JupyterLab saves widget state, and on opening a lesson it replaces any stored
    state by its own empty one (no model is live before a run): a lesson stored with models
    would be changed by opening it. Its widget outputs show their static HTML until run."""
    nb = nbformat.read(path, as_version=4)
    assert _widget_views(nb), f"{path.name}: no widget (a quiz) at all"
    assert nb.metadata["widgets"] == {WIDGET_STATE_MIME: normalize.STATE_BEFORE_A_RUN}, (
        f"{path.name}: run `python -m course_utils normalize {path.relative_to(ROOT)}`"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_published_notebooks_are_fully_executed_and_labs_are_empty(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    if path.parent.name == "labs":
        assert not any(c.outputs or c.execution_count for c in code)
    else:
        counts = [c.execution_count for c in code]
        assert None not in counts, f"{path.name}: run it top to bottom before committing"
        assert counts == list(range(1, len(counts) + 1)), f"{path.name}: not run in order"
        errors = [o for c in code for o in c.outputs if o.output_type == "error"]
        assert not errors, f"{path.name}: a published cell raised {errors[0].ename}"


FIGURE_TEXT = re.compile(r"^<Figure size \d+x\d+ with \d+ Axes>$")
IMAGE_MIMES = ("image/png", "image/svg+xml", "image/jpeg")


def bare_figures(nb) -> list[int]:
    """Indexes of the cells with an output that is matplotlib's ``<Figure ...>`` text and no
    image: a figure the kernel could not draw (no inline backend), which the site shows as text."""
    bare = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            text = data.get("text/plain", "")
            text = "".join(text) if isinstance(text, list) else text
            if FIGURE_TEXT.match(text.strip()) and not any(m in data for m in IMAGE_MIMES):
                bare.append(i)
    return bare


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_every_stored_figure_has_its_image(path):
    bare = bare_figures(nbformat.read(path, as_version=4))
    assert not bare, (
        f"{path.name}: cell(s) {bare} stored a figure as bare text with no image: start the "
        f"notebook with `%matplotlib inline` and republish it"
    )


def test_a_figure_without_its_image_is_found():
    cell = nbformat.v4.new_code_cell("fig")
    figure = {"text/plain": "<Figure size 700x320 with 1 Axes>"}
    cell.outputs = [nbformat.v4.new_output("execute_result", data=figure, execution_count=1)]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("x"), cell])
    assert bare_figures(nb) == [1]
    cell.outputs[0].data["image/png"] = "iVBORw0KGgo="
    assert bare_figures(nb) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_is_valid_nbformat_with_a_python_kernel(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)  # nbgrader's converters validate too: an invalid lab cannot be graded
    assert nb.metadata.kernelspec["name"] == "python3"


def test_notebook_names_follow_the_lesson_map():
    for path in NOTEBOOKS:
        assert NAME.match(path.name), f"{path}: name it NN_slug.ipynb"
    solutions = {p.name for p in NOTEBOOKS if p.parent.name == "solutions"}
    lessons = {p.name for p in NOTEBOOKS if p.parent.name == "notebooks"}
    labs = {p.name for p in NOTEBOOKS if p.parent.name == "labs"}
    assert solutions == labs
    assert solutions <= lessons, "every lab belongs to a lesson of the same name"


def test_strip_refuses_a_notebook_outside_the_course_folders(tmp_path):
    stray = tmp_path / "elsewhere" / "x.ipynb"
    stray.parent.mkdir()
    shutil.copy(NOTEBOOKS[0], stray)
    with pytest.raises(ValueError, match="no cleaning policy"):
        strip(stray)


def _as_before_jupyterlab(nb):
    """The form JupyterLab rewrites on open: no kernel version, no collapsed flag."""
    nb["metadata"]["language_info"].pop("version", None)
    for cell in nb["cells"]:
        cell["metadata"].pop("collapsed", None)


def test_stored_notebooks_are_what_jupyterlab_writes_on_open(tmp_path):
    """JupyterLab 4 adds the kernel's Python version and `collapsed` beside hidden outputs on
    open (tests/test_jupyterlab.py sees it in a browser); a lesson without them fails the check
    and `normalize` (part of publishing) adds them, once."""
    copy = _copy_with(tmp_path, "notebooks", _as_before_jupyterlab)
    assert strip(copy, verify=True).returncode, "a notebook JupyterLab would rewrite passed"
    assert normalize.normalize_file(copy) and not normalize.normalize_file(copy)
    nb = nbformat.read(copy, as_version=4)
    assert nb.metadata.language_info.version == normalize.kernel_python_version()
    hidden = [c for c in nb.cells if c.metadata.get("jupyter", {}).get("outputs_hidden")]
    assert all(c.metadata.get("collapsed") is True for c in hidden)
    assert strip(copy, verify=True).returncode == 0


def test_every_lesson_links_its_lab_and_linking_twice_changes_nothing():
    text = "practise it in the lab: `labs/03_block_assembly.ipynb` (norms)"
    linked = normalize.link_labs(text)
    assert linked == (
        "practise it in the lab: [`labs/03_block_assembly.ipynb`](../labs/03_block_assembly.ipynb)"
        " (norms)"
    )
    assert normalize.link_labs(linked) == linked
    for lesson in LESSONS:
        lab = ROOT / "labs" / lesson.name
        if lab.exists():
            assert f"](../labs/{lesson.name})" in lesson.read_text(encoding="utf-8"), lesson.name
