"""Bad paths on the command line: every command answers one ``error:`` line naming the path and
the fix (core/cli.py words any ``OSError``), exit status 2, no traceback, nothing lost."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from course_utils.core.cli import path_problem, run_command
from course_utils.projects.corpus import CorpusNotPreparedError
from course_utils.tools.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def afile(tmp_path) -> Path:
    path = tmp_path / "afile"
    path.write_text("mine\n")
    return path


def one_error(capsys, *argv: str) -> str:
    """Run ``python -m course_utils ARGV`` in this process; its one ``error:`` line."""
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def test_every_os_error_becomes_one_line_naming_the_path_and_the_fix(tmp_path, afile):
    def words(err: OSError) -> str:
        return path_problem(err)

    inside = afile / "sub" / "notebooks"
    said = words(NotADirectoryError(errno.ENOTDIR, "Not a directory", str(inside)))
    assert said.startswith(f"{afile} is a file, not a folder") and "pass a folder" in said
    said = words(NotADirectoryError(errno.ENOTDIR, "Not a directory", str(afile)))
    assert said.startswith(f"{afile} is a file, not a folder")
    said = words(IsADirectoryError(errno.EISDIR, "Is a directory", str(tmp_path)))
    assert said.startswith(f"{tmp_path} is a folder, not a file") and "pass a file" in said
    # os.replace(tmp, target): the target, not the temporary, is what the user named
    said = words(IsADirectoryError(errno.EISDIR, "Is a directory", ".x.tmp", None, str(tmp_path)))
    assert said.startswith(f"{tmp_path} is a folder") and ".tmp" not in said
    said = words(FileExistsError(errno.EEXIST, "File exists", str(afile)))
    assert said.startswith(f"{afile} is a file, where a folder") and "pass a folder" in said
    said = words(FileExistsError(errno.EEXIST, "File exists", str(tmp_path)))
    assert said.startswith(f"{tmp_path} already exists")
    said = words(PermissionError(errno.EACCES, "Permission denied", "/root/x"))
    assert said.startswith("permission denied: /root/x;") and "permissions" in said
    said = words(FileNotFoundError(errno.ENOENT, "No such file", "nope.txt"))
    assert said.startswith("nope.txt does not exist; check the path")
    said = words(OSError(errno.ENOSPC, "No space left on device", "big.bin"))
    assert "no space left" in said and "big.bin" in said
    said = words(OSError(errno.EIO, "Input/output error", "disk.bin"))
    assert said == "disk.bin: Input/output error; check the path"
    ours = CorpusNotPreparedError("no prepared corpus in d; prepare it first: ...")
    assert words(ours) == str(ours)  # the course's own message is kept


def test_run_command_prints_an_os_error_on_one_line(capsys):
    import argparse

    def fail(args):
        raise PermissionError(errno.EACCES, "Permission denied", "/srv/grades.csv")

    parser = argparse.ArgumentParser()
    parser.set_defaults(func=fail)
    assert run_command(parser, []) == 2
    err = capsys.readouterr().err
    assert err == (
        "error: permission denied: /srv/grades.csv; pass a path you may read and write, or "
        "change its permissions\n"
    )


def test_bookgpt_bad_paths(tmp_path, afile, capsys):
    line = one_error(capsys, "bookgpt", "train", "--config", "tiny", "--out", str(afile))
    assert f"the run folder {afile} is a file, not a folder; pass a folder (--out DIR)" in line
    line = one_error(capsys, "bookgpt", "train", "--config", "tiny", "--out", str(afile / "r"))
    assert f"would be inside {afile}, which is a file" in line
    line = one_error(capsys, "bookgpt", "train", "--config", "tiny", "--data", str(afile),
                     "--out", str(tmp_path / "run"))  # fmt: skip
    assert f"no prepared corpus in {afile}" in line and "bookgpt prepare" in line
    line = one_error(
        capsys, "bookgpt", "prepare", "--corpus", str(afile), "--out", str(tmp_path / "d")
    )
    assert f"corpus folder {afile} does not exist or is not a folder; pass a folder" in line
    books = tmp_path / "books"
    books.mkdir()
    (books / "a.txt").write_text("A book.\n\nIn two paragraphs.\n")
    line = one_error(capsys, "bookgpt", "prepare", "--corpus", str(books), "--out", str(afile))
    assert f"--out {afile} is a file; pass a folder path" in line
    line = one_error(capsys, "bookgpt", "sample", str(tmp_path))
    assert f"{tmp_path}/ckpt.pt does not exist; train first" in line
    line = one_error(capsys, "bookgpt", "sample", str(afile))
    assert f"{afile} is corrupt or not a PyTorch file" in line
    assert afile.read_text() == "mine\n"  # nothing lost


def test_sumgpt_bad_paths(tmp_path, afile, capsys):
    line = one_error(capsys, "sumgpt", "train", "--steps", "2", "--out", str(afile))
    assert f"the run folder {afile} is a file, not a folder" in line
    line = one_error(capsys, "sumgpt", "train", "--steps", "2", "--out", str(afile / "run"))
    assert f"would be inside {afile}, which is a file" in line
    line = one_error(capsys, "sumgpt", "eval", str(tmp_path))
    assert f"{tmp_path}/ckpt.pt does not exist" in line
    line = one_error(capsys, "sumgpt", "eval", str(afile / "ckpt.pt"))
    assert str(afile) in line
    assert afile.read_text() == "mine\n"


def test_open_bad_paths(tmp_path, afile, capsys):
    line = one_error(capsys, "open", str(afile), "--copy-only")
    assert line.startswith(f"error: {afile} is a file, not a folder") and "pass a folder" in line
    line = one_error(capsys, "open", str(afile / "course"), "--copy-only")
    assert line.startswith(f"error: {afile} is a file, not a folder")
    home = tmp_path / "course"
    home.mkdir()
    (home / "notebooks").write_text("not a folder\n")
    line = one_error(capsys, "open", str(home), "--copy-only")
    assert line.startswith(f"error: {home / 'notebooks'} is a file, where a folder was to be")
    assert afile.read_text() == "mine\n" and (home / "notebooks").read_text() == "not a folder\n"


def test_normalize_bad_paths(tmp_path, afile, capsys):
    line = one_error(capsys, "normalize", str(tmp_path))
    assert f"no notebook at {tmp_path}: give paths to .ipynb files" in line
    line = one_error(capsys, "normalize", str(tmp_path / "none.ipynb"))
    assert f"no notebook at {tmp_path / 'none.ipynb'}" in line
    line = one_error(capsys, "normalize", str(afile))
    assert f"{afile} is not a notebook (not JSON); give paths to .ipynb files" in line
    stray = tmp_path / "stray.ipynb"
    stray.write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4,
                                 "nbformat_minor": 5}))  # fmt: skip
    line = one_error(capsys, "normalize", str(stray))
    assert f"{stray} is not in one of" in line and "pass a notebook of the course's" in line
    assert afile.read_text() == "mine\n"


def test_publish_bad_paths_are_refused_before_anything_runs(tmp_path, afile, capsys):
    lesson = ROOT / "notebooks" / "01_tokens_and_embeddings.ipynb"
    for bad, said in (
        (tmp_path / "none.ipynb", f"no notebook at {tmp_path / 'none.ipynb'}"),
        (tmp_path, f"no notebook at {tmp_path}"),
        (afile, f"{afile} is not in one of"),
        (ROOT / "labs" / lesson.name, "labs are generated; publish its solution instead"),
    ):
        line = one_error(capsys, "publish", str(lesson), str(bad))
        assert said in line, line
    assert "executing" not in capsys.readouterr().out


def test_site_bad_paths(tmp_path, afile, capsys):
    line = one_error(capsys, "site", "build", "--out", str(afile))
    assert line.startswith(f"error: {afile} is a file, not a folder; pass a folder")
    assert afile.read_text() == "mine\n"
