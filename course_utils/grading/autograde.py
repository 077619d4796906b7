"""The worker side of grading: one hand-in (or the solution's reference run) through nbgrader's
autograder, with its kernel in a sandbox.

Autograde restores edited or deleted locked and test cells and puts the hidden tests back
(OverwriteKernelspec, OverwriteCells), clears outputs, cuts the expected values out of the test
cells (StripExpected, see :mod:`.verify`), executes with a per-cell timeout that interrupts the
kernel and carries on (SandboxedExecute), limits the output and saves the scores. The kernel
starts in an empty folder: it never sees the notebook file, whose restored cells hold the
hidden tests.
"""

from __future__ import annotations

import builtins
import json
import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import nbformat
import zmq
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import run_sync
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Dict, Integer, Unicode

from ..engine.io import atomic_write_text
from ..lessons import recording
from . import outcomes
from . import sandbox as sandboxes
from .cells import parse_cell
from .forbidden import forbidden_uses
from .gradebook import ERROR, GRADED, MAX_MESSAGE_CHARS, WRONG_LAB, one_line, truncate
from .limiter import Group, oom_kills
from .outcomes import (
    INSTRUCTOR,
    LIMIT_KINDS,
    MEMORY,
    OUTPUT,
    PASSED,
    TASKS,
    TIME,
    entry,
    set_message,
)
from .repair import repair
from .submissions import load_submission, wrong_lab_reason
from .verify import cell_records, check_aliases, strip_expected

IOPUB_TIMEOUT = 10  # seconds to wait for a cell's last output after its reply
EXIT_WAIT = 5  # seconds to wait for a dead kernel's exit code (was it SIGKILL?)
# seconds for a kernel to start: importing torch in two kernels at once on a busy 2-core box
# took over nbclient's default 60 (CI)
KERNEL_STARTUP_TIMEOUT = 240
MAX_CELL_OUTPUT = 2_000_000  # bytes of output kept per cell; the rest is dropped
MAX_CELL_RECORDS = 16_000_000  # bytes of check records kept per cell, counted apart
# ... and in the whole notebook, which nbgrader writes to the host's disk
MAX_TOTAL_OUTPUT = 16_000_000
MAX_TOTAL_RECORDS = 64_000_000
MAX_MESSAGE_BYTES = 64 * 2**20  # a kernel message larger than this disconnects the kernel
KERNEL_NAME = "course-grading"
STUDENT = "student"  # the id inside each worker's private course directory
KERNEL_DIED = "KernelDied"  # ename of the error put on cells the kernel did not live to run
# What happened, recorded by the executor where it happened (one JSON line each in the flags
# folder's EVENTS): {"what": one of these, "cell": its index, "limit": a kind of limit or "", ...}
EVENTS = "events.jsonl"
TIMED_OUT = "timed out"  # a cell past --timeout: "seconds", "ignored" (ran on after the interrupt)
DIED = "kernel died"  # "why"; memory: "oom_kills" (the cgroup's count) or "probably" (SIGKILL)
OUTPUT_CUT = "output cut"
PROCESSES_KILLED = "processes killed"  # by the OOM killer, the kernel alive: "oom_kills"

# What the usual nbgrader failures mean, put before their error line in the reason column.
FAILURE_HINTS = {
    "DeadKernelError": "the kernel died (the notebook exited, crashed or ran out of memory): ",
    "CellTimeoutError": "a cell ran on after its timeout, ignoring the interrupt: ",
}
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
MAX_WRITE_CHARS = 1_000_000  # one print's text that reaches the grader; more is cut in the kernel

# Run in each graded kernel before the hand-in: its stdout and stderr cut every write to
# MAX_WRITE_CHARS and send what piles up once that much is pending. ipykernel sends a cell's
# output as one message, and a message over MAX_MESSAGE_BYTES disconnects the kernel: without
# this, print("x" * 100_000_000) in a solved lab "killed the kernel" and cost every mark. The
# streams' class is swapped for a subclass whose ``write`` is a data descriptor: IPython sets
# ``stream.write`` around each cell (its output history), which would shadow a plain method.
OUTPUT_CAP = f"""
def _grader_caps_output(limit={MAX_WRITE_CHARS}):
    import sys

    def capped(base):
        def write(self, text):
            size = len(text) if isinstance(text, str) else 0
            if size > limit:
                note = f"[the grader cut this output: {{size - limit:,}} more characters]"
                text = text[:limit] + "\\n" + note + "\\n"
            written = base.write(self, text)
            self._grader_pending = getattr(self, "_grader_pending", 0) + min(size, limit)
            if self._grader_pending > limit:
                self._grader_pending = 0
                self.flush()
            return size if written is not None else written

        class Capped(base):
            # a data descriptor: IPython's per-cell `stream.write = ...` cannot shadow it
            write = property(lambda self: write.__get__(self), lambda self, value: None)

        Capped.__name__, Capped.__qualname__ = base.__name__, base.__qualname__
        return Capped

    for stream in (sys.stdout, sys.stderr):
        stream.__class__ = capped(type(stream))


_grader_caps_output()
del _grader_caps_output
"""


class StripExpected(NbGraderPreprocessor):
    """Cut every check's expected value out of the test cells, so that the answer key never
    reaches the hand-in's kernel; the grader compares the recorded values itself."""

    def preprocess(self, nb, resources):
        """Strip every graded test cell (the hidden tests are in them by now)."""
        aliases = check_aliases([c.source for c in nb.cells if c.cell_type == "code"])
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
                cell.source = strip_expected(cell.source, aliases)
        return nb, resources


class SandboxedExecute(Execute):
    """nbgrader's Execute, with the kernel in an empty folder, a cap on each cell's output, and
    a kernel that dies (or will not stop) costing only the cells it did not run."""

    kernel_cwd = Unicode("", help="the kernel's working directory").tag(config=True)
    flags = Unicode("", help="folder for what happened (EVENTS)").tag(config=True)
    group = Dict(help="the hand-in's limiter group (limiter.Group's fields)").tag(config=True)
    max_output_bytes = Integer(MAX_CELL_OUTPUT, help="output kept per cell").tag(config=True)

    async def async_start_new_kernel(self, **kwargs):
        if self.kernel_cwd:
            kwargs["cwd"] = self.kernel_cwd
        self.km.context.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
        return await super().async_start_new_kernel(**kwargs)

    async def async_start_new_kernel_client(self):
        """The kernel's client, with the message cap on its own zmq context (the one its
        channels' sockets come from: the cap on the kernel manager's does not reach them)."""
        make_client = self.km.client

        def capped_client(**kwargs):
            client = make_client(**kwargs)
            client.context.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
            return client

        self.km.client = capped_client
        try:
            return await super().async_start_new_kernel_client()
        finally:
            del self.km.client

    # nbclient binds its synchronous entry points to its own coroutines: rebind them to these
    start_new_kernel = run_sync(async_start_new_kernel)
    start_new_kernel_client = run_sync(async_start_new_kernel_client)

    def preprocess(self, nb, resources=None, km=None):
        self._output_bytes: dict[tuple[int, bool], int] = {}
        self._total_bytes = {False: 0, True: 0}  # outputs, check records
        self._running = -1
        self._timed_out: set[int] = set()  # the cells past their timeout
        self._memory: dict = {}  # how the kernel was killed for memory, read as it died
        try:
            return super().preprocess(nb, resources, km)
        except (DeadKernelError, CellTimeoutError) as exc:
            if self._running < 0:  # it never ran a cell: nbgrader reports the failure
                raise
            why = f"{type(exc).__name__}: {str(exc).strip()[:200]}"
            if isinstance(exc, CellTimeoutError) and self._running in self._timed_out:
                # it ran on after the timeout's interrupt (else: no output came after a reply)
                self._record(TIMED_OUT, TIME, seconds=self.timeout, ignored=True)
            memory = self._memory if isinstance(exc, DeadKernelError) else {}
            if memory.get("oom_kills"):
                why = f"killed by the out-of-memory killer at the hand-in's memory cap ({why})"
            elif memory:
                why = f"killed by SIGKILL, probably by the out-of-memory killer ({why})"
            self._record(DIED, MEMORY if memory else "", why=why, **memory)
            mark_unrun(nb, self._running, why)
            return nb, self.resources

    async def _async_handle_timeout(self, timeout, cell=None):
        """nbclient's handling of a cell past its timeout (interrupt, carry on), recorded."""
        self._record(TIMED_OUT, TIME, seconds=timeout)
        self._timed_out.add(self._running)
        return await super()._async_handle_timeout(timeout, cell)

    def _memory_kill(self) -> dict:
        """Whether the dead kernel was killed for memory: the OOM kills its limiter group
        counts; where it has none, a SIGKILL (as the OOM killer sends), marked "probably"."""
        kills = oom_kills(Group(**self.group)) if self.group else None
        if kills is not None:
            return {"oom_kills": kills} if kills else {}
        process = getattr(getattr(self.km, "provisioner", None), "process", None)
        try:  # the kernel, or bwrap: its heartbeat stops before it is reaped
            code = process.wait(timeout=EXIT_WAIT) if process is not None else None
        except subprocess.TimeoutExpired:
            code = None
        return {"probably": True} if code in (-9, 128 + 9) else {}

    def _record(self, what: str, limit: str = "", **detail) -> None:
        """Note what happened in the running cell, where it happened: a line in EVENTS."""
        if self.flags:
            event = {"what": what, "cell": self._running, "limit": limit, **detail}
            with open(Path(self.flags) / EVENTS, "a", encoding="utf-8") as file:
                file.write(json.dumps(event) + "\n")

    def preprocess_cell(self, cell, resources, index):
        self._running = index
        try:
            return super().preprocess_cell(cell, resources, index)
        except DeadKernelError:  # read now: nbclient lets the kernel's manager go after this
            self._memory = self._memory_kill()
            raise

    def output(self, outs, msg, display_id, cell_index):
        """Keep an output while its cell and the notebook are under their caps (check records
        have caps of their own)."""
        content = msg.get("content", {})
        is_record = recording.MIME in (content.get("data") or {})
        cap = MAX_CELL_RECORDS if is_record else self.max_output_bytes
        total_cap = MAX_TOTAL_RECORDS if is_record else MAX_TOTAL_OUTPUT
        key = (cell_index, is_record)  # check records have a budget of their own
        used, size = self._output_bytes.get(key, 0), _message_size(content)
        total = self._total_bytes[is_record]
        self._output_bytes[key] = used + size
        if used + size <= cap and total + size <= total_cap:
            self._total_bytes[is_record] = total + size
            return super().output(outs, msg, display_id, cell_index)
        if used <= cap and not is_record:  # the first output over a cap: say so, once
            self._output_bytes[key] = cap + 1
            self._record(OUTPUT_CUT, OUTPUT)
            whose = "of output" if used + size > cap else "of output in the whole notebook"
            limit = cap if used + size > cap else total_cap
            note = f"\n[the grader kept only the first {limit:,} bytes {whose}]\n"
            outs.append(nbformat.v4.new_output("stream", name="stdout", text=note))
        return None


def _message_size(content: dict) -> int:
    parts = [content.get("text", "")] + list(content.get("traceback", []) or [])
    data = content.get("data", {})
    parts += [v if isinstance(v, str) else json.dumps(v) for v in data.values()]
    return sum(len(p) for p in parts if isinstance(p, str))


def mark_unrun(nb, index: int, why: str) -> None:
    """After the kernel died (or would not stop) in cell ``index``: an error on that cell and on
    every later code cell, so that no test it did not run counts as passed."""
    for i, cell in enumerate(nb.cells):
        if i < index or cell.cell_type != "code":
            continue
        text = f"the kernel died here ({why})" if i == index else "not run: the kernel had died"
        error = nbformat.v4.new_output("error", ename=KERNEL_DIED, evalue=text, traceback=[text])
        cell.outputs = [*cell.get("outputs", []), error] if i == index else [error]


# ---------------------------------------------------------------------------------------------
# The kernel: where it runs and what it sees


def flags_folder(job: dict) -> Path:
    """Where the executor records what happened (EVENTS): the worker's own folder, out of the
    sandboxed kernel's reach."""
    folder = Path(job["workdir"]) / "flags"
    folder.mkdir(exist_ok=True)
    return folder


def read_events(folder: Path) -> list[dict]:
    """What the executor recorded in ``folder`` (EVENTS), in order; [] if nothing happened."""
    try:
        lines = (folder / EVENTS).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def kernel_environment(job: dict) -> dict[str, str]:
    """What every graded kernel gets, sandboxed or not: the checks' mode, a fixed hash seed (a
    re-run gives the same results), a non-interactive plot backend, its share of the threads."""
    threads = str(job.get("threads", 1))
    return {
        recording.MODE_ENV: job["mode"],
        "PYTHONHASHSEED": "0",
        "MPLBACKEND": "Agg",
        "OMP_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
        "OMP_WAIT_POLICY": "PASSIVE",
    }


def configure_kernel(config, job: dict) -> None:
    """Write this worker's kernel spec (bwrap around ipykernel, or ipykernel alone) and point
    Execute and the kernel manager at it."""
    home = Path(job["workdir"]) / "k"
    sandboxes.prepare_home(home)
    launch = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
              f"--IPKernelApp.exec_lines={OUTPUT_CAP}"]  # fmt: skip
    env = kernel_environment(job)
    spec = {"display_name": "graded hand-in", "language": "python"}
    if job.get("sandbox"):
        box = sandboxes.Sandbox(**job["sandbox"])
        argv = sandboxes.command_line(box, home, launch, env, Group(**job["group"]))
        spec |= {"argv": argv, "interrupt_mode": "message"}
        config.KernelManager.connection_file = str(home / "runtime" / "kernel.json")
        if not box.user:  # in bwrap there is no network: Unix sockets in its folder
            config.KernelManager.transport = "ipc"
            config.KernelManager.ip = str(home / "runtime" / "k")
    else:
        spec |= {"argv": launch, "env": env}
        config.KernelManager.connection_file = str(home / "runtime" / "kernel.json")
    kernels = Path(job["workdir"]) / "jupyter" / "kernels" / KERNEL_NAME
    kernels.mkdir(parents=True, exist_ok=True)
    (kernels / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
    os.environ["JUPYTER_PATH"] = str(Path(job["workdir"]) / "jupyter")
    os.environ["JUPYTER_RUNTIME_DIR"] = str(home / "runtime")
    os.environ["IPYTHONDIR"] = str(home / "home" / ".ipython")
    config.Execute.kernel_name = KERNEL_NAME
    config.SandboxedExecute.kernel_name = KERNEL_NAME
    config.SandboxedExecute.kernel_cwd = str(home / "work")
    config.SandboxedExecute.flags = str(flags_folder(job))
    config.SandboxedExecute.group = job.get("group") or {}
    config.SandboxedExecute.timeout = job["timeout"]
    config.SandboxedExecute.iopub_timeout = IOPUB_TIMEOUT
    config.SandboxedExecute.startup_timeout = KERNEL_STARTUP_TIMEOUT
    config.SandboxedExecute.shutdown_kernel = "immediate"


# ---------------------------------------------------------------------------------------------
# Worker entry points


def worker_process(workdir: str) -> None:
    """Do the job in ``workdir/job.json`` and write ``workdir/result.json``. If this raises, the
    worker exits with 1 and the parent reports the last line of its log."""
    job = json.loads((Path(workdir) / "job.json").read_text(encoding="utf-8"))
    result = (
        reference_in_worker(job) if job["mode"] == recording.REFERENCE else grade_in_worker(job)
    )
    atomic_write_text(Path(workdir) / "result.json", json.dumps(result))


def grade_in_worker(job: dict) -> dict:
    """Check the file is a notebook of this lab, repair it, autograde it, read what it did."""
    nb, status, reason = load_submission(Path(job["submission"]))
    if status:
        return {"status": status, "reason": reason}
    release = nbformat.read(job["release"], as_version=4)
    if reason := wrong_lab_reason(nb, release, job["lab"]):
        return {"status": WRONG_LAB, "reason": reason}
    nb, notes = repair(nb, release)
    uses = forbidden_uses(nb, job.get("forbidden", {}))
    db_url = f"sqlite:///{Path(job['workdir']) / 'gradebook.db'}"
    shutil.copyfile(job["db"], Path(job["workdir"]) / "gradebook.db")
    notes = restored_cells(nb, release, db_url, job["lab"]) + notes
    course = Path(job["workdir"]) / "course"
    submitted = course / "submitted" / STUDENT / job["lab"]
    submitted.mkdir(parents=True)
    nbformat.write(complete_kernelspec(nb), submitted / f"{job['lab']}.ipynb")
    if failure := autograde(course, db_url, job):
        return {"status": ERROR, "reason": failure}
    graded = nbformat.read(
        course / "autograded" / STUDENT / job["lab"] / f"{job['lab']}.ipynb", as_version=4
    )
    tests, hidden = test_cells(release), job.get("hidden", {})
    numbers = exercise_numbers(release)
    events = read_events(flags_folder(job))
    events += later_oom_kills(job, events)
    feedback, timeouts, records = read_feedback(
        graded, tests, job["timeout"], hidden, numbers, events
    )
    notes = kernel_notes(graded, events) + notes + process_kill_notes(events)
    if timeouts:
        notes.insert(0, f"timed out after {job['timeout']} s: {', '.join(timeouts)}")
    return {
        "status": GRADED,
        "reason": "; ".join(notes),
        "scores": read_scores(db_url, job["lab"]),
        "feedback": feedback,
        "records": records,
        "forbidden": uses,
        "limits": limits_hit(graded, events),
        "answers": answer_digests(nb, release),
    }


def answer_digests(nb, release) -> dict[str, str]:
    """answer grade_id -> a digest of its code's syntax tree (comments and layout left out),
    for each answer cell that is not the lab's stub: two hand-ins with the same digest hold the
    same answer, which the class summary names as a hint."""
    import ast
    import hashlib

    def digest(source: str) -> str:
        tree = parse_cell(source)
        text = ast.dump(tree) if tree else " ".join(source.split())
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    stubs = {c.metadata.get("nbgrader", {}).get("grade_id"): digest(c.source)
             for c in release.cells if c.cell_type == "code"}  # fmt: skip
    found = {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        answer = meta.get("grade_id")
        if cell.cell_type == "code" and meta.get("solution") and answer in stubs:
            mine = digest(cell.source)
            if mine != stubs[answer]:
                found[answer] = mine
    return found


def later_oom_kills(job: dict, events: list[dict]) -> list[dict]:
    """An event for the OOM kills the hand-in's group counts where no kernel death recorded
    them (a process it started, killed while its kernel lived on); read while the group is
    there (the grader removes it after the worker)."""
    if any(e["limit"] == MEMORY for e in events) or not job.get("group"):
        return []
    kills = oom_kills(Group(**job["group"]))
    return [{"what": PROCESSES_KILLED, "cell": -1, "limit": MEMORY, "oom_kills": kills}] * bool(
        kills
    )


def process_kill_notes(events: list[dict]) -> list[str]:
    """The reason's note on processes the out-of-memory killer ended, the kernel living on."""
    return [
        f"the out-of-memory killer ended {e['oom_kills']} of its processes at its memory cap"
        for e in events
        if e["what"] == PROCESSES_KILLED
    ]


def limits_hit(nb, events: list[dict]) -> list[str]:
    """The kinds of limit a graded notebook ran into: those the executor recorded where they
    happened (a cell past --timeout, the kernel or a process killed for memory, output cut),
    and a MemoryError (or torch's failed allocation) or a thread or process that could not
    start in a cell's error."""
    kinds = {e["limit"] for e in events} & set(LIMIT_KINDS)
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") != "error":
                continue
            name, value = str(output.get("ename", "")), str(output.get("evalue", ""))
            if name in ("MemoryError", "OutOfMemoryError") or "can't allocate memory" in value:
                kinds.add(MEMORY)
            if name == "BlockingIOError" or "can't start new thread" in value:
                kinds.add(TASKS)
    return sorted(kinds)


def reference_in_worker(job: dict) -> dict:
    """Run the solution with the checks in reference mode: every check must pass, and each
    test cell's records are what hand-ins are compared with."""
    from traitlets.config import Config

    nb = nbformat.read(job["solution"], as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        if _is_test(cell):
            cell.source = cell.source.replace(HIDDEN_BEGIN, HIDDEN_MARK, 1)
    config = Config()
    configure_kernel(config, job)
    executor = SandboxedExecute(config=config)
    executor.preprocess(nb, {"metadata": {"path": str(Path(job["workdir"]) / "k" / "work")}})
    tests = test_cells(nb)
    for index, cell in enumerate(nb.cells, start=1):
        message = (
            cell_message(cell, job["timeout"], graded=False) if cell.cell_type == "code" else ""
        )
        if message:
            where = cell.metadata.get("nbgrader", {}).get("grade_id") or f"cell {index}"
            return {"status": ERROR, "reason": f"the solution fails in {where}: {message}"}
    records = {
        c.metadata.nbgrader["grade_id"]: hidden_marked(cell_records(c))
        for c in nb.cells
        if _is_test(c)
    }
    slowest = max((cell_seconds(c) for c in nb.cells if c.cell_type == "code"), default=0.0)
    return {"status": GRADED, "records": records, "tests": tests, "slowest": slowest,
            "peak_bytes": peak_bytes()}  # fmt: skip


def peak_bytes() -> int:
    """The most memory this worker and its kernel (its largest child, reaped by now) held at
    once: their peak resident sizes added up."""
    import resource

    kernel = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    worker = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return (kernel + worker) * 1024  # Linux reports KiB


HIDDEN_BEGIN = "### BEGIN HIDDEN TESTS"
# In the solution's run only: where its hidden tests begin, a record that says so, so that each
# expected value knows whether a hidden check holds it (the solution is trusted; a hand-in's
# kernel is not asked).
HIDDEN_MARK = (
    '__import__("course_utils.lessons.recording", fromlist=["publish"])'
    '.publish({"hidden_from_here": True})'
)


def hidden_marked(records: list[dict]) -> list[dict]:
    """The solution's records of a test cell, each after the hidden-tests mark flagged
    ``"hidden": True``, the mark itself left out."""
    marked, hidden = [], False
    for record in records:
        if record.get("hidden_from_here") is True and "check" not in record:
            hidden = True
            continue
        marked.append({**record, "hidden": True} if hidden else record)
    return marked


def cell_seconds(cell) -> float:
    """How long a cell ran, from the timing nbclient records in its metadata (0 if none)."""
    from datetime import datetime

    timing = cell.get("metadata", {}).get("execution", {})
    try:
        start = datetime.fromisoformat(timing["iopub.execute_input"].replace("Z", "+00:00"))
        end = datetime.fromisoformat(timing["shell.execute_reply"].replace("Z", "+00:00"))
    except (KeyError, TypeError, ValueError):
        return 0.0
    return max((end - start).total_seconds(), 0.0)


def _is_test(cell) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return bool(meta.get("grade")) and not meta.get("solution") and cell.cell_type == "code"


def test_cells(nb) -> dict[str, float]:
    """grade_id -> points of the autograded test cells (grade cells that are not answers)."""
    return {c.metadata.nbgrader["grade_id"]: float(c.metadata.nbgrader.get("points", 0))
            for c in nb.cells if _is_test(c)}  # fmt: skip


def complete_kernelspec(nb):
    """Give the kernelspec a display_name when a hand-in lacks one.

    nbconvert validates the notebook after every nbgrader preprocessor, and the notebook schema
    requires a display_name whenever there is a kernelspec; without one nbgrader fails."""
    kernelspec = nb.metadata.get("kernelspec")
    if isinstance(kernelspec, dict) and "display_name" not in kernelspec:
        kernelspec["display_name"] = str(kernelspec.get("name", "python3"))
    return nb


def restored_cells(nb, release, db_url: str, lab: str) -> list[str]:
    """Notes naming the locked cells (tests, instructions) the student edited or deleted; nbgrader
    puts them back. A cell counts as edited when its checksum matches neither the lab's nor the
    solution's (the solution's test cells carry the hidden tests) nor the one it was handed out
    with (its own metadata's: after a test is fixed, the version the student got is not an
    edit)."""
    from nbgrader.api import Gradebook
    from nbgrader.utils import compute_checksum

    with Gradebook(db_url) as gb:
        source = {c.name: c.checksum for c in gb.find_notebook(lab, lab).source_cells}
    cells = {}
    for cell in nb.cells:
        cells.setdefault(cell.metadata.get("nbgrader", {}).get("grade_id"), cell)
    edited, deleted = [], []
    for cell in release.cells:
        meta = cell.metadata.get("nbgrader", {})
        if not meta.get("locked"):
            continue
        theirs = cells.get(meta["grade_id"])
        if theirs is None:
            deleted.append(meta["grade_id"])
            continue
        try:
            checksum = compute_checksum(theirs)
        except Exception:  # metadata mangled beyond checksumming: it was edited
            checksum = None
        handed_out = theirs.get("metadata", {}).get("nbgrader", {}).get("checksum")
        if checksum not in (meta.get("checksum"), source.get(meta["grade_id"]), handed_out):
            edited.append(meta["grade_id"])
    notes = [f"restored edited cells: {', '.join(edited)}"] * bool(edited)
    return notes + [f"restored deleted cells: {', '.join(deleted)}"] * bool(deleted)


def kernel_notes(nb, events: list[dict]) -> list[str]:
    """A note naming the cell the kernel died in, if it died (an event, not a cell's text)."""
    for event in events:
        if event["what"] == DIED and 0 <= event["cell"] < len(nb.cells):
            where = cell_name(nb.cells[event["cell"]], event["cell"])
            return [f"the kernel died in {where}; the cells after it did not run"]
    return []


def cell_name(cell, index: int) -> str:
    """A cell as the gradebook names it: its grade_id, else its place (``cell 3``)."""
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") or f"cell {index + 1}"


# ---------------------------------------------------------------------------------------------
# nbgrader


@contextmanager
def captured_log(logger: logging.Logger, quiet: bool = True) -> Iterator[list[logging.LogRecord]]:
    """Collect a logger's warnings and errors (nbgrader logs a failure's traceback, then raises a
    generic NbGraderException); ``quiet`` also keeps them off the console."""
    records: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Collect(level=logging.WARNING)
    old_level, old_propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    if quiet:
        logger.setLevel(logging.WARNING)
        logger.propagate = False
    try:
        yield records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
        logger.propagate = old_propagate


def failure_line(records: list[logging.LogRecord], exc: Exception) -> str:
    """The exception line of the last traceback nbgrader logged, else ``exc`` itself."""
    for record in reversed(records):
        message = record.getMessage()
        if message.startswith("Traceback (most recent call last)"):
            return exception_line(message)
    return f"{type(exc).__name__}: {exc}"


def exception_line(traceback_text: str) -> str:
    """``Name: message`` from a formatted traceback: the first unindented line after its last
    frame."""
    lines = ANSI.sub("", traceback_text).rstrip().splitlines()
    frames = [i for i, line in enumerate(lines) if line.startswith("  File ")]
    for line in lines[frames[-1] + 1 if frames else 0 :]:
        if line and not line.startswith(" "):
            return line
    return lines[-1] if lines else ""


def autograde(course: Path, db_url: str, job: dict) -> str:
    """Run nbgrader's Autograde converter on the one submission in ``course``: "" on success,
    else the error line."""
    from nbconvert.preprocessors import ClearMetadataPreprocessor
    from nbgrader.converters import Autograde
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.preprocessors import (
        AssignLatePenalties,
        CheckCellMetadata,
        IgnorePattern,
        LimitOutput,
        SaveAutoGrades,
    )
    from traitlets.config import Config

    config = Config()
    config.CourseDirectory.root = str(course)
    config.CourseDirectory.db_url = db_url
    config.CourseDirectory.assignment_id = job["lab"]
    config.CourseDirectory.student_id = STUDENT
    config.OverwriteCells.add_missing_cells = True  # deleted test cells come back, and run
    config.Autograde.autograde_preprocessors = [
        StripExpected, SandboxedExecute, IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
        SaveAutoGrades, AssignLatePenalties, CheckCellMetadata,
    ]  # fmt: skip
    configure_kernel(config, job)
    app = Autograde(coursedir=CourseDirectory(config=config), config=config)
    app.force = True
    app.create_student = True
    with captured_log(app.log, quiet=False) as records:  # the worker's log keeps them
        try:
            app.start()
        except Exception as exc:
            line = failure_line(records, exc)
            hint = next((h for name, h in FAILURE_HINTS.items() if name in line), "")
            return f"nbgrader could not grade it: {hint}{line}"
    return ""


def read_scores(db_url: str, lab: str) -> dict[str, float]:
    """The points autograde saved for each grade cell, from the worker's gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb:
        notebook = gb.find_submission_notebook(lab, lab, STUDENT)
        return {grade.name: float(grade.score or 0.0) for grade in notebook.grades}


def read_feedback(
    nb, tests: dict[str, float], timeout: int, hidden: dict[str, str] | None = None,
    numbers: dict[str, str] | None = None, events: list[dict] | None = None,
):  # fmt: skip
    """Per test cell: its message and (truncated) output, the problems of the cells run since the
    previous test (an answer that raised or timed out), and its check records. Also the cells
    that timed out. ``hidden``: test -> its cell as handed out, for each test cell with hidden
    tests, whose output and errors are the instructor's (:func:`hidden_cell_audience`).
    ``events``: what the executor recorded (EVENTS): which cell timed out, where the kernel
    died and why; the first test cell at or after each is given its ``limit`` (kind, cell)."""
    hidden = hidden or {}
    events = [e for e in events or [] if e.get("cell", -1) >= 0]
    feedback: dict[str, dict] = {}
    records: dict[str, list[dict]] = {}
    timeouts: list[str] = []
    before: list[str] = []
    pending: dict | None = None  # a limit hit since the previous test cell
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        name = cell_name(cell, index)
        timed_out = [e for e in events if e["cell"] == index and e["what"] == TIMED_OUT]
        died = any(e["what"] == DIED and e["cell"] <= index for e in events)
        message = cell_message(cell, timeout, graded=name in tests, timed_out=timed_out)
        timeouts += [name] * bool(timed_out)
        for event in events:
            if event["cell"] == index and event["limit"] in (TIME, MEMORY) and pending is None:
                pending = limit_field(event, name)
        if name in tests:
            output = truncate(output_text(cell))
            feedback[name] = entry(message or PASSED, output=output, before=before)
            if pending:
                feedback[name]["limit"], pending = pending, None
            if name in hidden:
                feedback[name]["output_audience"] = INSTRUCTOR
                if message:
                    exercise = (numbers or {}).get(name, ("", set()))
                    audience, shown = hidden_cell_audience(
                        cell, message, hidden[name], exercise, bool(timed_out), died
                    )
                    set_message(feedback[name], message, audience, shown)
            records[name] = cell_records(cell)
            before = []
        elif message:
            before.append(f"{name}: {message}")
    return feedback, timeouts, records


def limit_field(event: dict, name: str) -> dict:
    """A test's ``limit`` field: the kind of limit its exercise hit, in which cell, and how
    (the seconds of a timeout; a memory kill's OOM count, or "probably" without one)."""
    keep = ("seconds", "ignored", "oom_kills", "probably")
    return {"kind": event["limit"], "cell": name, **{k: event[k] for k in keep if k in event}}


def cell_message(cell, timeout: int, graded: bool, timed_out: list[dict] | None = None) -> str:
    """One line saying why a cell failed ("" if it did not): a timeout (``timed_out``: the
    executor's events for this cell, never an error's name, which a hand-in can choose), the
    CheckFailed text or a one-line traceback (a stub), the error's last line, or, in a test
    cell, stderr output (nbgrader scores it as a failure)."""
    outputs = cell.get("outputs", [])
    errors = [o for o in outputs if o.output_type == "error"]
    if timed_out:
        seconds = timed_out[0].get("seconds") or timeout
        if any(e.get("ignored") for e in timed_out):
            return f"timed out after {seconds} s, ran on when interrupted and was stopped"
        return f"timed out after {seconds} s and was interrupted"
    if errors:
        name, value = errors[0].get("ename", "Error"), str(errors[0].get("evalue", ""))
        traceback = [ANSI.sub("", line) for line in errors[0].get("traceback", [])]
        if name == "CheckFailed":
            return one_line(f"\u274c {value}", MAX_MESSAGE_CHARS)
        if len(traceback) == 1 and traceback[0].startswith("\u274c"):
            return one_line(traceback[0], MAX_MESSAGE_CHARS)
        return one_line(f"{name}: {value}" if value.strip() else name, MAX_MESSAGE_CHARS)
    stderr = [o.text for o in outputs if o.output_type == "stream" and o.name == "stderr"]
    if stderr and graded:
        first = next((line for line in "".join(stderr).splitlines() if line.strip()), "")
        return one_line(f"wrote to stderr, which counts as a failure: {first}", MAX_MESSAGE_CHARS)
    return ""


# The lab's own one-line notes for an unfinished exercise (lessons.checks): shown as they are
# when their exercise number is the test's and the name they give is one the visible checks read
STUB_NOTES = [
    re.compile(r"\u274c Exercise (?P<n>\d+) is not done yet: (?P<name>its answer cell|\w+) "
               r"still raises NotImplementedError"),
    re.compile(r"\u274c Exercise (?P<n>\d+) is not done yet: its answer cell still raises "
               r"NotImplementedError, so (?P<name>\w+) is not defined"),
    re.compile(r"\u274c (?P<name>\w+) is not defined: this exercise is not done yet, or a cell "
               r"above \(the setup cell, the answer cell\) has not been run"),
    re.compile(r"\u274c (?P<name>its answer cell|\w+) is not done yet: it still raises "
               r"NotImplementedError"),
]  # fmt: skip
EXERCISE = re.compile(r"^# Exercise (\d+)", re.MULTILINE)


def stub_note(message: str, handed_out: str, exercise: tuple[str, set] = ("", set())) -> bool:
    """Whether ``message`` is the lab's own note on an unfinished exercise, naming this
    exercise (``exercise``: its number and the functions its stubs define) and a name of its
    visible checks or stubs: nothing of a hidden test in it."""
    number, stubs = exercise
    for pattern in STUB_NOTES:
        found = pattern.fullmatch(message)
        if found:
            name, n = found.group("name"), found.groupdict().get("n")
            named = name == "its answer cell" or name in visible_names(handed_out) | stubs
            return named and (n is None or n == number)
    return False


def exercise_numbers(release) -> dict[str, tuple[str, set]]:
    """test grade_id -> the number of its exercise (the ``# Exercise N`` line that starts its
    answer cells in the lab as handed out) and the functions and classes those stubs define."""
    import ast

    found, number, stubs = {}, "", set()
    for cell in release.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("solution"):
            mark = EXERCISE.search(cell.source)
            number = mark.group(1) if mark else number
            tree = parse_cell(cell.source)
            if tree is None:
                continue
            defined = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
            stubs |= {n.name for n in ast.walk(tree) if isinstance(n, defined)}
        elif _is_test(cell):
            found[meta["grade_id"]], stubs = (number, stubs), set()
    return found


def hidden_cell_audience(
    cell, message: str, handed_out: str, exercise: tuple[str, set] = ("", set()),
    timed_out: bool = False, died: bool = False,
):  # fmt: skip
    """Who may read the failure ``message`` of a test cell with hidden tests, and what the
    student reads instead where it is the instructor's. The grader's own words on a timeout
    (``timed_out``, recorded where it happened) and a stub's note about a name of the visible
    checks are the student's; a dead kernel (``died``) is told in the grader's words; any other
    error or stderr line the hand-in's code wrote, whose text may hold a hidden input, is the
    instructor's."""
    errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    names = [str(e.get("ename", "")) for e in errors]
    if timed_out:
        return outcomes.STUDENT, ""  # the grader's text, whatever the hand-in named its errors
    if died:
        return INSTRUCTOR, "\u274c the kernel died while this exercise's tests ran"
    if stub_note(message, handed_out, exercise):
        return outcomes.STUDENT, ""
    ename = names[0] if names else ""
    what = ename if ename in BUILTIN_ERRORS else "an error"
    if not errors:
        what = "output on stderr (a failure)"
    return INSTRUCTOR, (
        f"\u274c {what} while this exercise's tests ran, hidden tests included (not shown "
        "here: run the exercise's checks in your notebook to see it)"
    )


# Error names a student may read: Python's own (a hand-in's class name could spell an input)
BUILTIN_ERRORS = {
    name for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
} | {"CheckFailed"}  # fmt: skip


def visible_names(source: str) -> set[str]:
    """The names the handed-out test cell reads (what a stub's note may name)."""
    import ast

    tree = parse_cell(source)
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} if tree else set()


def output_text(cell) -> str:
    """What a cell printed (streams and plain-text results, without colours). Not tracebacks:
    the message line says what failed, and a traceback would show the hidden tests' code."""
    parts = []
    for output in cell.get("outputs", []):
        if output.output_type == "stream":
            parts.append(output.text)
        elif output.output_type in ("execute_result", "display_data"):
            if "text/plain" in output.get("data", {}):
                parts.append(output["data"]["text/plain"] + "\n")
    return ANSI.sub("", "".join(parts)).rstrip("\n")
