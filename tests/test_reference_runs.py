"""The recorded GPU runs lesson 12 shows: who made them, every verdict the lesson asserts
re-derived from the recorded losses (a changed file changes the verdict), and the comparison
.ci/gpu_check makes between a fresh recording and the committed one."""

from __future__ import annotations

import copy
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course_utils.lessons import verdicts
from course_utils.projects import bookgpt

ROOT = Path(__file__).resolve().parents[1]
RECORDED = bookgpt.recorded_reference_runs()
# What lesson 12 asserts of the recorded runs: every claim of reference_claims holds.
LESSON_12_CLAIMS = {
    "larger beats baseline by over 0.05 at 4750": True,
    "larger: val above train by over 0.1 (memorizing)": True,
    "larger: the gap widens from step 2000 to 4750 by over 0.05": True,
    "ctx512 behind larger at step 2000": True,
    "ctx512 level with larger at 4750 (within 0.01)": True,
}


def load_script():
    path = ROOT / "benchmarks" / "bookgpt_reference_runs.py"
    spec = importlib.util.spec_from_file_location("bookgpt_reference_runs", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bookgpt_reference_runs"] = module
    spec.loader.exec_module(module)
    return module


def edited(**val_at_4750: float) -> dict:
    """A copy of the recording with some runs' validation loss at step 4750 replaced."""
    record = copy.deepcopy(RECORDED)
    for run in record["runs"]:
        if run["config"] in val_at_4750:
            next(e for e in run["evals"] if e["step"] == 4750)["val_loss"] = val_at_4750[
                run["config"]
            ]
    return record


def test_the_recording_names_its_script_and_commit_and_the_script_exists():
    assert len(RECORDED["commit"]) == 40 and RECORDED["script"] in RECORDED["command"]
    assert (ROOT / RECORDED["script"]).is_file(), "the command names today's script"
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("no git checkout: the commit cannot be looked up")
    spec = f"{RECORDED['commit']}:{RECORDED['script_at_commit']}"  # its name when it ran
    found = subprocess.run(["git", "cat-file", "-e", spec], cwd=ROOT, capture_output=True)
    if (
        found.returncode != 0
        and subprocess.run(
            ["git", "rev-parse", "--is-shallow-repository"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
        == "true"
    ):
        pytest.skip("a shallow clone: the recording's commit is not in it")
    assert found.returncode == 0, f"{spec} is not in the repository's history"


def test_every_verdict_lesson_12_asserts_follows_from_the_recorded_losses():
    assert verdicts.reference_claims(RECORDED) == LESSON_12_CLAIMS


def test_a_changed_recording_changes_the_verdicts():
    runs = {run["config"]: run for run in RECORDED["runs"]}
    base = verdicts.at(runs["baseline"], 4750)
    larger = verdicts.at(runs["larger"], 4750)
    # the baseline within 0.05 of the larger model: it no longer "beats baseline"
    claims = verdicts.reference_claims(edited(baseline=larger + 0.04))
    assert not claims["larger beats baseline by over 0.05 at 4750"]
    # ctx512 0.02 behind: no longer level
    claims = verdicts.reference_claims(edited(ctx512=larger + 0.02))
    assert not claims["ctx512 level with larger at 4750 (within 0.01)"]
    # the larger model's val down to its train loss: no memorizing, no widening gap
    train = verdicts.at(runs["larger"], 4750, "train_loss")
    claims = verdicts.reference_claims(edited(larger=train + 0.05, ctx512=train + 0.05))
    assert not claims["larger: val above train by over 0.1 (memorizing)"]
    assert not claims["larger: the gap widens from step 2000 to 4750 by over 0.05"]
    assert base > larger  # the edits above moved the figures the right way


def test_at_names_the_missing_step():
    with pytest.raises(KeyError, match="no evaluation at step 123"):
        verdicts.at(RECORDED["runs"][0], 123)


def test_compare_accepts_the_committed_recording_and_rejects_one_past_the_tolerance():
    script = load_script()
    assert script.compare(RECORDED, RECORDED) == []
    runs = {run["config"]: run for run in RECORDED["runs"]}
    larger = verdicts.at(runs["larger"], 4750)
    base = verdicts.at(runs["baseline"], 4750)
    near = edited(baseline=base + 0.5 * script.TOLERANCE)
    assert script.compare(near, RECORDED) == []
    far = edited(larger=larger + 2 * script.TOLERANCE)
    assert script.compare(far, RECORDED) == [
        f"larger val_loss @4750: {larger + 2 * script.TOLERANCE:.4f} against {larger:.4f} "
        f"committed (tolerance {script.TOLERANCE})"
    ]
    # within the tolerance of every loss, yet across a verdict's line: still a difference
    ctx = verdicts.at(runs["ctx512"], 4750)
    shifted = edited(ctx512=ctx + 0.02)
    assert abs(ctx - larger) < 0.01 and 0.02 < script.TOLERANCE
    assert script.compare(shifted, RECORDED) == [
        "verdict changed: ctx512 level with larger at 4750 (within 0.01): False (committed: True)"
    ]


def test_the_script_exits_1_when_its_recording_differs(tmp_path, monkeypatch):
    """--compare-with: the exit status .ci/gpu_check reads; the runs themselves are stubbed."""
    script = load_script()
    far = edited(larger=verdicts.at(RECORDED["runs"][1], 4750) + 1.0)
    data = tmp_path / "data"
    data.mkdir()
    (data / "meta.json").write_text("{}")
    monkeypatch.setattr(script, "run_all", lambda names, args: dict.fromkeys(names, 0))
    fake = {run["config"]: run for run in far["runs"]}
    monkeypatch.setattr(script, "summarize", lambda name, args, status: fake[name])
    committed = tmp_path / "committed.json"
    committed.write_text(json.dumps(RECORDED))
    argv = ["--data", str(data), "--out", str(tmp_path / "out"), "--record",
            str(tmp_path / "fresh.json"), "--compare-with", str(committed)]  # fmt: skip
    assert script.main(argv) == 1
    committed.write_text(json.dumps(far))
    assert script.main(argv) == 0
