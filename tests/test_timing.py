"""The timing harness of lesson 13 on a fake clock: warm-up calls are not timed, candidates
alternate round by round, and each is reported by its median and range."""

import pytest

from course_utils.lessons.timing import Timing, speedup, time_alternating


class FakeClock:
    """A clock that only moves when a candidate runs: each call of a candidate advances it by
    that candidate's next scripted duration, and the calls are logged in order."""

    def __init__(self):
        self.now, self.calls = 0.0, []

    def __call__(self):
        return self.now

    def candidate(self, name, durations):
        durations = iter(durations)

        def run():
            self.calls.append(name)
            self.now += next(durations)

        return run


def test_warmup_is_untimed_rounds_alternate_and_the_median_ignores_an_outlier():
    clock = FakeClock()
    fns = {
        "a": clock.candidate("a", [9.0, 1.0, 1.25, 50.0]),  # a cold first call, then an outlier
        "b": clock.candidate("b", [7.0, 2.0, 2.25, 2.5]),
    }
    result = time_alternating(fns, rounds=3, warmup=1, clock=clock)
    assert clock.calls == ["a", "b"] * 4  # one warm-up round, then three alternating rounds
    assert result["a"].runs == (1.0, 1.25, 50.0) and result["b"].runs == (2.0, 2.25, 2.5)
    assert result["a"].median == 1.25 and result["b"].median == 2.25
    assert (result["a"].low, result["a"].high, result["a"].spread) == (1.0, 50.0, 50.0)
    assert speedup(result["b"], result["a"]) == 1.8


def test_no_warmup_times_the_first_call():
    clock = FakeClock()
    result = time_alternating({"x": clock.candidate("x", [5.0, 1.0])}, rounds=2, warmup=0,
                              clock=clock)  # fmt: skip
    assert result["x"].runs == (5.0, 1.0) and result["x"].median == 3.0


def test_timing_prints_median_and_range_in_milliseconds():
    assert str(Timing((0.001, 0.002, 0.004))) == "median 2.00 ms, range 1.00-4.00 ms"


def test_bad_arguments_fail_with_one_line_naming_the_fix():
    with pytest.raises(ValueError, match="at least one candidate"):
        time_alternating({})
    with pytest.raises(ValueError, match="rounds must be >= 1"):
        time_alternating({"x": lambda: None}, rounds=0)
