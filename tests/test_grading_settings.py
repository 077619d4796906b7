"""The grader's settings schema (course_utils/grading/settings.py): every value checked when
made, the command lines, settings.json, the worker's job and the guide's table all made from it,
and the forbidden calls' old option names still accepted."""

from __future__ import annotations

import argparse
import json

import pytest
from grading_helpers import FIXTURE

from course_utils.grading import command, gradescope, sandbox
from course_utils.grading.settings import (
    GRADE,
    GRADESCOPE,
    GUIDE,
    Settings,
    UsageError,
    guide_table,
    table,
    values_of,
)


def parsed(command_name: str, *options: str) -> Settings:
    """The settings ``options`` give on that command's command line (no sandbox probed)."""
    if command_name == GRADE:
        parser = command.configure(argparse.ArgumentParser())
        args = parser.parse_args(["lab", "subs", "--out", "g.csv", *options])
    else:
        args = gradescope.configure(argparse.ArgumentParser()).parse_args(["lab", *options])
    return Settings.given(command_name, values_of(args, command_name))


def test_the_guides_settings_table_is_the_one_the_schema_makes():
    shown = guide_table(GUIDE.read_text(encoding="utf-8"))
    assert shown == table(), (
        "docs/instructors.md's settings table is not the schema's: "
        "run python -m course_utils.grading.settings --write"
    )
    assert "| `--allow-forbidden` |" in shown and "| `--timeout` |" in shown


@pytest.mark.parametrize(
    "options, message",
    [
        (["--timeout", "0"], "--timeout: 0 is not a positive whole number of seconds; pass "
         "--timeout with 1 or more, or leave it out for the default"),
        (["--total-timeout", "-5"], "--total-timeout: -5 is not a positive whole number"),
        (["--jobs", "0"], "--jobs: 0 is not a positive whole number of jobs"),
        (["--tasks", "x"], "--tasks: cannot read 'x' as a whole number; write it like 30"),
        (["--memory", "lots"], "--memory: cannot read 'lots' as a memory size; write it like 4G"),
        (["--disk", "0"], "--disk: 0 is not a positive whole number of bytes"),
    ],
)  # fmt: skip
def test_a_bad_setting_is_refused_in_one_line_naming_the_option_and_the_fix(
    tmp_path, capsys, options, message
):
    (tmp_path / "subs").mkdir()
    argv = [str(FIXTURE), str(tmp_path / "subs"), "--out", str(tmp_path / "g.csv"), *options]
    assert command.main([*argv, "--no-sandbox"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"grade: error: {message}") and err.count("\n") == 1, err
    assert not (tmp_path / "g.csv").exists()
    with pytest.raises(UsageError, match="--timeout: 0 is not"):  # made in code: checked too
        Settings(timeout=0)


def test_sizes_are_read_into_bytes_and_each_command_has_its_defaults():
    assert parsed(GRADE, "--memory", "3G", "--disk", "512M").memory == 3 * 2**30
    assert parsed(GRADE, "--disk", "512M").host_bytes == 512 * 2**20
    grade, bundle = parsed(GRADE), parsed(GRADESCOPE)
    assert (grade.timeout, grade.total_timeout, grade.memory) == (None, 1800, None)
    assert (bundle.timeout, bundle.total_timeout, bundle.memory) == (60, 420, 4 * 2**30)
    assert grade.tasks == bundle.tasks == 256 and grade.host_bytes == sandbox.MAX_HOST_BYTES


@pytest.mark.parametrize("command_name", [GRADE, GRADESCOPE])
def test_forbidden_calls_have_an_option_of_their_own_and_the_old_names_still_work(command_name):
    assert parsed(command_name).forbid_calls  # the default: such an exercise scores 0
    assert not parsed(command_name, "--allow-forbidden").forbid_calls
    assert not parsed(command_name, "--allow-reference").forbid_calls  # the old name
    assert parsed(command_name, "--forbid-reference").forbid_calls  # the old opt-in
    assert parsed(command_name, "--allow-forbidden", "--forbid-calls").forbid_calls
    parser = command.configure(argparse.ArgumentParser())
    assert "--allow-reference" not in parser.format_help()  # accepted, not listed


def test_settings_json_is_the_schemas_and_an_older_bundles_is_read_as_it_was():
    chosen = parsed(GRADESCOPE, "--timeout", "20", "--allow-forbidden", "--memory", "2G")
    data = json.loads(json.dumps(chosen.to_json(GRADESCOPE)))
    assert data == {"timeout": 20, "total_timeout": 420, "memory": 2 * 2**30, "tasks": 256,
                    "host_bytes": sandbox.MAX_HOST_BYTES, "sandbox": True,
                    "forbid_calls": False, "memory_needed": ""}  # fmt: skip
    assert Settings.from_json(data) == chosen
    old = {"lab": "x", "timeout": 20, "total_timeout": 420, "memory": "2G", "sandbox": True,
           "forbid_reference": False}  # fmt: skip
    assert Settings.from_json(old) == chosen  # the old key, the memory as written then
    damaged = [({"timeout": 0}, "its timeout: 0 is not a positive"),
               ({"sandbox": "yes"}, "its sandbox: 'yes' is not true or false"),
               ({"forbid_calls": 1}, "its forbid_calls: 1 is not true or false")]  # fmt: skip
    for bad, why in damaged:
        with pytest.raises(ValueError, match=why):
            Settings.from_json({**old, **bad})


def test_the_workers_job_and_the_cache_key_come_from_the_settings():
    box = sandbox.Sandbox("/usr/bin/bwrap", 2**30, tasks=64)
    job = Settings(timeout=7, sandbox=box, threads=3).job()
    assert job == {"timeout": 7, "threads": 3, "sandbox": {"bwrap": "/usr/bin/bwrap",
                   "memory": 2**30, "tasks": 64, "user": box.user}}  # fmt: skip
    assert Settings().key() == {"sandboxed": False, "forbid_calls": True}
    assert Settings(forbid_calls=False).key() != Settings().key()
