"""The grader's settings: the limits, the sandbox and the rules each hand-in is graded with."""

from __future__ import annotations

from dataclasses import dataclass

from . import sandbox as sandboxes
from .outcomes import DISK, MEMORY, OUTPUT, TASKS, TIME

# The per-cell timeout, unless --timeout sets one: this many times the solution's slowest cell
# (measured by its reference run), and never under MIN_TIMEOUT seconds
TIMEOUT_FACTOR = 10
MIN_TIMEOUT = 30
DEFAULT_TOTAL_TIMEOUT = 1800  # seconds per submission, everything included


class UsageError(Exception):
    """A problem with the command line; ``main`` prints it on one line and exits with 2."""


@dataclass(frozen=True)
class Settings:
    """How each hand-in is graded: limits, the sandbox (None: unsandboxed), kernel threads."""

    timeout: int | None = None  # per cell; None: derived from the solution's run (derive)
    total_timeout: int = DEFAULT_TOTAL_TIMEOUT
    sandbox: sandboxes.Sandbox | None = None
    threads: int = 1
    host_bytes: int = sandboxes.MAX_HOST_BYTES  # what one hand-in may leave on the disk
    forbid_reference: bool = True  # an answer that uses a forbidden callable scores 0
    memory_needed: str = ""  # what the solution's run needs (Gradescope's bundle measures it)

    def key(self) -> dict:
        """What every cached result depends on: whether the hand-ins run sandboxed and the
        forbidden calls. Not --jobs, not the kernel's threads, not the limits: those decide
        only a hand-in that hit one (:meth:`limits`)."""
        sandboxed = self.sandbox is not None
        return {"sandboxed": sandboxed, "forbid_reference": self.forbid_reference}

    def limits(self) -> dict:
        """Each kind of limit (:mod:`.outcomes`) as set for this run: a result that hit one
        kind is graded again when that kind's setting changes (a timed-out hand-in may pass
        with a longer --timeout, one out of memory with a larger --memory)."""
        box = self.sandbox
        return {
            TIME: [self.timeout, self.total_timeout],
            MEMORY: [box.memory, box.limiter.kind] if box else None,
            TASKS: [box.tasks, box.limiter.kind] if box else None,
            DISK: self.host_bytes,
            OUTPUT: None,  # fixed caps: no option raises them
        }
