"""The limiter's probes on this host: groups a killed grader left are removed when the next one
starts, and a systemd-run whose scope does not hold its caps is named, not trusted. (Each path
holding a hand-in to its caps is shown in a real guest: tests/test_vm.py.)"""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from course_utils.grading import limiter, sandbox

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="cgroups are Linux only"
)

MAKE_GROUP = """from course_utils.grading import limiter
group = limiter.make_group(limiter.find_limiter(), 2**30, 16)
print(*group.folders, flush=True)
import time; time.sleep(300)"""


def test_the_groups_of_a_grader_killed_with_sigkill_are_removed_when_the_next_starts():
    found = limiter.find_limiter.__wrapped__()
    if not found.kind.startswith("cgroup"):
        pytest.skip(f"no cgroup filesystem limiter here ({found.describe()}): systemd collects "
                    "its own scopes")  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(Path(limiter.__file__).parents[2])}
    grader = subprocess.Popen([sys.executable, "-c", MAKE_GROUP], stdout=subprocess.PIPE,
                              text=True, env=env)  # fmt: skip
    folders = [Path(f) for f in grader.stdout.readline().split()]
    grader.send_signal(signal.SIGKILL)
    grader.wait()
    assert folders and all(f.is_dir() for f in folders)  # left behind
    alive = limiter.make_group(found, 2**30, 16)  # this process's: not stale
    try:
        assert limiter.find_limiter.__wrapped__().kind == found.kind
        assert not any(f.exists() for f in folders)
        assert all(Path(f).is_dir() for f in alive.folders)
    finally:
        limiter.remove_group(alive)


def test_a_systemd_run_whose_scope_does_not_hold_its_caps_is_named_and_not_used(
    tmp_path, monkeypatch
):
    # a systemd-run that starts the command without a capped scope of its own, as a user
    # manager that was not delegated the memory controller does
    fake = tmp_path / "systemd-run"
    fake.write_text('#!/bin/sh\nwhile [ "$1" != "--" ]; do shift; done\nshift\nexec "$@"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(limiter, "_cgroup_v2", lambda: None)
    monkeypatch.setattr(limiter, "_cgroup_v1", lambda: None)
    kind = "systemd-run" if os.geteuid() == 0 else "systemd-run --user"
    manager = "systemd" if os.geteuid() == 0 else "systemd's user manager"
    why = (f"{kind} runs but cannot cap here ({manager} does not delegate the memory and pids "
           "controllers)")  # fmt: skip
    assert limiter.find_limiter.__wrapped__() == limiter.Limiter(why=why)
    box = sandbox.Sandbox("bwrap", 2**30, limiter=limiter.Limiter(why=why))
    assert box.limits() == (
        f"limits: 1G of data per process (RLIMIT_DATA) only: {why}, so a hand-in's processes "
        "together are not capped"
    )


def test_a_systemd_run_with_no_manager_to_answer_is_passed_over(tmp_path, monkeypatch):
    fake = tmp_path / "systemd-run"
    fake.write_text("#!/bin/sh\necho 'Failed to connect to bus' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(limiter, "_cgroup_v2", lambda: None)
    monkeypatch.setattr(limiter, "_cgroup_v1", lambda: None)
    assert limiter.find_limiter.__wrapped__() == limiter.Limiter()
