"""A student's day in JupyterLab: the course opened by open_course on a copy, in headless Chromium.

The labs are reachable, an untouched lab's Run All reaches every exercise, a lesson opened and
left alone is not changed on disk (``git status`` stays clean), and a lesson run, saved and
reopened draws its widgets from the state the course's settings make JupyterLab save. Skips
without a browser, like the website's test (tests/browser.py).
"""

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from browser import chrome

from course_utils.tools import open_course
from course_utils.tools.cleaning import ROOT

LESSON = "notebooks/01_tokens_and_embeddings.ipynb"
LAB = "labs/10_training_loop.ipynb"

# Opens PATH (arguments[0]) in JupyterLab, waits for its kernel, runs RUN_ALL (arguments[1]) and
# returns the notebook as JupyterLab holds it, with whether its tab is dirty.
OPEN = """
const [path, runAll, done] = arguments;
(async () => {
  const app = window.jupyterapp;
  await app.restored;
  const panel = await app.commands.execute('docmanager:open', {path});
  await panel.context.ready;
  await panel.sessionContext.ready;
  const ran = () => Array.from(panel.content.model.cells).every(
    c => c.type !== 'code' || !c.sharedModel.getSource().trim() || c.executionCount !== null);
  const until = test => new Promise(ok => {
    const poll = () => test() ? ok() : setTimeout(poll, 200);
    poll();
  });
  const idle = () => until(() => panel.sessionContext.session?.kernel?.status === 'idle');
  await idle();
  await new Promise(ok => setTimeout(ok, 2000));  // JupyterLab's own edits land by now
  if (runAll) {
    await app.commands.execute('notebook:run-all-cells');
    await until(ran);  // every code cell has run (Run All goes on past a tagged failure)
    await idle();
    await app.commands.execute('docmanager:save');
  }
  const nodes = panel.node;
  done({dirty: panel.context.model.dirty, nb: panel.context.model.toJSON(),
        widgets: nodes.querySelectorAll('.widget-radio-box').length});
})().catch(e => done({error: String(e)}));
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _extensions_prefix() -> Path:
    """Where the installed packages' lab extensions (the widget manager) are: the prefix of
    their site-packages (a venv that reuses another's packages has none of its own)."""
    import jupyterlab_widgets

    return Path(jupyterlab_widgets.__file__).resolve().parents[4] / "share" / "jupyter"


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A student's copy of the course (a git repository, as a clone is), served by JupyterLab
    as ``open_course`` starts it; yields (copy, base URL)."""
    home = tmp_path_factory.mktemp("student")
    dest = home / "course"
    open_course.copy_course(dest, ROOT)
    shutil.copy2(ROOT / ".gitignore", dest / ".gitignore")  # as in a clone
    git = ["git", "-c", "user.name=s", "-c", "user.email=s@example.org", "-C", str(dest)]
    for step in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "the course"]):
        subprocess.run([*git, *step], check=True, capture_output=True)
    port = _free_port()
    command = open_course.lab_command(dest, browser=False)
    command[-1:-1] = [f"--port={port}", "--IdentityProvider.token=", "--ServerApp.password=",
                      "--LabApp.expose_app_in_browser=True"]  # fmt: skip
    env = dict(os.environ, JUPYTER_PATH=str(_extensions_prefix()), HOME=str(home),
               JUPYTER_CONFIG_DIR=str(home / "config"),
               JUPYTER_DATA_DIR=str(home / "data"), JUPYTER_RUNTIME_DIR=str(home / "run"),
               JUPYTERLAB_SETTINGS_DIR=str(home / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"))  # fmt: skip
    log = (home / "lab.log").open("w")
    lab = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(240):
        assert lab.poll() is None, (home / "lab.log").read_text()[-2000:]
        try:
            urllib.request.urlopen(f"{url}/api/status", timeout=2)
            break
        except OSError:
            time.sleep(0.25)
    yield dest, url, git
    lab.terminate()
    lab.wait(timeout=30)


@pytest.fixture(scope="module")
def browser(course, tmp_path_factory):
    driver = chrome(tmp_path_factory.mktemp("chromium-profile"))
    driver.set_script_timeout(240)
    _load_lab(driver, course[1])
    yield driver
    driver.quit()


def _load_lab(driver, url: str) -> None:
    """Load JupyterLab's page and wait until its app has started."""
    driver.get(f"{url}/lab")
    for _ in range(240):
        if driver.execute_script("return !!(window.jupyterapp && window.jupyterapp.shell)"):
            break
        time.sleep(0.25)
    time.sleep(2)  # the app's plugins finish starting


def _open(driver, path, run_all=False) -> dict:
    state = driver.execute_async_script(OPEN, path, run_all)
    assert "error" not in state, state.get("error")
    return state


# The widget views drawn in PATH's open notebook (arguments[0]), and its widget errors.
DRAWN = """
const panel = window.jupyterapp.shell.widgets('main').find(w => w.context?.path === arguments[0]);
const node = panel ? panel.node : document.createElement('div');
return {widgets: node.querySelectorAll('.widget-radio-box').length,
        errors: (node.innerText.match(/Error displaying widget/g) || []).length};
"""


# Closes every tab and shuts down every kernel, as quitting JupyterLab does.
STOP = """
const done = arguments[0];
const app = window.jupyterapp;
app.commands.execute('application:close-all')
  .then(() => app.serviceManager.sessions.shutdownAll()).then(() => done(), done);
"""


def _drawn(driver, path, views: int, seconds: float = 60) -> dict:
    """The widgets drawn in ``path`` once ``views`` of them are (or a widget error shows, or
    ``seconds`` pass): the manager draws a saved state a while after the kernel is idle."""
    deadline = time.monotonic() + seconds
    while True:
        drawn = driver.execute_script(DRAWN, path)
        if drawn["widgets"] >= views or drawn["errors"] or time.monotonic() > deadline:
            return drawn
        time.sleep(0.5)


def _changes(stored: dict, shown: dict) -> str:
    """What JupyterLab changed in a notebook it opened, for the failure message."""
    for cell in shown["cells"]:  # JupyterLab gives a cell without attachments None
        if cell.get("attachments", {}) is None:
            del cell["attachments"]
    stored, shown = (json.loads(nbformat.writes(nbformat.from_dict(n))) for n in (stored, shown))
    found = [f"metadata.{k}" for k in stored["metadata"].keys() | shown["metadata"].keys()
             if stored["metadata"].get(k) != shown["metadata"].get(k)]  # fmt: skip
    for i, (a, b) in enumerate(zip(stored["cells"], shown["cells"])):
        found += [f"cell {i}: {k} {a.get(k)!r:.80} -> {b.get(k)!r:.80}"
                  for k in a.keys() | b.keys() if a.get(k) != b.get(k)]  # fmt: skip
    return f"JupyterLab changed the notebook on open ({found[:6]}): run `normalize`"


def test_every_url_jupyterlab_prints_opens_lesson_01(course):
    dest, url, _git = course
    for _ in range(480):  # the server prints its URLs once it is up
        log = (dest.parent / "lab.log").read_text(encoding="utf-8")
        printed = [ln.split()[-1] for ln in log.splitlines() if "/lab" in ln and "http" in ln]
        if printed:
            break
        time.sleep(0.25)
    lesson = f"/lab/tree/{LESSON}"
    assert printed and all(u.split("?")[0].endswith(lesson) for u in printed), log[-1500:]
    port = url.rsplit(":", 1)[1]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{lesson}") as reply:  # it serves it
        assert reply.status == 200


def test_the_labs_are_reachable_from_the_course(course):
    _dest, url, _git = course
    with urllib.request.urlopen(f"{url}/api/contents/labs") as reply:
        names = {item["name"] for item in json.load(reply)["content"]}
    assert {p.name for p in (ROOT / "labs").glob("*.ipynb")} <= names


def test_opening_a_lesson_leaves_it_and_git_status_unchanged(course, browser):
    dest, _url, git = course
    before = (dest / LESSON).read_bytes()
    state = _open(browser, LESSON)
    assert not state["dirty"], _changes(json.loads(before), state["nb"])
    assert state["widgets"] == 0, "a stored widget looks live before its cell runs"
    time.sleep(1)
    assert (dest / LESSON).read_bytes() == before
    status = subprocess.run([*git, "status", "--porcelain"], capture_output=True, text=True)
    assert status.stdout == ""


@pytest.mark.parametrize(
    "lab", ["labs/01_tokens_and_embeddings.ipynb", "labs/04_torch_nn_internals.ipynb"]
)
def test_opening_a_lab_leaves_it_unmarked_and_unchanged(course, browser, lab):
    """A lab is stored without the kernel's Python version (so a run on any Python leaves it
    clean in git); JupyterLab writes the kernel's on open, which the course's extension keeps from
    marking the tab unsaved (a plain JupyterLab marks it). Running its first cell, the hosted
    install, prints nothing where the course is installed, and marks it as any run does."""
    dest, _url, git = course
    before = (dest / lab).read_bytes()
    state = _open(browser, lab)
    tab = browser.execute_script(TAB_DIRTY, lab)
    assert not state["dirty"] and tab is False, _changes(json.loads(before), state["nb"])
    assert (dest / lab).read_bytes() == before
    status = subprocess.run([*git, "status", "--porcelain"], capture_output=True, text=True)
    assert status.stdout == ""
    ran = browser.execute_async_script(RUN_FIRST, lab)  # the hosted-install cell
    assert "error" not in ran, ran["error"]
    assert ran["source"].startswith("# Opened alone") and ran["outputs"] == [], ran  # a no-op here
    assert ran["dirty"] and "jp-mod-dirty" in ran["tab"], "a run must still mark it unsaved"


def test_a_lab_and_its_lesson_have_tabs_that_read_differently(course, browser):
    """A lab and its lesson share a file name; the course's extension puts "lab" before it on the
    lab's tab (JupyterLab shows a tab's first characters only), and renames nothing."""
    dest, _url, _git = course
    lab = LESSON.replace("notebooks/", "labs/")
    for path in (LESSON, lab):
        _open(browser, path)
    shown = {path: browser.execute_script(TAB_TEXT, path) for path in (LESSON, lab)}
    assert shown[LESSON] == "01_tokens_and_embeddings.ipynb", shown
    assert shown[lab] == "lab 01_tokens_and_embeddings.ipynb", shown
    assert (dest / lab).is_file() and not list(dest.glob("labs/lab *")), "a file was renamed"


def test_run_all_on_an_untouched_lab_reaches_every_exercise(browser):
    nb = _open(browser, LAB, run_all=True)["nb"]
    checks = [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade")]
    lines = ["".join(o.get("traceback", [])) for c in checks for o in c["outputs"]]
    assert len(checks) == 5 and len(lines) == 5, lines
    assert all("is not done yet" in line for line in lines), lines


def test_a_lesson_run_saved_and_reopened_draws_its_widgets(course, browser):
    dest, url, _git = course
    _open(browser, LESSON, run_all=True)
    saved = json.loads((dest / LESSON).read_text(encoding="utf-8"))
    state = saved["metadata"]["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    views = [o["data"]["application/vnd.jupyter.widget-view+json"]["model_id"]
             for c in saved["cells"] for o in c.get("outputs", [])
             if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]  # fmt: skip
    assert views and all(v in state for v in views), "saved without the widgets' state"
    browser.execute_async_script(STOP)
    _load_lab(browser, url)  # a fresh page and kernel: the widgets can only come from the file
    _open(browser, LESSON)
    drawn = _drawn(browser, LESSON, views=5)
    assert drawn["widgets"] >= 5 and drawn["errors"] == 0, drawn


# Whether PATH's open notebook (arguments[0]) is marked unsaved.
DIRTY = """
const panel = window.jupyterapp.shell.widgets('main').find(w => w.context?.path === arguments[0]);
return panel ? panel.context.model.dirty : null;
"""
# Whether PATH's tab (arguments[0]) carries JupyterLab's unsaved mark, as the student sees it.
TAB_DIRTY = """
const panel = window.jupyterapp.shell.widgets('main').find(w => w.context?.path === arguments[0]);
return panel ? panel.title.className.includes('jp-mod-dirty') : null;
"""
# The text PATH's tab (arguments[0]) shows: its label with what CSS puts before it.
TAB_TEXT = """
const panel = window.jupyterapp.shell.widgets('main').find(w => w.context?.path === arguments[0]);
const tab = Array.from(document.querySelectorAll('.lm-DockPanel-tabBar .lm-TabBar-tab')).find(
  t => t.getAttribute('data-id') === panel.id);
const label = tab.querySelector('.lm-TabBar-tabLabel');
const before = getComputedStyle(label, '::before').content;
return (before === 'none' || before === 'normal' ? '' : JSON.parse(before)) + label.textContent;
"""
# Runs the first code cell of PATH's open notebook (arguments[0]); returns its outputs and whether
# the notebook and its tab are marked unsaved then; closes it unsaved.
RUN_FIRST = """
const [path, done] = arguments;
(async () => {
  const app = window.jupyterapp;
  const panel = app.shell.widgets('main').find(w => w.context?.path === path);
  app.shell.activateById(panel.id);
  panel.content.activeCellIndex = 0;
  while (panel.content.activeCell.model.type !== 'code') { panel.content.activeCellIndex += 1; }
  const cell = panel.content.activeCell.model;
  await app.commands.execute('notebook:run-cell');
  while (cell.executionCount === null) { await new Promise(ok => setTimeout(ok, 200)); }
  await new Promise(ok => setTimeout(ok, 1500));
  const ran = {dirty: panel.context.model.dirty, tab: panel.title.className,
               outputs: cell.outputs.toJSON(), source: cell.sharedModel.getSource().slice(0, 80)};
  panel.dispose();  // closed unsaved, as the student leaves it: no dialog for a later test
  done(ran);
})().catch(e => done({error: String(e)}));
"""
# A real edit of PATH's open notebook (arguments[0]): a space added to its first cell; then
# whether it is marked unsaved.
EDIT = """
const panel = window.jupyterapp.shell.widgets('main').find(w => w.context?.path === arguments[0]);
const cell = panel.content.model.cells.get(0).sharedModel;
cell.setSource(cell.getSource() + ' ');
return panel.context.model.dirty;
"""


def test_a_saved_lesson_reopened_without_edits_is_not_marked_unsaved(course, browser):
    """After the test above: the lesson it ran, saved and reopened, left alone. The widget manager
    marks it unsaved as it restores the saved widgets; the course's extension clears that mark
    (course_utils/tools/jupyterlab_extensions)."""
    if _drawn(browser, LESSON, views=5)["widgets"] < 5:  # the saved widgets are restored by now
        pytest.skip("the saved widgets were not restored (the test above says why)")
    assert browser.execute_script(DIRTY, LESSON) is False
    assert browser.execute_script(EDIT, LESSON) is True, "a real edit must still mark it unsaved"
