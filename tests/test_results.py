"""Results as data: every benchmark can record what it printed, with where and when it ran."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = sorted(
    p for p in (ROOT / "benchmarks").glob("*.py") if p.stem not in ("record", "cpu_classes")
)


@pytest.fixture(scope="module")
def record():
    spec = importlib.util.spec_from_file_location("record", ROOT / "benchmarks" / "record.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_option_names_a_file_or_defaults_to_the_benchmarks_page(record):
    rest = ["--rounds", "3"]
    assert record.take_option(rest, "x") == (None, rest)
    named = record.take_option(["--results", "out.md", "--rounds", "3"], "x")
    assert named == (Path("out.md"), rest)
    assert record.take_option(["--results=o.md", *rest], "x") == (Path("o.md"), rest)
    assert record.take_option([*rest, "--results"], "x") == (record.RESULTS / "x.md", rest)
    assert record.take_option(["--results", *rest], "x") == (record.RESULTS / "x.md", rest)


PRINTED = """\
bookgpt cpu step, 2 threads
auto here: fp32 (no bf16 units)
| variant | ms/step |
| --- | ---: |
| eager | 21.7 |

## CPU class avx2: emulated
| variant | ms/step |
| --- | ---: |
| fused | 36.3 |
target met
"""


def test_a_recorded_page_holds_the_tables_and_where_and_when_they_were_measured(
    record, tmp_path, monkeypatch, capsys
):
    calls = []

    def main(argv):
        calls.append(argv)
        print(PRINTED, end="")
        return 3

    main.__module__ = "no_such_module"
    monkeypatch.setattr(sys, "argv", ["benchmarks/train_step.py"])
    out = tmp_path / "results" / "step.md"
    assert record.run(main, ["--rounds", "1", "--results", str(out)]) == 3
    assert calls == [["--rounds", "1"]], "the benchmark never sees --results"
    assert PRINTED in capsys.readouterr().out, "the terminal still gets everything"
    page = out.read_text(encoding="utf-8")
    first, provenance = page.splitlines()[0], page.splitlines()[2]
    assert first == "# train_step"
    assert "`python benchmarks/train_step.py --rounds 1`" in provenance
    where = record.context()
    for key in ("host", "cpu", "cpu class", "torch", "python", "threads", "commit"):
        assert f"{key} {where[key]}" in provenance, key
    assert re.search(r"Recorded \d{4}-\d\d-\d\d \d\d:\d\d UTC", provenance)
    assert "| --- | ---: |\n| eager | 21.7 |" in page  # a table stays a table
    assert "```text\nbookgpt cpu step, 2 threads\nauto here: fp32 (no bf16 units)\n```" in page
    assert "\n## CPU class avx2: emulated\n" in page and "```text\ntarget met\n```" in page
    recording = json.loads(record.recording_path(out).read_text(encoding="utf-8"))
    assert recording["output"] == PRINTED and record.render(recording) == page
    assert record.hand_edit(out) is None


def test_each_cpu_class_childs_tables_are_recorded(record, tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("cpu_classes", ROOT / "benchmarks/cpu_classes.py")
    classes = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(classes)
    child = tmp_path / "child.py"
    child.write_text("import sys\nprint('| class | argv |')\nprint('| x |', sys.argv[1:], '|')\n")
    monkeypatch.setattr(sys, "argv", [str(child)])
    out = tmp_path / "page.md"
    assert (
        record.run(lambda argv: classes.run_per_class(argv, ["native"]), ["--results", str(out)])
        == 0
    )
    page = out.read_text(encoding="utf-8")
    assert "\n## CPU class native:" in page and "\n###" not in page  # no level skipped
    assert "| x | ['--cpu-class', 'native'] |" in page


def test_without_the_option_nothing_is_written(record, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert record.run(lambda argv: [{"a list": "is exit status 0"}], []) == 0
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda p: p.name)
def test_every_benchmark_runs_through_the_recorder(path):
    text = path.read_text(encoding="utf-8")
    main = text.split('if __name__ == "__main__":', 1)
    assert len(main) == 2 and "sys.exit(record.run(main))" in main[1], path.name


def test_every_results_page_is_linked_from_the_results_page():
    results = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    pages = sorted((ROOT / "docs" / "results").glob("*.md"))
    assert len(pages) >= 8
    for page in pages:
        assert f"](results/{page.name})" in results, page.name
        text = page.read_text(encoding="utf-8")
        assert re.search(r"^(Recorded|Seeded) ", text, re.M), f"{page.name}: where and when?"
        assert "|" in text, f"{page.name} holds no table"


PAGES = sorted((ROOT / "docs" / "results").glob("*.md"))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_results_page_is_what_its_recording_renders(record, page):
    assert record.hand_edit(page) is None, record.hand_edit(page)


def test_a_table_edited_by_hand_is_caught(record, tmp_path):
    for name in ("train_step.md", "train_step.json"):
        (tmp_path / name).write_bytes((ROOT / "docs" / "results" / name).read_bytes())
    page = tmp_path / "train_step.md"
    assert record.hand_edit(page) is None
    text = page.read_text(encoding="utf-8")
    page.write_text(text.replace("| 21.7 | 42.6 |", "| 20.7 | 42.6 |", 1), encoding="utf-8")
    found = record.hand_edit(page)
    assert found.startswith("train_step.md line ") and "20.7" in found and "21.7" in found
    page.unlink()
    (tmp_path / "train_step.json").rename(tmp_path / "other.json")
    (tmp_path / "train_step.md").write_text(text, encoding="utf-8")
    assert "no recording beside it" in record.hand_edit(page)


def test_the_digit_order_median_row_is_the_scripts_own(record):
    recording = json.loads((ROOT / "docs/results/sumgpt_digit_order.json").read_text("utf-8"))
    tables = record.recorded_tables("sumgpt_digit_order", recording["data"])
    assert "| median | 1,100 | 1,450 | 1,550 (2 missed) | 1,700 (2 missed) |" in tables
