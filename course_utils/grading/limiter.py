"""A hand-in's totals: the memory and the number of processes (tasks) of all it runs together,
held by a cgroup of its own, which the kernel enforces.

Found once per run, first that works: ``systemd-run --scope`` (``--user`` when not root) where a
systemd manager answers; else the cgroup filesystem where the grader may make its own child
groups (v2: ``memory.max`` and ``pids.max``; v1: the ``memory`` and ``pids`` hierarchies); else
none, and only the per-process caps hold (the grader's first line says so, and why). Each
hand-in's kernel joins its group before it starts (``systemd-run``'s prefix, or the shell that
starts bwrap writing its own pid into ``cgroup.procs``); the group is removed after the grading,
and groups left by a grader that was killed are removed when the next one starts.

cgroup v2 has two rules v1 has not, both met here: a group with processes in it cannot hand
controllers to children (the grader moves the processes of its own group into a leaf group
first, as container runtimes do), and a systemd user manager caps only what it was delegated
(the probe reads the caps back from inside its scope; a user manager without the memory
controller is named in one line, and the next way is tried).
"""

from __future__ import annotations

import errno
import functools
import os
import re
import shlex
import shutil
import signal
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_TASKS = 256  # processes and threads of one hand-in (a kernel with torch uses ~30)
PREFIX = "course-grade-"
LEAF = f"{PREFIX}leaf"  # cgroup v2: where the grader's own group's processes move (see above)
STALE = re.compile(rf"{re.escape(PREFIX)}(?:probe-)?(\d+)-")  # a group made by grader PID


@dataclass(frozen=True)
class Limiter:
    """How hand-ins' totals are held: ``kind`` names it ("" for none), ``roots`` are the cgroup
    folders (one per hierarchy) the hand-ins' groups are made in."""

    kind: str = ""
    roots: tuple[str, ...] = ()
    why: str = ""  # for none, or a way that was refused: what a probe found, in one line

    def describe(self) -> str:
        return self.kind or "none"


@dataclass(frozen=True)
class Group:
    """One hand-in's cgroup: the command prefix that starts a process in it (systemd-run), the
    ``cgroup.procs`` files its first process writes its pid to, and the folders to remove."""

    prefix: list[str] = field(default_factory=list)
    procs: list[str] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)
    unit: str = ""  # systemd-run: the scope's unit name (``--user`` scopes start "--user ")

    def enter(self) -> str:
        """Shell code that moves the shell itself (and so all it starts) into the group."""
        return "".join(f"echo $$ > {shlex.quote(p)} && " for p in self.procs)


@functools.cache
def find_limiter() -> Limiter:
    """The limiter this machine offers (systemd-run, cgroup v2, cgroup v1), or none; a way
    that ran but could not cap is named in ``why``."""
    why = ""
    for probe in (_systemd, _cgroup_v2, _cgroup_v1):
        found = probe()
        if found is not None and found.kind:
            for root in found.roots:
                remove_stale_groups(Path(root))
            return Limiter(found.kind, found.roots, why)
        why = why or (found.why if found is not None else "")
    return Limiter(why=why)


def remove_stale_groups(root: Path) -> None:
    """Remove the groups in ``root`` that a grader made and did not remove (``kill -9``): its
    process is gone. What is still in one is a dead grading's and is killed."""
    for folder in root.glob(f"{PREFIX}*"):
        match = STALE.match(folder.name)
        if not match or not folder.is_dir():
            continue
        try:
            os.kill(int(match.group(1)), 0)
        except ProcessLookupError:
            remove_group(Group(folders=[str(folder)]))
        except PermissionError:  # alive, someone else's
            pass


def make_group(limiter: Limiter, memory: int, tasks: int) -> Group:
    """A new group for one hand-in: ``memory`` bytes and ``tasks`` processes in all."""
    if limiter.kind.startswith("systemd-run"):
        user = ["--user"] if limiter.kind.endswith("--user") else []
        props = [f"MemoryMax={memory}", "MemorySwapMax=0", f"TasksMax={tasks}"]
        options = [o for p in props for o in ("-p", p)]
        # named, and not --collect: a scope the OOM killer ended stays loaded, "failed" with
        # Result=oom-kill, until remove_group has read it (oom_kills) and reset it
        unit = f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}.scope"
        prefix = ["systemd-run", *user, "--scope", "--quiet", f"--unit={unit}", *options, "--"]
        return Group(prefix, unit=" ".join([*user, unit]))
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


def oom_kills(group: Group) -> int | None:
    """How many of the group's processes the kernel's out-of-memory killer killed, from the
    kernel's own count: cgroup v2's ``memory.events`` (``oom_kill``, ``oom_group_kill``), v1's
    ``memory.oom_control`` (``oom_kill``, Linux 4.13 on; before it ``memory.failcnt``, the times
    the group hit its cap), a systemd scope's cgroup or its ``Result=oom-kill``. None where the
    group has no count to read: no limiter, or the group is already removed. Read it before
    :func:`remove_group`."""
    if group.unit:
        return _scope_oom_kills(group.unit.split())
    counts = [n for n in map(folder_oom_kills, map(Path, group.folders)) if n is not None]
    return sum(counts) if counts else None


def folder_oom_kills(folder: Path) -> int | None:
    """The OOM kills a cgroup folder (v2, or v1's memory hierarchy) counts; None if none does."""
    for name in ("memory.events", "memory.oom_control"):
        counts = _keyed_counts(folder / name)
        if "oom_kill" in counts or "oom_group_kill" in counts:
            return max(counts.get("oom_kill", 0), counts.get("oom_group_kill", 0))
    try:
        return int((folder / "memory.failcnt").read_text())
    except (OSError, ValueError):
        return None


def _keyed_counts(path: Path) -> dict[str, int]:
    """A cgroup file of ``key value`` lines as numbers ({} if it cannot be read)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    pairs = (line.split() for line in lines)
    return {p[0]: int(p[1]) for p in pairs if len(p) == 2 and p[1].isdigit()}


def _scope_oom_kills(unit: list[str]) -> int | None:
    """A systemd scope's OOM kills: its cgroup's count while it has one, else 1 for a scope
    that ended with ``Result=oom-kill`` and 0 for one that ended otherwise (systemd unloads a
    scope that did not fail)."""
    show = ["systemctl", *unit[:-1], "show", unit[-1], "--property=LoadState,Result,ControlGroup"]
    try:
        done = subprocess.run(show, capture_output=True, text=True, timeout=PROBE_SECONDS)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    props = dict(line.partition("=")[::2] for line in done.stdout.splitlines())
    if props.get("LoadState") != "loaded":
        return 0
    path = props.get("ControlGroup") or None
    folders = [_folder_of("cgroup2", "", path), _folder_of("cgroup", "memory", path)]
    counted = [n for n in (folder_oom_kills(f) for f in folders if f) if n is not None]
    if counted and max(counted) > 0:
        return max(counted)
    return 1 if props.get("Result") == "oom-kill" else 0


def remove_group(group: Group) -> None:
    """Kill whatever is still in the group, then remove its folders (a few tries while the
    kernel reaps the killed); a systemd scope that failed is reset, which unloads it."""
    if group.unit:
        *user, unit = group.unit.split()
        reset = ["systemctl", *user, "reset-failed", unit]
        try:
            subprocess.run(reset, capture_output=True, timeout=PROBE_SECONDS)
        except (OSError, subprocess.SubprocessError):  # gone already, or no systemctl
            pass
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


PROBE_SECONDS = 60  # a scope starts in well under a second; an emulated VM takes longer


def _systemd() -> Limiter | None:
    """systemd-run, if a manager answers and starts a scope whose caps the kernel holds (a
    user manager that was not delegated a controller accepts its cap and holds nothing)."""
    if not shutil.which("systemd-run"):
        return None
    kind = "systemd-run" if os.geteuid() == 0 else "systemd-run --user"
    memory, tasks = 2**30, 16
    group = make_group(Limiter(kind), memory, tasks)
    # the scope's shell says which groups it is in, then waits while they are read from here
    script = "cat /proc/self/cgroup && echo . && read _"
    try:
        shell = subprocess.Popen([*group.prefix, "/bin/sh", "-c", script], text=True,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL)  # fmt: skip
    except OSError:
        return None
    timer = threading.Timer(PROBE_SECONDS, shell.kill)
    timer.start()
    try:
        text = ""
        while (line := shell.stdout.readline()) not in ("", ".\n"):  # "": it ended, no scope
            text += line
        started = line == ".\n"
        found = caps_of(text) if started else {}  # while the shell waits: its scope is there
        shell.stdin.close()
        shell.wait()
    except OSError:
        return None
    finally:
        timer.cancel()
        shell.kill()
    if not started:
        return None  # no manager answered
    missing = [c for c, cap in (("memory", memory), ("pids", tasks)) if found.get(c) != str(cap)]
    if missing:
        manager = "systemd's user manager" if "--user" in kind else "systemd"
        controllers = f"{' and '.join(missing)} controller{'s' * (len(missing) > 1)}"
        why = f"{kind} runs but cannot cap here ({manager} does not delegate the {controllers})"
        return Limiter(why=why)
    return Limiter(kind)


def caps_of(cgroup: str) -> dict[str, str]:
    """``memory`` and ``pids`` -> the caps the kernel holds for the groups named in ``cgroup``
    (a /proc/PID/cgroup text), as its files read; a missing file is left out."""
    own = own_cgroups(cgroup)
    if "" in own and "memory" not in own:  # cgroup v2 only
        folder = _folder_of("cgroup2", "", own[""])
        files = {"memory": folder / "memory.max", "pids": folder / "pids.max"} if folder else {}
    else:
        memory = _folder_of("cgroup", "memory", own.get("memory"))
        pids = _folder_of("cgroup", "pids", own.get("pids"))
        files = {"memory": memory / "memory.limit_in_bytes" if memory else None,
                 "pids": pids / "pids.max" if pids else None}  # fmt: skip
    found = {}
    for name, file in files.items():
        try:
            found[name] = file.read_text().strip()
        except (OSError, AttributeError):
            pass
    return found


def own_cgroups(text: str | None = None) -> dict[str, str]:
    """controller (``memory``, ``pids``; ``""`` for v2) -> this process's cgroup path (or
    those of ``text``, another process's /proc/PID/cgroup)."""
    found = {}
    text = Path("/proc/self/cgroup").read_text() if text is None else text
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            found[name] = path
    return found


def _cgroup_v2() -> Limiter | None:
    """cgroup v2, where this process's group lets it make children with memory and pids."""
    own = own_cgroups()
    if "memory" in own:  # hybrid: memory is a v1 controller here
        return None
    parent = _folder_of("cgroup2", "", own.get(""))
    if parent is not None and parent.name == LEAF:  # moved there by an earlier grader
        parent = parent.parent
    if parent is None or not _hand_down(parent):
        return None
    return Limiter("cgroup v2", (str(parent),)) if _can_make_child(parent, v2=True) else None


def _hand_down(parent: Path) -> bool:
    """Whether ``parent`` hands memory and pids to its children, turning them on if it may.
    A group with processes in it may not (EBUSY): they move to the leaf group ``LEAF`` first."""
    control = parent / "cgroup.subtree_control"
    try:
        if {"memory", "pids"} <= set(control.read_text().split()):
            return True
        control.write_text("+memory +pids")
        return True
    except OSError as exc:
        if exc.errno != errno.EBUSY:
            return False
    try:
        (parent / LEAF).mkdir(exist_ok=True)
        for pid in (parent / "cgroup.procs").read_text().split():
            with _quiet():  # one that exited meanwhile
                (parent / LEAF / "cgroup.procs").write_text(pid)
        control.write_text("+memory +pids")
    except OSError:
        return False
    return True


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
    for it (v2: listed in the parent's ``cgroup.subtree_control``)."""
    if v2:
        try:
            if not {"memory", "pids"} <= set(
                (parent / "cgroup.subtree_control").read_text().split()
            ):
                return False
        except OSError:
            return False
    probe = parent / f"{PREFIX}probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError:
        return False
    return True
