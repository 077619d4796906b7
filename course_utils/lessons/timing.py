"""Honest timings for lesson 13: warm-up calls first, then the candidates alternated round by
round, each reported as its median and its range.

One timed call is not a measurement: the first call pays for kernel selection and cold caches,
and on a shared machine any call may lose the CPU to another program. Alternating the candidates
spreads such disturbances over all of them alike, and the median ignores the outliers that
remain; the range says how noisy the machine was.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Timing:
    """The timed runs of one candidate, in seconds, in the order they ran."""

    runs: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    @property
    def low(self) -> float:
        return min(self.runs)

    @property
    def high(self) -> float:
        return max(self.runs)

    @property
    def spread(self) -> float:
        """The slowest run over the fastest: 1.0 on a quiet machine, far more on a busy one."""
        return self.high / self.low if self.low > 0 else float("inf")

    def __str__(self) -> str:
        return (
            f"median {1e3 * self.median:.2f} ms, range {1e3 * self.low:.2f}-"
            f"{1e3 * self.high:.2f} ms"
        )


def time_alternating(
    candidates: Mapping[str, Callable[[], object]],
    rounds: int = 5,
    warmup: int = 1,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, Timing]:
    """Call every candidate ``warmup`` times untimed, then ``rounds`` times each, one call of each
    per round in the given order, and return each one's :class:`Timing`. ``clock`` returns
    seconds (a fake clock makes the harness testable)."""
    if not candidates:
        raise ValueError("time_alternating needs at least one candidate to time")
    if rounds < 1 or warmup < 0:
        raise ValueError(f"rounds must be >= 1 and warmup >= 0, got {rounds} and {warmup}")
    for _ in range(warmup):
        for fn in candidates.values():
            fn()
    runs: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(rounds):
        for name, fn in candidates.items():
            start = clock()
            fn()
            runs[name].append(clock() - start)
    return {name: Timing(tuple(times)) for name, times in runs.items()}


def speedup(reference: Timing, other: Timing) -> float:
    """How many times faster ``other`` runs than ``reference``, median against median."""
    return reference.median / other.median
