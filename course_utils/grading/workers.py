"""Worker processes for grading: one per hand-in, with a wall-time limit, and nothing left
running afterwards.

Workers are forked from a multiprocessing forkserver that imported nbgrader once, so no hand-in
waits for that import; the forkserver shares nothing else with the parent (which has threads).
A worker dies with the forkserver, which dies with the grader, so ``kill -9`` of the grader
leaves no worker behind; a sandboxed kernel dies with its worker (bwrap's --die-with-parent).
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import shutil
import signal
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

MARKER_ENV = "COURSE_UTILS_GRADING_RUN"  # tags every process a worker starts, to kill leftovers
WORKER_PRELOAD = ["course_utils.grading.autograde", "nbgrader.converters", "nbgrader.api"]
PR_SET_PDEATHSIG = 1
POLL_SECONDS = 0.02  # how often a DiskWatch measures its folder
MAX_FILES = 10_000  # entries a hand-in's folder may hold (a million empty files fill a disk too)
_RUNNING: set[multiprocessing.process.BaseProcess] = set()  # live workers, killed on Ctrl-C


def worker_context():
    """The forkserver context, preloaded with nbgrader: a worker starts in milliseconds.
    (Spawn where there is no forkserver: slower, the same otherwise.)"""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(WORKER_PRELOAD)
    return context


class DiskWatch:
    """A cap on what one hand-in leaves on the host's disk: everything under ``folder`` (its
    worker's folder: the kernel's runtime folder, nbgrader's copies of the notebook).

    Past ``limit`` bytes or MAX_FILES entries, the hand-in's kernel and everything it started
    are killed and the files in ``kernel_folders`` removed (its grading stops there: the cells
    it did not run score 0); if the folder is still over the cap, the worker is killed too.
    ``stopped`` then says why, for the row."""

    def __init__(self, folder: Path, limit: int, kernel_folders: list[Path]) -> None:
        self.folder, self.limit, self.kernel_folders = folder, limit, kernel_folders
        self.stopped = ""

    def check(self, proc: multiprocessing.process.BaseProcess, marker: str) -> None:
        used, entries = folder_usage(self.folder, self.limit, MAX_FILES)
        if used <= self.limit and entries <= MAX_FILES:
            return
        if self.stopped:  # the kernel's files are gone and it is still over: the worker's own
            proc.kill()
            return
        kill_processes(proc, marker, keep_worker=True)
        what = f"{self.limit / 2**20:g} MiB" if used > self.limit else f"{MAX_FILES:,} files"
        self.stopped = (
            f"stopped: it wrote more than {what} to the grading machine's disk (the cap on all "
            "a hand-in leaves there); its files were removed"
        )
        for folder in self.kernel_folders:
            for entry in folder.glob("*/*") if folder.is_dir() else []:
                remove(entry)


def folder_usage(folder: Path, byte_limit: int, entry_limit: int) -> tuple[int, int]:
    """(bytes, entries) under ``folder``, links not followed, counting each file by the larger
    of its size and its blocks on disk; the walk stops once past either limit."""
    used, entries, todo = 0, 0, [folder]
    while todo and used <= byte_limit and entries <= entry_limit:
        try:
            with os.scandir(todo.pop()) as scan:
                for entry in scan:
                    info = entry.stat(follow_symlinks=False)
                    used += max(info.st_size, info.st_blocks * 512)
                    entries += 1
                    if entry.is_dir(follow_symlinks=False):
                        todo.append(entry.path)
        except OSError:  # a file that went away while it was counted
            continue
    return used, entries


def remove(path: Path) -> None:
    """Remove a file or a folder and what it holds, whatever it is (a link is not followed)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def run_with_limit(
    target: Callable, args: tuple, workdir: Path, limit: float, watch: DiskWatch | None = None
) -> int | None:
    """Run ``target(*args)`` in a worker process; its exit code (negative: killed by that
    signal), or None when it ran past ``limit`` seconds. A ``watch`` measures the worker's
    folder every POLL_SECONDS while it runs and stops it past its cap.

    Either way every process it started (the kernel, anything the notebook spawned) is killed
    afterwards: its descendants, and any process carrying its environment marker."""
    marker = uuid.uuid4().hex
    proc = worker_context().Process(
        target=_in_worker, args=(target, args, workdir, marker, os.getpid())
    )
    proc.start()
    _RUNNING.add(proc)
    try:
        deadline = time.monotonic() + limit
        while proc.exitcode is None and (left := deadline - time.monotonic()) > 0:
            proc.join(min(left, POLL_SECONDS) if watch else left)
            if watch and proc.exitcode is None:
                watch.check(proc, marker)
        return proc.exitcode
    finally:
        _RUNNING.discard(proc)
        kill_processes(proc, marker)


def kill_running() -> None:
    """Kill every live worker now (Ctrl-C in the parent)."""
    for proc in list(_RUNNING):
        proc.kill()


def _die_with_parent(grader: int) -> None:
    """Ask Linux to SIGKILL this process when its parent (the forkserver, which exits with the
    grader) exits, and exit now if the grader is already gone (it died before this call)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
    try:
        os.kill(grader, 0)
    except ProcessLookupError:
        os._exit(1)
    except PermissionError:
        pass


def _in_worker(target: Callable, args: tuple, workdir: Path, marker: str, grader: int) -> None:
    """Worker side of run_with_limit: die with the grader, work in ``workdir``, log to its
    worker.log, mark the environment the kernel inherits, then run the target."""
    _die_with_parent(grader)
    os.chdir(workdir)
    log = os.open(workdir / "worker.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.environ[MARKER_ENV] = marker
    logging.basicConfig(level=logging.INFO, format="%(relativeCreated)6d ms %(name)s: %(message)s")
    target(*args)


def kill_processes(
    proc: multiprocessing.process.BaseProcess, marker: str, keep_worker: bool = False
) -> None:
    """Kill the worker, its descendants and any process carrying its marker, then reap it;
    with ``keep_worker``, everything but the worker itself (its kernel and what that started)."""
    import psutil

    victims = []
    if proc.is_alive():  # not reaped yet, so its pid cannot belong to another process
        try:
            victims += psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            pass
        if not keep_worker:
            proc.kill()
    _kill(victims)  # at once: a hand-in may be filling the disk
    spared = {os.getpid(), proc.pid} if keep_worker else {os.getpid()}
    marked = []
    for candidate in psutil.process_iter():
        try:
            if candidate.pid not in spared and candidate.environ().get(MARKER_ENV) == marker:
                marked.append(candidate)
        except psutil.Error:
            continue
    _kill(marked)
    psutil.wait_procs(victims + marked, timeout=5)
    if not keep_worker:
        proc.join()


def _kill(processes: list) -> None:
    import psutil

    for process in processes:
        try:
            process.kill()
        except psutil.Error:
            pass


def last_lines(path: Path, count: int) -> str:
    """The last ``count`` lines of a log, joined with `` | `` ("" if it cannot be read)."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(lines[-count:])
