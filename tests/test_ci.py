"""How `make test` runs: the repository's conftest.py gives each pytest-xdist worker its share of
the CPUs, hands the slowest files out first and prints the seconds per file with every worker's
reports in it; the Makefile and CI run the suite that way."""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
root_conftest = importlib.util.module_from_spec(spec)
spec.loader.exec_module(root_conftest)


def test_each_worker_gets_its_share_of_the_cpus():
    assert root_conftest.worker_threads(2, 2) == 1
    assert root_conftest.worker_threads(2, 16) == 8
    assert root_conftest.worker_threads(4, 2) == 1  # never none
    assert root_conftest.worker_threads(2, 3) == 1


def test_a_worker_sets_threads_and_passive_waits_unless_the_run_chose(monkeypatch):
    monkeypatch.setattr(root_conftest, "cpu_count", lambda: 4)
    env = {"PYTEST_XDIST_WORKER_COUNT": "2"}
    root_conftest.settle_worker_threads(env)
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "2"
    assert env["OMP_WAIT_POLICY"] == "PASSIVE"
    chosen = {"PYTEST_XDIST_WORKER_COUNT": "2", "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "ACTIVE"}
    root_conftest.settle_worker_threads(chosen)  # CI's AVX2 pass asks for one thread
    assert chosen["OMP_NUM_THREADS"] == "1" and chosen["OMP_WAIT_POLICY"] == "ACTIVE"
    alone = {}
    root_conftest.settle_worker_threads(alone)  # no xdist: a student's `pytest --nbval ...`
    assert alone == {}


def test_the_training_lessons_get_every_cpu_and_the_rest_the_workers_share(monkeypatch):
    """As a student's kernel runs lessons 11 and 12; a run that chose threads keeps them."""
    monkeypatch.setattr(root_conftest, "cpu_count", lambda: 4)
    for name in root_conftest.THREAD_VARIABLES:
        monkeypatch.setenv(name, "x")  # restored after the test
    seen = {}
    for share in ("2", None):
        monkeypatch.setattr(root_conftest, "WORKER_SHARE", share)
        for path in ("notebooks/11_sumgpt.ipynb::Cell 3", "tests/test_ci.py::test_x"):
            root_conftest.pytest_runtest_setup(SimpleNamespace(nodeid=path))
            seen[share, path.split("::")[0]] = os.environ["OMP_NUM_THREADS"]
    assert seen == {
        ("2", "notebooks/11_sumgpt.ipynb"): "4", ("2", "tests/test_ci.py"): "2",
        (None, "notebooks/11_sumgpt.ipynb"): "2", (None, "tests/test_ci.py"): "2",
    }  # fmt: skip


def test_the_slowest_files_are_handed_out_first_and_the_rest_keep_their_order():
    paths = ["tests/a.py", "tests/a.py", "notebooks/01.ipynb", "tests/slow.py", "tests/b.py"]
    place = root_conftest.slowest_first(paths, slow=("tests/slow.py", "tests/gone.py"))
    assert sorted(place, key=place.get) == [
        "tests/slow.py", "tests/a.py", "notebooks/01.ipynb", "tests/b.py",
    ]  # fmt: skip


def test_every_slowest_first_entry_is_a_file_of_the_suite():
    assert all((ROOT / path).is_file() for path in root_conftest.SLOWEST_FIRST)


def test_seconds_add_up_per_file_and_per_worker():
    def report(nodeid, when, duration, worker=None):
        node = SimpleNamespace(gateway=SimpleNamespace(id=worker)) if worker else None
        return SimpleNamespace(nodeid=nodeid, when=when, duration=duration, node=node)

    reports = [
        report("tests/a.py::t1", "setup", 2.0, "gw0"),
        report("tests/a.py::t1", "call", 1.0, "gw0"),
        report("notebooks/01.ipynb::Cell 0", "call", 0.5, "gw1"),
        report("notebooks/01.ipynb::Cell 1", "teardown", 0.25, "gw1"),
        SimpleNamespace(nodeid="tests/a.py", when=None),  # a collect report: no phase
    ]
    files, workers = root_conftest.seconds_per_file(reports)
    assert files == {"tests/a.py": 3.0, "notebooks/01.ipynb": 0.75}
    assert workers == {"gw0": 3.0, "gw1": 0.75}
    alone = root_conftest.seconds_per_file([report("x.py::t", "call", 1.0)])
    assert alone == ({"x.py": 1.0}, {})  # without xdist: no workers


SLOW_TEST = """
import os, time
import torch

def test_threads():
    time.sleep({sleep})
    assert torch.get_num_threads() == int(os.environ["EXPECTED_THREADS"])
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
"""


def test_two_workers_run_files_side_by_side_with_one_table_of_seconds(tmp_path):
    """End to end, as `make test` runs: two files on two workers at once, each worker's torch
    with its share of the CPUs, and the controller's table listing both files."""
    (tmp_path / "conftest.py").write_text((ROOT / "conftest.py").read_text())
    (tmp_path / "test_one.py").write_text(SLOW_TEST.format(sleep=1.5))
    (tmp_path / "test_two.py").write_text(SLOW_TEST.format(sleep=1.2))
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    env.pop("OMP_WAIT_POLICY", None)
    expected = root_conftest.worker_threads(2, root_conftest.cpu_count())
    env.update(EXPECTED_THREADS=str(expected), PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadfile",
         "--no-loadscope-reorder", "-p", "no:cacheprovider", "-o", "addopts=", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    table = done.stdout.split("seconds per file")[1]
    rows = {name: float(s) for s, name in re.findall(r"^\s+([\d.]+)\s+(\S+\.py)$", table, re.M)}
    assert rows["test_one.py"] >= 1.5 and rows["test_two.py"] >= 1.2
    assert re.search(r"all files \(2 workers side by side, busy: gw0 \d+ s, gw1 \d+ s\)", table)


def test_ci_sets_up_as_the_readme_does_with_no_torch_of_its_own():
    """CI checks the torch a newcomer's `make test` gets (torch_setup's choice), not a pin."""
    run = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make test$", run, re.M)
    assert not re.search(r"pip install[^\n]*torch", run)


def test_make_test_keeps_each_files_tests_on_one_worker():
    """A notebook's cells share one kernel, in order: files, not tests, are handed out."""
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^test:.*\n\t(.*)$", makefile, re.M).group(1)
    assert "-m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder" in recipe
