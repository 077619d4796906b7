"""The benchmarks run and compare what they claim to compare (short budgets, tiny corpus)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from course_utils.core.model import GPT, GPTConfig
from course_utils.projects.corpus import Book, Corpus, prepare

ROOT = Path(__file__).resolve().parents[1]


def load_benchmark(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench():
    pytest.importorskip("transformers", reason="the bench extra: pip install -e '.[bench]'")
    return load_benchmark("bookgpt_train")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    text = "And the word was with the book, and the reader read it.\n" * 40
    books = tuple(Book(f"book{i}", text.replace("book", w)) for i, w in enumerate(("a", "b")))
    out = tmp_path_factory.mktemp("corpus") / "data"
    prepare(Corpus("test books", books), out)
    return out


def test_hf_gpt2_holding_our_weights_computes_our_function(bench):
    config = GPTConfig(vocab_size=50, block_size=16, n_layer=2, n_head=4, n_embd=32)
    torch.manual_seed(0)
    ours = GPT(config).eval()
    hf = bench.HFGPT2(config).load_from(ours).eval()
    assert sum(p.numel() for p in hf.parameters()) == sum(p.numel() for p in ours.parameters())
    idx = torch.randint(50, (3, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a, b = ours(idx), hf(idx)
    assert a.shape == b.shape == (3, 16, 50)
    assert torch.allclose(a, b, atol=1e-5), float((a - b).abs().max())
    fresh = bench.HFGPT2(config).eval()  # an independent init does not: the copy matters
    with torch.no_grad():
        assert not torch.allclose(a, fresh(idx), atol=1e-3)


def test_bookgpt_benchmark_prints_its_table(bench, data_dir, capsys):
    rows = "ours,hf,ours-bf16"
    args = ["--config", "tiny", "--data", str(data_dir), "--minutes", "0.02", "--pairs", "1",
            "--rows", rows, "--eval-batches", "1"]  # fmt: skip
    assert bench.main(args) == 0
    out = capsys.readouterr().out
    assert "paired throughput, 1 alternating rounds" in out
    for row in rows.split(","):
        assert f"| {row} | " in out
    assert "target tokens/s ours/HF >= 1.0:" in out and "target val loss <= 1.45" in out
    assert bench.main([*args, "--rows", "ours,gpt4"]) == 2
    assert "unknown rows ['gpt4']" in capsys.readouterr().err


def test_bookgpt_benchmark_names_a_missing_corpus(bench, tmp_path, capsys):
    assert bench.main(["--data", str(tmp_path / "none"), "--pairs", "0", "--rows", "ours"]) == 2
    assert "bookgpt prepare" in capsys.readouterr().err


def test_grading_benchmark_prints_hand_ins_per_minute(capsys):
    from grading_helpers import require_sandbox

    require_sandbox()
    rows = load_benchmark("grading").main(["--tiny"])
    assert [(r["hand-ins"], r["jobs"], r["sandbox"]) for r in rows] == [(4, 2, True)]
    assert rows[0]["per minute"] > 0
    out = capsys.readouterr().out
    assert "| hand-ins | jobs | sandbox | seconds | hand-ins / min |" in out
    assert "| 4 | 2 | on |" in out
