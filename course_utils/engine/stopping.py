"""When a run stops: one function decides, and Ctrl-C waits for the step in flight to end.

:func:`stop_reason` names why the run ends after an update (its steps done, its time budget
spent, an evaluation's ``stop_when``, a Ctrl-C, or the test hook ``stop_after``), or None.
:class:`DeferredInterrupt` turns SIGINT into a flag read between updates, so an interrupted run
stops at a step boundary, with weights, optimizer and RNG state consistent, and saves there.
"""

from __future__ import annotations

import signal
import threading


def stop_reason(
    step: int,
    config,
    *,
    spent: float,
    early: bool = False,
    interrupted: bool = False,
    stop_after: int | None = None,
) -> str | None:
    """Why the run stops after ``step`` updates, or None to go on. ``steps`` and ``time_budget``
    end it as planned; ``stop_when`` and ``interrupted`` end it early; ``stop_after`` ends it as
    a crash would (the engine then writes no final checkpoint)."""
    if step >= config.steps:
        return "steps"
    if config.time_budget is not None and spent >= config.time_budget:
        return "time_budget"
    if early:
        return "stop_when"
    if interrupted:
        return "interrupted"
    if stop_after is not None and step >= stop_after:
        return "stop_after"
    return None


class DeferredInterrupt:
    """Within the block, SIGINT (Ctrl-C) sets :attr:`requested` instead of raising at once; a
    second one raises as usual. Outside the main thread (where Python delivers no signals) it
    does nothing."""

    def __init__(self) -> None:
        self.requested = False
        self._previous = None

    def _handle(self, signum, frame) -> None:
        if self.requested:  # a second Ctrl-C: the user means it
            raise KeyboardInterrupt
        self.requested = True

    def __enter__(self) -> DeferredInterrupt:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None
