"""Worker processes for grading: one per hand-in, with a wall-time limit, and nothing left
running afterwards.

Workers are forked from a multiprocessing forkserver that imported nbgrader once, which saves
seconds per hand-in; the forkserver shares nothing else with the parent (which has threads).
A worker dies with the forkserver, which dies with the grader, so ``kill -9`` of the grader
leaves no worker behind; a sandboxed kernel dies with its worker (bwrap's --die-with-parent).
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import signal
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

MARKER_ENV = "COURSE_UTILS_GRADING_RUN"  # tags every process a worker starts, to kill leftovers
WORKER_PRELOAD = ["course_utils.tools.autograde", "nbgrader.converters", "nbgrader.api"]
PR_SET_PDEATHSIG = 1
_RUNNING: set[multiprocessing.process.BaseProcess] = set()  # live workers, killed on Ctrl-C


def worker_context():
    """The forkserver context, preloaded with nbgrader: a worker starts in milliseconds.
    (Spawn where there is no forkserver: slower, the same otherwise.)"""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(WORKER_PRELOAD)
    return context


def run_with_limit(target: Callable, args: tuple, workdir: Path, limit: float) -> int | None:
    """Run ``target(*args)`` in a worker process; its exit code (negative: killed by that
    signal), or None when it ran past ``limit`` seconds.

    Either way every process it started (the kernel, anything the notebook spawned) is killed
    afterwards: its descendants, and any process carrying its environment marker."""
    marker = uuid.uuid4().hex
    proc = worker_context().Process(
        target=_in_worker, args=(target, args, workdir, marker, os.getpid())
    )
    proc.start()
    _RUNNING.add(proc)
    try:
        proc.join(limit)
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


def kill_processes(proc: multiprocessing.process.BaseProcess, marker: str) -> None:
    """Kill the worker, its descendants and any process carrying its marker, then reap it."""
    import psutil

    victims = []
    if proc.is_alive():  # not reaped yet, so its pid cannot belong to another process
        try:
            victims += psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            pass
    for candidate in psutil.process_iter():
        try:
            if candidate.pid != os.getpid() and candidate.environ().get(MARKER_ENV) == marker:
                victims.append(candidate)
        except psutil.Error:
            continue
    if proc.is_alive():
        proc.kill()
    for victim in victims:
        try:
            victim.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(victims, timeout=5)
    proc.join()


def last_lines(path: Path, count: int) -> str:
    """The last ``count`` lines of a log, joined with `` | `` ("" if it cannot be read)."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(lines[-count:])
