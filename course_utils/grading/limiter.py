"""A hand-in's totals: the memory and the number of processes (tasks) of all it runs together,
held by a cgroup of its own, which the kernel enforces.

Found once per run, first that works: ``systemd-run --scope`` (``--user`` when not root) where a
systemd manager answers; else the cgroup filesystem where the grader may make its own child
groups (v2: ``memory.max`` and ``pids.max``; v1: the ``memory`` and ``pids`` hierarchies); else
none, and only the per-process caps hold (the grader's first line says so). Each hand-in's
kernel joins its group before it starts (``systemd-run``'s prefix, or the shell that starts
bwrap writing its own pid into ``cgroup.procs``); the group is removed after the grading.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_TASKS = 256  # processes and threads of one hand-in (a kernel with torch uses ~30)
PREFIX = "course-grade-"


@dataclass(frozen=True)
class Limiter:
    """How hand-ins' totals are held: ``kind`` names it ("" for none), ``roots`` are the cgroup
    folders (one per hierarchy) the hand-ins' groups are made in."""

    kind: str = ""
    roots: tuple[str, ...] = ()

    def describe(self) -> str:
        return self.kind or "none"


@dataclass(frozen=True)
class Group:
    """One hand-in's cgroup: the command prefix that starts a process in it (systemd-run), the
    ``cgroup.procs`` files its first process writes its pid to, and the folders to remove."""

    prefix: list[str] = field(default_factory=list)
    procs: list[str] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)

    def enter(self) -> str:
        """Shell code that moves the shell itself (and so all it starts) into the group."""
        return "".join(f"echo $$ > {shlex.quote(p)} && " for p in self.procs)


@functools.cache
def find_limiter() -> Limiter:
    """The limiter this machine offers (systemd-run, cgroup v2, cgroup v1), or none."""
    for probe in (_systemd, _cgroup_v2, _cgroup_v1):
        if (found := probe()) is not None:
            return found
    return Limiter()


def make_group(limiter: Limiter, memory: int, tasks: int) -> Group:
    """A new group for one hand-in: ``memory`` bytes and ``tasks`` processes in all."""
    if limiter.kind.startswith("systemd-run"):
        user = ["--user"] if limiter.kind.endswith("--user") else []
        props = [f"MemoryMax={memory}", "MemorySwapMax=0", f"TasksMax={tasks}"]
        options = [o for p in props for o in ("-p", p)]
        return Group(["systemd-run", *user, "--scope", "--quiet", "--collect", *options, "--"])
    if not limiter.kind:
        return Group()
    name = f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}"
    folders = [Path(root) / name for root in limiter.roots]
    for folder in folders:
        folder.mkdir()
    for path, value in _settings(limiter.kind, folders, memory, tasks):
        if path.exists():
            path.write_text(str(value))
    return Group(procs=[str(f / "cgroup.procs") for f in folders], folders=list(map(str, folders)))


def _settings(kind: str, folders: list[Path], memory: int, tasks: int):
    """(file, value) pairs that cap a group; swap files are written where they exist."""
    if kind == "cgroup v2":
        (one,) = folders
        return [(one / "memory.max", memory), (one / "memory.swap.max", 0),
                (one / "pids.max", tasks)]  # fmt: skip
    memory_folder, pids_folder = folders
    return [(memory_folder / "memory.limit_in_bytes", memory),
            (memory_folder / "memory.memsw.limit_in_bytes", memory),
            (pids_folder / "pids.max", tasks)]  # fmt: skip


def remove_group(group: Group) -> None:
    """Kill whatever is still in the group, then remove its folders (a few tries while the
    kernel reaps the killed)."""
    for folder in map(Path, group.folders):
        for _ in range(50):
            try:
                pids = (folder / "cgroup.procs").read_text().split()
            except OSError:
                break
            for pid in pids:
                with _quiet():
                    os.kill(int(pid), signal.SIGKILL)
            with _quiet():
                folder.rmdir()
                break
            time.sleep(0.1)


class _quiet:
    """Ignore OSError (a process or a folder that is already gone)."""

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        return kind is not None and issubclass(kind, OSError)


# ---------------------------------------------------------------------------------------------
# Probes


def _systemd() -> Limiter | None:
    """systemd-run, if a manager answers and starts a capped scope."""
    if not shutil.which("systemd-run"):
        return None
    kind = "systemd-run" if os.geteuid() == 0 else "systemd-run --user"
    group = make_group(Limiter(kind), 2**30, 16)
    try:
        done = subprocess.run([*group.prefix, "true"], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return Limiter(kind) if done.returncode == 0 else None


def own_cgroups() -> dict[str, str]:
    """controller (``memory``, ``pids``; ``""`` for v2) -> this process's cgroup path."""
    found = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            found[name] = path
    return found


def _cgroup_v2() -> Limiter | None:
    """cgroup v2, where this process's group lets it make children with memory and pids."""
    parent = _folder_of("cgroup2", "", own_cgroups().get(""))
    if parent is None:
        return None
    return Limiter("cgroup v2", (str(parent),)) if _can_make_child(parent, v2=True) else None


def _cgroup_v1() -> Limiter | None:
    """cgroup v1, where this process's memory and pids groups let it make children."""
    own = own_cgroups()
    roots = [_folder_of("cgroup", name, own.get(name)) for name in ("memory", "pids")]
    if None in roots or not all(_can_make_child(root, v2=False) for root in roots):
        return None
    return Limiter("cgroup v1", tuple(map(str, roots)))


def _folder_of(fstype: str, controller: str, path: str | None) -> Path | None:
    """The folder of cgroup ``path`` where its hierarchy (``fstype``, and for v1 the mount
    that carries ``controller``) is mounted, from /proc/self/mountinfo; None if not mounted."""
    if path is None:
        return None
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        mount, _, rest = line.partition(" - ")
        kind, _, options = (rest.split() + ["", ""])[:3]
        if kind != fstype or (controller and controller not in options.split(",")):
            continue
        root, point = mount.split()[3:5]
        inside = path[len(root) :] if path.startswith(root) and root != "/" else path
        folder = Path(point) / inside.lstrip("/")
        return folder if folder.is_dir() else None
    return None


def _can_make_child(parent: Path, v2: bool) -> bool:
    """Whether a child group can be made (and removed) in ``parent``, with memory and pids on
    for it (v2: listed in, or added to, the parent's ``cgroup.subtree_control``)."""
    if v2:
        control = parent / "cgroup.subtree_control"
        try:
            if not {"memory", "pids"} <= set(control.read_text().split()):
                control.write_text("+memory +pids")
        except OSError:
            return False
    probe = parent / f"{PREFIX}probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError:
        return False
    return True
