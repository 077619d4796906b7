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


def only_systemd_run(tmp_path: Path, monkeypatch, script: str) -> None:
    """Make ``script`` the systemd-run on PATH and the only limiter the probes can find."""
    fake = tmp_path / "systemd-run"
    fake.write_text(script)
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(limiter, "_cgroup_v2", lambda: None)
    monkeypatch.setattr(limiter, "_cgroup_v1", lambda: None)


def test_a_systemd_run_whose_scope_does_not_hold_its_caps_is_named_and_not_used(
    tmp_path, monkeypatch
):
    # a systemd-run that starts the command without a capped scope of its own, as a user
    # manager that was not delegated the memory controller does
    script = '#!/bin/sh\nwhile [ "$1" != "--" ]; do shift; done\nshift\nexec "$@"\n'
    only_systemd_run(tmp_path, monkeypatch, script)
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


def test_the_systemd_probe_reads_the_caps_while_its_scope_is_there(tmp_path, monkeypatch):
    # systemd removes a scope's group as soon as its last process ends: the caps must be read
    # while the probe's shell still waits (read after it, they were gone under load, and a
    # working user manager was reported as not delegating memory and pids)
    ended = tmp_path / "ended"
    script = f'#!/bin/sh\nwhile [ "$1" != "--" ]; do shift; done\nshift\n"$@"\ntouch {ended}\n'
    only_systemd_run(tmp_path, monkeypatch, script)

    def caps_of(text):  # as a scope holding the probe's caps reads, until it is gone
        return {} if ended.exists() else {"memory": str(2**30), "pids": "16"}

    monkeypatch.setattr(limiter, "caps_of", caps_of)
    kind = "systemd-run" if os.geteuid() == 0 else "systemd-run --user"
    assert limiter.find_limiter.__wrapped__() == limiter.Limiter(kind)
    assert ended.exists()


def test_a_systemd_run_with_no_manager_to_answer_is_passed_over(tmp_path, monkeypatch):
    only_systemd_run(
        tmp_path, monkeypatch, "#!/bin/sh\necho 'Failed to connect to bus' >&2\nexit 1\n"
    )
    assert limiter.find_limiter.__wrapped__() == limiter.Limiter()


# ---------------------------------------------------------------------------------------------
# The kernel's count of OOM kills, read from a group's files (a hand-in over its memory cap is
# counted for real in tests/test_limit_outcomes.py, and on cgroup v2 in tests/test_vm.py)


def cgroup_folder(tmp_path, name, **files):
    folder = tmp_path / name
    folder.mkdir()
    for file, text in files.items():
        (folder / file.replace("_", ".", 1)).write_text(text)
    return folder


V2_EVENTS = "low 0\nhigh 0\nmax 31\noom 2\noom_kill {kills}\noom_group_kill {group}\n"


@pytest.mark.parametrize(
    ("files", "kills"),
    [
        ({"memory_events": V2_EVENTS.format(kills=2, group=0)}, 2),  # cgroup v2
        ({"memory_events": V2_EVENTS.format(kills=0, group=0)}, 0),
        ({"memory_events": V2_EVENTS.format(kills=0, group=1)}, 1),  # memory.oom.group set
        ({"memory_events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n"}, 0),  # before 5.17
        ({"memory_oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"}, 3),  # v1
        ({"memory_oom_control": "oom_kill_disable 0\nunder_oom 0\n", "memory_failcnt": "7\n"},
         7),  # v1 before Linux 4.13: the times it hit its cap
        ({"pids_max": "16\n"}, None),  # v1's pids hierarchy: no memory count
    ],
)  # fmt: skip
def test_a_groups_oom_kills_are_read_from_the_kernels_count(tmp_path, files, kills):
    folder = cgroup_folder(tmp_path, "course-grade-1-abc", **files)
    assert limiter.folder_oom_kills(folder) == kills


def test_a_v1_group_counts_its_memory_folder_and_a_removed_group_counts_nothing(tmp_path):
    memory = cgroup_folder(tmp_path, "memory", memory_oom_control="under_oom 0\noom_kill 1\n")
    pids = cgroup_folder(tmp_path, "pids", pids_max="16\n")
    assert limiter.oom_kills(limiter.Group(folders=[str(memory), str(pids)])) == 1
    assert limiter.oom_kills(limiter.Group(folders=[str(tmp_path / "gone")])) is None
    assert limiter.oom_kills(limiter.Group()) is None  # no limiter: nothing counts


SYSTEMCTL = """#!/bin/sh
echo "$@" >> {log}
case "$*" in *show*) printf 'LoadState=%s\\nResult=%s\\nControlGroup=\\n' {state} {result};; esac
"""


@pytest.mark.parametrize(
    ("state", "result", "kills"),
    [("loaded", "oom-kill", 1), ("loaded", "success", 0), ("not-found", "success", 0)],
)
def test_a_systemd_scopes_oom_kill_is_read_from_its_result(tmp_path, monkeypatch, state,
                                                           result, kills):  # fmt: skip
    log = tmp_path / "log"
    fake = tmp_path / "systemctl"
    fake.write_text(SYSTEMCTL.format(log=log, state=state, result=result))
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    group = limiter.Group(["systemd-run"], unit="--user course-grade-1-abc.scope")
    assert limiter.oom_kills(group) == kills
    limiter.remove_group(group)  # a failed scope is reset, which unloads it
    assert log.read_text().splitlines() == [
        "--user show course-grade-1-abc.scope --property=LoadState,Result,ControlGroup",
        "--user reset-failed course-grade-1-abc.scope",
    ]


def test_a_systemd_run_group_is_a_named_scope_kept_until_read(monkeypatch):
    group = limiter.make_group(limiter.Limiter("systemd-run --user"), 2**30, 16)
    assert group.unit.startswith(f"--user {limiter.PREFIX}{os.getpid()}-")
    assert f"--unit={group.unit.split()[1]}" in group.prefix
    assert "--collect" not in group.prefix  # a scope the OOM killer failed stays to be read
