"""The scoring rules applied to a hand-in's row outside its kernel: values checked against the
solution's, forbidden calls, the memory limit told, the submission's note."""

from __future__ import annotations

from . import sandbox as sandboxes
from .forbidden import forbidden_note
from .gradebook import GRADED, MAX_REASON_CHARS, Lab, Result, one_line
from .outcomes import INSTRUCTOR, MEMORY, PASSED, STUDENT, entry, set_message
from .settings import Settings
from .submissions import Submission
from .verify import UNREPORTED, verdict


def finish(result: Result, sub: Submission) -> Result:
    """The row as the gradebook shows it: the submission's note first, on one line."""
    result.name, result.file = sub.name or sub.student, sub.file
    result.hand_in = sub.hand_in  # the LMS's id, late mark, time; roster match
    if sub.note and not result.reason.startswith(sub.note):
        result.reason = "; ".join(filter(None, [sub.note, result.reason]))
    result.reason = one_line(result.reason, MAX_REASON_CHARS)
    return result


def verified(result: Result, records: dict, reference: dict, lab: Lab) -> Result:
    """The row with each test cell scored by its checks' values, compared here with the
    solution's: a cell whose values do not match scores 0, whatever its kernel reported."""
    if result.status != GRADED:
        return result
    for test in lab.tests:
        ok, message, hidden = verdict(records.get(test, []), reference.get(test, []))
        info = result.feedback.setdefault(test, entry())
        audience = INSTRUCTOR if hidden else STUDENT
        if message:
            set_message(info, message, audience)
        elif not ok and info.get("message") == PASSED:  # no error, yet a check is missing
            missing = reference[test][len(records.get(test, []))].get("name")
            set_message(info, f"\u274c {missing}: {UNREPORTED}", audience)
        if not ok:
            result.scores[test] = 0.0
    return result


def with_forbidden(result: Result, uses: dict, lab: Lab, forbid: bool) -> Result:
    """The row with each exercise whose answer uses a forbidden callable named in its reason and
    in the exercise's feedback (the exercise and each callable by its full name); with
    ``forbid`` (the default; ``--allow-forbidden`` turns it off) the exercise scores 0."""
    if result.status != GRADED:
        return result
    notes = []
    for answer, used in sorted(uses.items()):
        test = lab.forbidden.get(answer, {}).get("test")
        if test not in lab.tests:
            continue
        note = forbidden_note(lab.title(test), used)
        notes.append(note)
        info = result.feedback.setdefault(test, entry())
        info["before"] = [*info.get("before", []), note]
        if forbid:
            result.scores[test] = 0.0
            set_message(info, f"\u274c {note}: this exercise scores 0")
    if notes:
        result.reason = one_line("; ".join(filter(None, [*notes, result.reason])), MAX_REASON_CHARS)
    return result


def with_limits(result: Result, settings: Settings) -> Result:
    """The row with the exercise whose kernel was killed for memory (its ``limit`` field, set
    where the kernel died: the OOM kills its group counted, or "probably" where no group counts
    them) told so, in the student's feedback and the instructor's, with the limit and how to
    raise it."""
    if result.status != GRADED or MEMORY not in result.limits:
        return result
    box = settings.sandbox
    limit = ""
    if settings.memory_needed:  # in Gradescope: the container's memory is what ran out
        limit = f" (this lab needs about {settings.memory_needed}: give the autograder more)"
    elif box:
        limit = f" (the limit: {sandboxes.format_memory(box.memory)}; --memory raises it)"
    for info in result.feedback.values():
        hit = info.get("limit") or {}
        if hit.get("kind") == MEMORY and (hit.get("oom_kills") or hit.get("probably")):
            message = f"\u274c the kernel ran out of memory while this ran and was killed{limit}"
            note = f"ran out of memory{limit}"
            if hit.get("probably"):  # a SIGKILL, as the OOM killer sends; no group counted it
                message = f"\u274c the kernel was killed while this ran, probably for memory{limit}"
                note = f"probably ran out of memory (killed; no limiter counts OOM kills){limit}"
            set_message(info, message)
            result.reason = one_line("; ".join([note, result.reason]).strip("; "), MAX_REASON_CHARS)
            break
    return result
