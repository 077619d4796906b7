"""The course website: built from the committed notebooks, complete, and working offline.

Building needs the ``site`` extra (``make test`` installs it). The browser test drives Debian's
headless Chromium with Selenium (``apt-get install chromium chromium-driver``) against a local
HTTP server, with every other host unreachable. ``.ci/run`` installs both and sets
COURSE_SITE_TESTS=required, so that CI fails instead of skipping when either is missing.
"""

import base64
import functools
import html
import http.server
import importlib.util
import re
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urldefrag

import nbformat
import pytest
from browser import chrome, skip_or_fail

from course_utils.tools import site
from course_utils.tools.cleaning import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
PNG = base64.b64encode(  # a 1x1 PNG: a student's own figure
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360f8cf00000301010018dd8db0"
        "0000000049454e44ae426082"
    )  # fmt: skip
).decode()


def _need_builder() -> None:
    if importlib.util.find_spec("myst_nb") is None:
        skip_or_fail("the site extra is not installed: pip install -e '.[site]'")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The whole site, built into a temporary folder the way `make site` builds site/."""
    _need_builder()
    out = tmp_path_factory.mktemp("site") / "site"
    site.build(out)
    return out


class _Page(HTMLParser):
    """The links, element ids and visible text of one HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.links, self.ids, self.anchors = [], set(), []
        self._anchor = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])
            self._anchor = [attrs["href"], ""]

    def handle_data(self, data):
        if self._anchor is not None:
            self._anchor[1] += data

    def handle_endtag(self, tag):
        if tag == "a" and self._anchor is not None:
            self.anchors.append((self._anchor[0], " ".join(self._anchor[1].split())))
            self._anchor = None


def _committed(path: str, root: Path = ROOT) -> bytes:
    """The file as git's HEAD holds it."""
    return subprocess.run(["git", "-C", str(root), "show", f"HEAD:{path}"], capture_output=True,
                          check=True).stdout  # fmt: skip


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


# --- the README and the guides -------------------------------------------------------------

GUIDES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
INLINE_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
REFERENCE = re.compile(r"^\[[^\]]+\]:\s*(\S+)", re.M)


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub and MyST make it: lower case, punctuation dropped, spaces
    as hyphens (``Precision `auto` `` is ``precision-auto``)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"\s", "-", re.sub(r"[^\w\- ]", "", text))


def _anchors(path: Path) -> set[str]:
    prose = FENCE.sub("", path.read_text(encoding="utf-8"))
    return {_slug(m) for m in re.findall(r"^#{1,6} (.+)$", prose, re.M)}


def _relative_links(path: Path) -> list[str]:
    prose = re.sub(r"`[^`\n]*`", "", FENCE.sub("", path.read_text(encoding="utf-8")))
    links = INLINE_LINK.findall(prose) + REFERENCE.findall(prose)
    return [link for link in links if not re.match(r"[a-z]+:", link)]


def test_every_relative_link_of_the_readme_and_the_guides_resolves():
    """As GitHub shows them: each relative link names a file of the checkout, and each #anchor
    a heading of that page."""
    problems, checked = [], 0
    for path in GUIDES:
        for link in _relative_links(path):
            target, _, fragment = link.partition("#")
            file = (path.parent / target).resolve() if target else path
            checked += 1
            if not file.exists():
                problems.append(f"{path.relative_to(ROOT)}: {link}: no such file")
            elif fragment and file.suffix == ".md" and fragment not in _anchors(file):
                problems.append(f"{path.relative_to(ROOT)}: {link}: no heading #{fragment}")
    assert not problems, "\n".join(problems)
    readme = _relative_links(ROOT / "README.md")
    assert checked > 50 and len(readme) >= 30, (checked, len(readme))  # the parser finds them


def test_the_readme_is_a_front_door_pointing_to_every_guide():
    lines = README.splitlines()
    assert len(lines) <= 160, f"README.md has {len(lines)} lines: move detail into docs/"
    for guide in ("instructors", "maintainers", "gpu", "checks", "results", "troubleshooting",
                  "getting-started", "sources"):  # fmt: skip
        assert f"](docs/{guide}.md)" in README, f"README.md does not point to docs/{guide}.md"
    assert "](ARCHITECTURE.md)" in README
    for command in ("make course", "make test", "gpt-course open"):
        assert command in README


def test_no_guide_is_a_slice_of_another_file():
    for path in GUIDES:
        text = path.read_text(encoding="utf-8")
        assert ":start-after:" not in text and ":end-before:" not in text, path


# --- the lesson map -------------------------------------------------------------------------


MAP = "| # | lesson | what you see | CPU minutes | lab |\n| --- | --- | --- | --- | --- |\n"


def test_the_lesson_map_is_read_from_a_readme_table():
    readme = (
        f"## Lesson map\n\n{MAP}"
        "| 01 | [tokens](notebooks/01_t.ipynb) | a \\| b, `x` | < 1 | [lab 01](labs/01_t.ipynb) |\n"
        "| 02 | [attention](notebooks/02_a.ipynb) | heads | 1 | – |\n\nAfter.\n"
    )
    assert site.lesson_map(readme) == [
        ("01", "tokens", "notebooks/01_t.ipynb", "a \\| b, `x`", "< 1", "labs/01_t.ipynb"),
        ("02", "attention", "notebooks/02_a.ipynb", "heads", "1", None),
    ]
    with pytest.raises(site.SiteError, match="no lesson map"):
        site.lesson_map("# A README without the table\n")
    with pytest.raises(site.SiteError, match="should be a link"):
        site.lesson_map(f"{MAP}| 01 | tokens | a | 1 | – |\n")


def test_a_lesson_notebook_missing_from_the_map_fails_with_the_row_to_add(tmp_path):
    (tmp_path / "notebooks").mkdir()
    for name in ("01_tokens.ipynb", "02_attention.ipynb"):
        (tmp_path / "notebooks" / name).write_text("{}")
    row = "| 01 | [t](notebooks/01_tokens.ipynb) | w | 1 | – |\n"
    (tmp_path / "README.md").write_text(MAP + row)
    with pytest.raises(site.SiteError, match=r"notebooks/02_attention.ipynb is not in README"):
        site.course_lessons(tmp_path)
    (tmp_path / "notebooks" / "02_attention.ipynb").unlink()
    assert [lesson.title for lesson in site.course_lessons(tmp_path)] == ["t"]
    (tmp_path / "labs").mkdir()  # a lab the row does not link
    (tmp_path / "labs" / "01_tokens.ipynb").write_text("{}")
    with pytest.raises(site.SiteError, match=r"row 01 links no lab: make it labs/01_tokens"):
        site.course_lessons(tmp_path)
    (tmp_path / "notebooks" / "01_tokens.ipynb").unlink()
    with pytest.raises(site.SiteError, match=r"row 01 \(t\) needs exactly one committed"):
        site.course_lessons(tmp_path)


def test_the_sites_pages_equal_the_readmes_lesson_map(built):
    rows = site.lesson_map(README)
    lesson_pages = sorted(p.stem for p in (built / "notebooks").glob("*.html"))
    assert [stem[:2] for stem in lesson_pages] == [row[0] for row in rows], "a lesson is missing"
    assert lesson_pages == sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert sorted(p.stem for p in (built / "labs").glob("*.html")) == sorted(
        p.stem for p in (ROOT / "labs").glob("*.ipynb")
    )
    home = _parse(built / "index.html")
    for stem in lesson_pages:
        assert f"notebooks/{stem}.html" in home.links, f"the home page's map lacks {stem}"
        assert f"labs/{stem}.html" in home.links, f"the home page's map lacks lab {stem}"
    home_text = (built / "index.html").read_text(encoding="utf-8")
    for number, title, *_ in rows:
        assert f"<td><p>{number}</p></td>" in home_text and title in home_text


def _git(repo: Path, *args: str) -> None:
    identity = ["-c", "user.name=course", "-c", "user.email=course@example.org"]
    subprocess.run(["git", "-C", str(repo), *identity, *args], check=True, capture_output=True)


def test_the_site_shows_the_committed_notebooks_whatever_the_working_tree_holds(tmp_path):
    """A student ran and saved lab 01 (a warning, a figure, a line of their own) and changed an
    output of lesson 02: the site still builds, and shows what git's HEAD holds."""
    _need_builder()
    repo = tmp_path / "course"
    for name in ("docs", "notebooks", "labs"):
        shutil.copytree(ROOT / name, repo / name)
    for name in ("README.md", "LICENSE", "ARCHITECTURE.md"):
        shutil.copy2(ROOT / name, repo / name)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "the course as CI checked it")
    lab_path = repo / "labs" / "01_tokens_and_embeddings.ipynb"
    lab = nbformat.read(lab_path, as_version=4)
    cell = next(c for c in lab.cells if c.cell_type == "code")
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stderr", text="UserWarning: STUDENT WARNING\n"),
        nbformat.v4.new_output("display_data", data={"image/png": PNG, "text/plain": "<Figure>"}),
        nbformat.v4.new_output("stream", name="stdout", text="STUDENT OUTPUT\n"),
    ]
    nbformat.write(lab, lab_path)
    lesson_path = repo / "notebooks" / "02_attention.ipynb"
    lesson = nbformat.read(lesson_path, as_version=4)
    output = next(
        o for c in lesson.cells for o in c.get("outputs", []) if o.get("name") == "stdout"
    )
    committed_line = output.text.strip().splitlines()[0]
    output.text = "STUDENT RESULT\n"
    nbformat.write(lesson, lesson_path)
    (repo / "notebooks" / "99_scratch.ipynb").write_text("{}")  # untracked: not on the site

    _seconds, notes = site.build(tmp_path / "site", root=repo)
    assert not [note for note in notes if "working tree" in note], notes
    lab_page = (tmp_path / "site" / "labs" / "01_tokens_and_embeddings.html").read_text()
    lesson_page = (tmp_path / "site" / "notebooks" / "02_attention.html").read_text()
    assert "STUDENT" not in lab_page and "STUDENT" not in lesson_page
    assert html.escape(committed_line, quote=False) in lesson_page, committed_line
    assert not (tmp_path / "site" / "notebooks" / "99_scratch.html").exists()


def test_without_git_the_site_says_it_builds_from_the_working_tree(tmp_path):
    note = site.committed(tmp_path, tmp_path / "out")
    assert note and "not a git checkout" in note and "working tree" in note


def test_every_figure_says_what_it_shows(built):
    """Alt text from the figure's titles and axes (not the hashed file name myst-nb gives)."""
    alts = []
    for path in sorted((built / "notebooks").glob("*.html")):
        text = path.read_text(encoding="utf-8")
        alts += [
            (path.name, alt) for alt in re.findall(r'<img alt="([^"]*)" src="\.\./_images/', text)
        ]
    assert len(alts) >= 20
    bad = [(name, alt) for name, alt in alts if not alt.startswith("Figure") or "_images" in alt]
    assert not bad, bad
    assert any("(axes: d_k, variance of the score)" in alt for _, alt in alts)


def test_lab_pages_hold_no_solution_or_hidden_test(built):
    for path in (built / "labs").glob("*.html"):
        text = path.read_text(encoding="utf-8")
        assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text, path.name


def test_every_lesson_and_lab_page_links_its_committed_notebook(built):
    for folder in ("notebooks", "labs"):
        for path in sorted((built / folder).glob("*.html")):
            links = [
                href for href, text in _parse(path).anchors if text == "Download this notebook"
            ]
            assert len(links) == 1, f"{folder}/{path.name}: no 'Download this notebook' link"
            served = (path.parent / links[0]).resolve()
            assert served.read_bytes() == _committed(f"{folder}/{path.stem}.ipynb")


def test_the_default_build_launches_each_notebook_from_the_pyproject_repository(built):
    """Colab and Binder buttons on every lesson and lab page, from [project.urls] Repository."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    repo = project["urls"]["Repository"].removeprefix("https://github.com/")
    pages = [p for folder in ("notebooks", "labs") for p in sorted((built / folder).glob("*.html"))]
    assert len(pages) > 20
    for path in pages:
        text = path.read_text(encoding="utf-8")
        notebook = f"{path.parent.name}/{path.stem}.ipynb"
        assert f"colab.research.google.com/github/{repo}/blob/main/{notebook}" in text, path
        assert f"mybinder.org/v2/gh/{repo}/main?urlpath=lab/tree/{notebook}" in text, path


def test_a_site_built_with_the_placeholder_repository_says_so(tmp_path):
    """pyproject.toml ships a placeholder Repository: a site built with it gets launch links
    that lead nowhere, so the build says so; the maintainers' guide says to set it."""
    placeholder = site.PLACEHOLDER_REPOSITORY
    assert placeholder in (ROOT / "docs" / "maintainers.md").read_text(encoding="utf-8")
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(f'[project]\nname = "x"\n[project.urls]\nRepository = "{placeholder}"\n')
    note = site.placeholder_note(tmp_path, environ={})
    assert note and note.startswith(
        f"the launch links (Colab, Binder, JupyterHub) point at {placeholder}"
    )
    assert site.placeholder_note(tmp_path, {"COURSE_REPOSITORY": f"{placeholder}/"}) == note
    for elsewhere in ("https://github.com/you/gpt-course", "none"):
        assert site.placeholder_note(tmp_path, {"COURSE_REPOSITORY": elsewhere}) is None
    pyproject.write_text(pyproject.read_text().replace(placeholder, "https://github.com/you/x"))
    assert site.placeholder_note(tmp_path, environ={}) is None


def _mini_source(tmp_path: Path, index: str) -> Path:
    """A one-page source tree with the site's own settings, for fast builds."""
    _need_builder()
    src = tmp_path / "src"
    shutil.copytree(ROOT / "docs" / "_static", src / "_static")
    shutil.copy2(ROOT / "docs" / "conf.py", src / "conf.py")
    (src / "index.md").write_text(index, encoding="utf-8")
    return src


def test_launch_buttons_come_from_the_repository_setting(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_REPOSITORY", "https://github.com/example/gpt-course")
    monkeypatch.setenv("COURSE_BRANCH", "spring")
    monkeypatch.setenv("COURSE_JUPYTERHUB", "https://hub.example.edu")
    src = _mini_source(tmp_path, "# Home\n\n```{toctree}\nlabs/01_tokens_and_embeddings\n```\n")
    (src / "labs").mkdir()
    shutil.copy2(ROOT / "labs" / "01_tokens_and_embeddings.ipynb", src / "labs")
    site.sphinx_build(src, tmp_path / "out", tmp_path / "doctrees")
    page = (tmp_path / "out" / "labs" / "01_tokens_and_embeddings.html").read_text()
    path = "example/gpt-course/blob/spring/labs/01_tokens_and_embeddings.ipynb"
    assert f"https://colab.research.google.com/github/{path}" in page
    assert "https://mybinder.org/v2/gh/example/gpt-course/spring?urlpath=lab/tree/labs/" in page
    puller = "https://hub.example.edu/hub/user-redirect/git-pull?repo=https://github.com/example"
    assert puller in page.replace("%3A", ":").replace("%2F", "/"), page  # nbgitpuller


def test_a_broken_page_fails_the_build_naming_the_file_and_the_problem(tmp_path):
    broken = (
        "# Home\n\n![a figure](missing.png)\n\nSee [the lesson](nowhere.md).\n\n"
        "```nosuchlexer\ncode\n```\n"
    )
    src = _mini_source(tmp_path, broken)
    with pytest.raises(site.SiteError) as failure:
        site.sphinx_build(src, tmp_path / "out", tmp_path / "doctrees")
    message = str(failure.value)
    for problem in ("missing.png", "nowhere.md", "nosuchlexer"):
        assert "README.md (the home page" in message and problem in message, message


def test_a_folder_that_is_not_a_site_is_not_deleted(tmp_path):
    _need_builder()  # without it, build stops earlier, naming the missing extra
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(site.SiteError, match="not a built site"):
        site.build(tmp_path)
    assert (tmp_path / "precious.txt").exists()


# --- a real browser -------------------------------------------------------------------------

PAGE_CHECKS = """
const done = arguments[arguments.length - 1];
const typeset = window.MathJax && MathJax.startup ? MathJax.startup.promise : Promise.resolve();
typeset.then(() => {
  const prose = document.body.cloneNode(true);
  prose.querySelectorAll("pre, code, script, style, mjx-container").forEach(e => e.remove());
  done({
    badImages: [...document.images].filter(i => !i.complete || i.naturalWidth === 0)
      .map(i => i.src),
    unrenderedMath: [...document.querySelectorAll(".math")]
      .filter(e => !e.querySelector("mjx-container")).map(e => e.textContent.slice(0, 60)),
    mathErrors: document.querySelectorAll("mjx-merror").length,
    rawDollars: prose.textContent.includes("$$"),
    widgetText: ["VBox(", "HBox(", "Output()"].filter(t => prose.textContent.includes(t) ||
      [...document.querySelectorAll(".cell_output")].some(e => e.textContent.includes(t))),
    links: [...document.links].map(a => a.href),
  });
}).catch(e => done({error: String(e)}));
"""

# axe-core (vendored, MPL-2.0: tests/vendor/axe-core/) run on the page as a reader gets it.
AXE = (Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js").read_text(encoding="utf-8")
AXE_RUN = """
const done = arguments[arguments.length - 1];
axe.run(document).then(r => done(r.violations.map(v => ({id: v.id, impact: v.impact,
  nodes: v.nodes.map(n => n.target.join(" ") + " " + n.html.slice(0, 80))}))))
  .catch(e => done([{id: "axe-error", impact: "critical", nodes: [String(e)]}]));
"""
SERIOUS = ("serious", "critical")


def _axe(driver) -> list[dict]:
    """The accessibility violations axe-core finds on the page loaded in ``driver``."""
    driver.execute_script(AXE)
    return driver.execute_async_script(AXE_RUN)


# Each quiz answer is in the page but hidden until its disclosure is opened.
ANSWERS_HIDDEN = """
const answers = [...document.querySelectorAll(".course-quiz details > p")];
return {count: answers.length, visible: answers.filter(a => a.checkVisibility()).length};
"""


# The search buttons and fields a reader sees on a page (the search dialog's stays hidden).
SEARCH_BOXES = """
return [...document.querySelectorAll(".search-button, .search-button-field, form.bd-search")]
  .filter(e => e.checkVisibility({visibilityProperty: true})).length;
"""

# The backgrounds of a page's HTML outputs.
HTML_OUTPUT_BACKGROUNDS = """
return [...document.querySelectorAll("div.cell_output .output.text_html")]
  .map(e => getComputedStyle(e).backgroundColor);
"""


@pytest.fixture(scope="module")
def served(built):
    handler = functools.partial(_QuietHandler, directory=str(built))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    driver = chrome(tmp_path_factory.mktemp("chromium-profile"), logs=True)
    yield driver
    driver.quit()


def _requests(driver) -> list[str]:
    """The URLs the page asked for since the last call (Chrome's performance log)."""
    import json

    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def _check_links(links: set[str], base: str) -> list[str]:
    """Every internal link leads to a served file, and its #fragment to an id in that page."""
    problems, pages = [], {}
    for link in sorted(links):
        url, fragment = urldefrag(link)
        if url not in pages:
            try:
                with urllib.request.urlopen(url, timeout=10) as response:
                    body = response.read()
                ids = set()
                if url.endswith(".html") or url.endswith("/"):
                    parsed = _Page()
                    parsed.feed(body.decode("utf-8"))
                    ids = parsed.ids
                pages[url] = ids
            except urllib.error.URLError as err:
                pages[url] = None
                problems.append(f"{link}: {err}")
        if fragment and pages[url] is not None and fragment not in pages[url]:
            problems.append(f"{link}: no element with id {fragment!r}")
    return problems


def _click(driver, css: str) -> None:
    from selenium.webdriver.common.by import By

    next(e for e in driver.find_elements(By.CSS_SELECTOR, css) if e.is_displayed()).click()


def test_every_page_works_offline_in_a_real_browser(
    browser, built, served, tmp_path_factory, capsys
):
    from selenium.webdriver.support.ui import WebDriverWait

    start = time.perf_counter()
    pages = sorted(
        p.relative_to(built).as_posix()
        for p in built.rglob("*.html")
        if not p.relative_to(built).as_posix().startswith("_")
    )
    assert "notebooks/02_attention.html" in pages and len(pages) > 20
    problems, internal, impacts = [], set(), {}
    browser.get_log("browser"), _requests(browser)  # start both logs empty
    for name in pages:
        browser.get(served + name)
        found = browser.execute_async_script(PAGE_CHECKS)
        if "error" in found:
            problems.append(f"{name}: MathJax failed: {found['error']}")
            continue
        for key in ("badImages", "unrenderedMath", "widgetText"):
            if found[key]:
                problems.append(f"{name}: {key}: {found[key]}")
        if found["mathErrors"] or found["rawDollars"]:
            problems.append(f"{name}: math not rendered ({found['mathErrors']} errors, raw $$)")
        errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        problems += [f"{name}: console error: {message}" for message in errors]
        external = [u for u in _requests(browser) if not u.startswith(served) and "://" in u]
        problems += [
            f"{name}: asked the network for {url}" for url in external if url[:4] == "http"
        ]
        internal |= {link for link in found["links"] if link.startswith(served)}
        violations = _axe(browser)
        impacts[name] = Counter(v["impact"] for v in violations for _ in v["nodes"])
        problems += [
            f"{name}: accessibility ({v['impact']}) {v['id']}: {node}"
            for v in violations
            if v["impact"] in SERIOUS
            for node in v["nodes"]
        ]
    problems += _check_links(internal, served)
    assert not problems, "\n".join(problems)

    # Quiz answers sit behind their disclosures; opening one shows it.
    browser.get(served + "notebooks/02_attention.html")
    answers = browser.execute_script(ANSWERS_HIDDEN)
    assert answers["count"] >= 3 and answers["visible"] == 0, answers
    _click(browser, ".course-quiz details > summary")
    assert browser.execute_script(ANSWERS_HIDDEN)["visible"] == 1

    # Search works from the shipped index.
    browser.get(served + "search.html?q=RMSNorm")
    results = WebDriverWait(browser, 20).until(
        lambda d: d.execute_script(
            "return [...document.querySelectorAll('#search-results li a')].map(a => a.href)"
        )
    )
    assert any(url.endswith("notebooks/03_block_assembly.html") for url in results), results

    # One search box on a page: the sidebar's (the theme's header bar held a second one).
    browser.get(served + "notebooks/02_attention.html")
    assert browser.execute_script(SEARCH_BOXES) == 1

    # The light/dark toggle switches the theme.
    browser.get(served + "index.html")
    themes = []
    for mode in ("dark", "light"):
        _click(browser, ".theme-switch-button")
        _click(browser, f".theme-change-button[data-mode={mode}]")
        themes.append(browser.execute_script("return document.documentElement.dataset.theme"))
    assert themes == ["dark", "light"]

    # In dark mode the HTML outputs (the quiz) are not left in light boxes.
    browser.get(served + "notebooks/02_attention.html")
    browser.execute_script("document.documentElement.dataset.theme = 'dark'")
    backgrounds = browser.execute_script(HTML_OUTPUT_BACKGROUNDS)
    assert backgrounds and set(backgrounds) == {"rgba(0, 0, 0, 0)"}, backgrounds

    shots = tmp_path_factory.mktemp("screenshots")
    for name, page in (("home", "index.html"), ("lesson-02", "notebooks/02_attention.html")):
        browser.get(served + page)
        browser.execute_async_script(PAGE_CHECKS)
        browser.save_screenshot(str(shots / f"{name}.png"))
    with capsys.disabled():  # the paths show in every run's log, not only on failure
        print(f"\nsite browser test: {len(pages)} pages in {time.perf_counter() - start:.0f} s")
        print(f"screenshots: {shots / 'home.png'} {shots / 'lesson-02.png'}")
        total = sum(impacts.values(), Counter())
        print(f"axe-core violations (nodes) on {len(impacts)} pages: {dict(total) or 'none'}")
        for name, counts in sorted(impacts.items()):
            if counts:
                print(f"  {name}: {dict(counts)}")


# The code, output, display-equation and table boxes of a lesson or lab page that are wider than
# the article's column or scroll sideways inside themselves, the wide figures drawn narrower than
# the column, and whether the page itself scrolls sideways (after course.js fits the equations).
FIT_CHECKS = """
const done = arguments[arguments.length - 1];
(window.courseMathFitted || Promise.resolve()).then(() => {
  const article = document.querySelector("article.bd-article");
  const style = getComputedStyle(article), box = article.getBoundingClientRect();
  const left = box.left + parseFloat(style.paddingLeft);
  const right = box.right - parseFloat(style.paddingRight), column = right - left;
  const name = e => `${e.tagName.toLowerCase()}.${[...e.classList].slice(0, 2).join(".")} ` +
    JSON.stringify(e.textContent.trim().slice(0, 40));
  const boxes = article.querySelectorAll("div.cell_input pre, div.cell_output pre, " +
    "div.highlight pre, div.cell_output > .output, mjx-container[display='true'], " +
    ".pst-scrollable-table-container");
  const wider = [], scrolls = [], narrow = [];
  for (const e of boxes) {
    const r = e.getBoundingClientRect();
    if (r.left < left - 1 || r.right > right + 1) {
      wider.push(`${name(e)} is ${Math.round(r.width)} px in a ${Math.round(column)} px column`);
    } else if (e.scrollWidth > e.clientWidth + 1) {
      scrolls.push(`${name(e)} scrolls: ${e.scrollWidth} px in ${e.clientWidth} px`);
    }
  }
  for (const img of article.querySelectorAll("div.cell_output img")) {
    const width = img.getBoundingClientRect().width;
    if (img.naturalWidth >= column && width < column - 20) {
      narrow.push(`a ${img.naturalWidth} px figure drawn ${Math.round(width)} px wide`);
    }
    // Scaled to the column (never wider, never in a sideways-scrolling box) and a link to the
    // full-size image, a tap away.
    if (img.naturalWidth > column && width > column + 1) {
      narrow.push(`a ${img.naturalWidth} px figure drawn ${Math.round(width)} px wide`);
    }
    for (let box = img.parentElement; box !== article; box = box.parentElement) {
      if (box.scrollWidth > box.clientWidth + 1) narrow.push(`a figure scrolls in ${name(box)}`);
    }
    const link = img.closest("a");
    if (!link || new URL(link.href).pathname !== new URL(img.src).pathname) {
      narrow.push(`a figure not linked to its full-size image: ${img.getAttribute("src")}`);
    }
  }
  const page = document.scrollingElement;
  done({boxes: boxes.length, wider, scrolls, narrow, page: page.scrollWidth > page.clientWidth ?
    [`the page scrolls sideways: ${page.scrollWidth} px in ${page.clientWidth} px`] : []});
}).catch(e => done({error: String(e)}));
"""


def test_code_outputs_and_equations_fit_their_column_in_a_real_browser(browser, built, served):
    """At a desktop's 1400 px no code, output, equation or table box is wider than the column
    or scrolls sideways; at a phone's 390 px a box may scroll inside itself (100-character code
    lines, an equation MathJax cannot break) but none is wider than the column, and the page
    never scrolls sideways. Wide figures fill the column at both (scaled down on a phone, never
    in a scrolling box), each a link to its full-size image."""
    pages = sorted(
        p.relative_to(built).as_posix()
        for folder in ("notebooks", "labs")
        for p in (built / folder).glob("*.html")
    )
    assert len(pages) > 20
    problems = []
    try:
        for width, may_scroll in ((1400, False), (390, True)):
            browser.set_window_size(width, 900)
            for name in pages:
                browser.get(served + name)
                found = browser.execute_async_script(FIT_CHECKS)
                if "error" in found:
                    problems.append(f"{width} px {name}: {found['error']}")
                    continue
                if not found["boxes"]:  # the selectors must still find the page's boxes
                    problems.append(f"{width} px {name}: no code, output or equation box found")
                keys = ("wider", "narrow", "page") + (() if may_scroll else ("scrolls",))
                problems += [f"{width} px {name}: {p}" for key in keys for p in found[key]]
    finally:
        browser.set_window_size(1280, 900)
    assert not problems, "\n".join(problems)


# Waits until the page has loaded and course.js has fitted its equations.
SETTLED = """
const done = arguments[arguments.length - 1];
(window.courseMathFitted || Promise.resolve()).then(() => done(true), () => done(false));
"""


def test_no_serious_accessibility_violation_at_a_phones_width(browser, built, served, capsys):
    """axe-core on every page at 390 px (a phone): no serious or critical violation (a figure in
    a sideways-scrolling box the keyboard cannot reach was one, on lessons 01, 03 and 12)."""
    pages = sorted(
        p.relative_to(built).as_posix()
        for p in built.rglob("*.html")
        if not p.relative_to(built).as_posix().startswith("_")
    )
    problems, impacts = [], Counter()
    try:
        browser.set_window_size(390, 844)
        for name in pages:
            browser.get(served + name)
            browser.execute_async_script(SETTLED)
            for violation in _axe(browser):
                impacts[violation["impact"]] += len(violation["nodes"])
                if violation["impact"] in SERIOUS:
                    problems += [
                        f"{name}: ({violation['impact']}) {violation['id']}: {node}"
                        for node in violation["nodes"]
                    ]
    finally:
        browser.set_window_size(1280, 900)
    with capsys.disabled():
        print(f"\naxe-core at 390 px, {len(pages)} pages: {dict(impacts) or 'no violation'}")
    assert not problems, "\n".join(problems)
