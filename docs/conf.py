"""Sphinx settings of the course website.

``python -m course_utils site build`` (``make site``) lays the sources out in a temporary folder
that mirrors the repository (README.md as the home page, these guides under docs/, the lessons and
labs as git's HEAD holds them under notebooks/ and labs/) and runs Sphinx there with these
settings (``-c docs``) and warnings as errors. Nothing is executed: the pages show the outputs
that CI checked.
"""

import os
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def project_repository(pyproject: Path = PYPROJECT) -> str:
    """The repository URL in pyproject.toml's [project.urls] ("" where there is none)."""
    if not pyproject.is_file():
        return ""
    urls = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"].get("urls", {})
    return urls.get("Repository", "")


# Launch buttons on lesson and lab pages (Colab, Binder, and, with a hub's address, a JupyterHub
# through nbgitpuller) come from the repository that hosts this course: pyproject.toml's
# [project.urls] Repository, or COURSE_REPOSITORY for a copy hosted elsewhere, e.g.
#   COURSE_REPOSITORY=https://github.com/you/gpt-course COURSE_BRANCH=main make site
# (COURSE_REPOSITORY=none: no launch button). Each notebook installs the course when opened alone.
REPOSITORY = os.environ.get("COURSE_REPOSITORY", project_repository()).strip().rstrip("/")
REPOSITORY = "" if REPOSITORY == "none" else REPOSITORY
BRANCH = os.environ.get("COURSE_BRANCH", "").strip() or "main"
JUPYTERHUB = os.environ.get("COURSE_JUPYTERHUB", "").strip()

project = "Build a GPT from scratch"
author = "the course authors"
copyright = "the course authors: code MIT, lesson text CC BY 4.0 (see License)"

extensions = ["myst_nb", "sphinx-mathjax-offline"]  # MathJax 3 served from _static/mathjax
root_doc = "index"
exclude_patterns = ["_originals", "docs/navigation.md", "docs/_static"]

# MyST: $...$ and $$...$$ math as in the notebooks, ::: fences for blocks with a class.
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_dmath_double_inline = True  # $$...$$ inside a paragraph or list item, as JupyterLab allows
myst_heading_anchors = 3

# Notebooks are shown as committed (never executed). Widget views are never rendered (they need
# ipywidgets' JavaScript, which the site does not load): site_notebook.py turns each widget output
# into its static HTML fallback before Sphinx reads it.
nb_execution_mode = "off"
nb_ipywidgets_js = {}
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]
nb_merge_streams = True

html_theme = "sphinx_book_theme"
html_title = project
html_static_path = ["_static"]
html_css_files = ["course.css"]
html_js_files = ["course.js"]  # display equations a little too wide scale down to fit
html_favicon = "_static/favicon.svg"
html_context = {"default_mode": "auto"}  # light or dark as the reader's system says; toggle
html_copy_source = False  # each lesson and lab page links the committed notebook instead
html_show_sourcelink = False
html_theme_options = {
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "use_download_button": False,
    "navbar_persistent": [],  # one search box: the sidebar's (the header bar held a second)
    "repository_url": REPOSITORY,
    "repository_branch": BRANCH,
    "path_to_docs": "",  # the sources mirror the repository: notebooks/NN_x.ipynb, labs/...
    "use_repository_button": bool(REPOSITORY),
    "launch_buttons": {
        "colab_url": "https://colab.research.google.com",
        "binderhub_url": "https://mybinder.org",
        "jupyterhub_url": JUPYTERHUB,
        "notebook_interface": "jupyterlab",
    }
    if REPOSITORY
    else {},
}
