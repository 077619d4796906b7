"""The kernel as an unprivileged user, where user namespaces are refused (Docker's default
seccomp profile, Gradescope's containers) and bwrap cannot run.

A grader running as root starts each kernel through ``setpriv`` as ``nobody`` (no groups, no
new privileges, an empty environment but its own), so the hand-in cannot read what only root
may: the autograder's files (``/autograder/source``, 0700) and the grader's own folders (made
under umask 077). The kernel's folder is handed to that user, the folders above it opened for
passing through only (0711). The same caps hold: RLIMIT_DATA and the file size per process,
RLIMIT_NPROC for the user's processes, and the hand-in's cgroup where there is one.
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

KERNEL_USER = "nobody"
PRIVATE_UMASK = 0o077  # what the grader writes in this mode: root's alone


def user_ids(name: str = KERNEL_USER) -> tuple[int, int]:
    """(uid, gid) of ``name``."""
    entry = pwd.getpwnam(name)
    return entry.pw_uid, entry.pw_gid


def unavailable_reason() -> str | None:
    """Why the kernel cannot run as another user here (None when it can)."""
    if os.geteuid() != 0:
        return "the grader is not root, so it cannot start the kernel as another user"
    if not (shutil.which("setpriv") and shutil.which("prlimit")):
        return "setpriv or prlimit (util-linux) is missing"
    try:
        user_ids()
    except KeyError:
        return f"there is no user {KERNEL_USER!r}"
    return None


def open_way(home: Path) -> None:
    """Let the kernel's user pass through (not list) the folders above its own ``home``, up to
    the first that others may already pass through (``/tmp``)."""
    for folder in home.parents:
        mode = folder.stat().st_mode
        if mode & 0o001:
            return
        folder.chmod((mode & 0o7777) | 0o011)


def kernel_environment(home: Path, env: dict[str, str]) -> dict[str, str]:
    """All the environment the kernel gets: a fixed few, its own home, ``env`` on top."""
    scripts = os.path.dirname(sys.executable)
    base = {
        "PATH": os.pathsep.join([scripts, "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": str(home / "home"),
        "TMPDIR": "/tmp",
        "USER": KERNEL_USER,
        "LANG": "C.UTF-8",
        "IPYTHONDIR": str(home / "home" / ".ipython"),
        "MPLCONFIGDIR": str(home / "home" / ".matplotlib"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    marker = {k: v for k, v in os.environ.items() if k == "COURSE_UTILS_GRADING_RUN"}
    return base | marker | env


def command_line(
    caps: str, home: Path, command: list[str], env: dict[str, str], limit: list[str]
) -> list[str]:
    """``command`` as the kernel's user, after the shell code ``caps`` (run as root: it joins
    the hand-in's group and sets the rlimits) and the ``limit`` prefix (prlimit's process
    cap); the kernel's folder becomes that user's."""
    uid, gid = user_ids()
    open_way(home)
    give = f"chown -R {uid}:{gid} {shlex.quote(str(home))} && "
    pairs = [f"{k}={v}" for k, v in kernel_environment(home, env).items()]
    drop = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--no-new-privs"]
    return ["/bin/sh", "-c", give + caps, "sh", *limit, *drop, "--", "env", "-i", *pairs, *command]


def probe(caps: str, limit: list[str]) -> str | None:
    """None when Python runs as the kernel's user under ``caps``, else what went wrong."""
    if (reason := unavailable_reason()) is not None:
        return reason
    home = Path(tempfile.mkdtemp(prefix="course-user-probe-"))
    try:
        (home / "home").mkdir()
        command = command_line(caps, home, [sys.executable, "-c", "pass"], {}, limit)
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"it could not start: {exc}"
    finally:
        shutil.rmtree(home, ignore_errors=True)
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or ["no message"])[-1]
    return None
