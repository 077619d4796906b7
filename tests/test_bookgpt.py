"""Tests of course_utils.projects.bookgpt: BookGPT's train / resume / DDP / sample."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from course_utils import GPT, build_model
from course_utils.engine.checkpoint import CheckpointError
from course_utils.projects import bookgpt, sumgpt
from course_utils.projects.corpus import Book, Corpus, prepare

ROOT = Path(__file__).resolve().parents[1]
TEXT = (
    "In the beginning was the word, and the word was with the book.\n"
    "And the reader read the book, and saw that it was good.\n\n"
)


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models train faster on one thread, above all on shared, busy cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """A tiny prepared corpus: three small books."""
    books = tuple(
        Book(f"book{i}", (TEXT * 12).replace("book", name).strip() + "\n")
        for i, name in enumerate(("scroll", "volume", "tome"))
    )
    out = tmp_path_factory.mktemp("corpus") / "data"
    prepare(Corpus("test books", books), out)
    return out


def run_cli(*args: str, env: dict | None = None, timeout: int = 120):
    return subprocess.run(
        [sys.executable, "-m", "course_utils", "bookgpt", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
    )


def log_losses(run_dir: Path) -> list[float]:
    return json.loads((run_dir / "log.json").read_text())["losses"]


def test_configs_match_the_seed_shapes():
    base, larger, ctx = (
        bookgpt.CONFIGS["baseline"],
        bookgpt.CONFIGS["larger"],
        bookgpt.CONFIGS["ctx512"],
    )
    assert (base.n_embd, base.n_head, base.n_layer, base.block_size) == (128, 4, 4, 256)
    assert (larger.n_embd, larger.n_head, larger.n_layer, larger.block_size) == (256, 8, 6, 256)
    assert (ctx.n_embd, ctx.n_layer, ctx.block_size) == (256, 6, 512)
    assert ctx.batch_size * 2 == larger.batch_size
    g = base.gpt_config(66)
    assert g.tie_weights and g.prenorm and g.activation == "gelu" and g.attention == "fused"
    with pytest.raises(bookgpt.BookGPTError, match="unknown config"):
        bookgpt.get_config("huge")


def test_train_writes_logs_and_checkpoint_and_learns(data_dir, tmp_path):
    run = tmp_path / "run"
    assert bookgpt.main(["train", "--config", "tiny", "--data", str(data_dir), "--out", str(run),
                   "--steps", "20", "--no-progress", "--device", "cpu"]) == 0  # fmt: skip
    hist = json.loads((run / "log.json").read_text())
    assert len(hist["losses"]) == 20 and len(hist["lrs"]) == 20
    assert [e["step"] for e in hist["evals"]] == [5, 10, 15, 20]
    assert hist["evals"][-1]["val_loss"] < hist["evals"][0]["val_loss"]
    assert hist["lrs"][3] == pytest.approx(3e-3) and hist["lrs"][-1] == pytest.approx(3e-4)
    rows = (run / "log.csv").read_text().splitlines()
    assert rows[0].startswith("step,lr,loss") and len(rows) == 21
    assert not [p for p in run.iterdir() if p.name.startswith(".")], "temp files left behind"
    model, itos, state = bookgpt.load_checkpoint(run / "ckpt.pt")
    assert state["step"] == 20 and len(itos) == model.config.vocab_size
    # a finished run refuses to be overwritten silently
    with pytest.raises(CheckpointError, match="--resume"):
        bookgpt.train_run(bookgpt.get_config("tiny"), data_dir, run, device="cpu", progress=False)


def test_eval_batches_are_fixed(data_dir):
    """Two runs score the same windows: the evaluation draws from its own seed, not the run's."""
    from course_utils.projects.corpus import load_split

    val = load_split(data_dir, "val")
    a = bookgpt.eval_windows(val, bookgpt.get_config("tiny"))
    b = bookgpt.eval_windows(val, bookgpt.get_config("tiny", seed=7))  # another run's seed
    assert len(a) == bookgpt.get_config("tiny").eval_batches == 2
    assert all(x1.shape == (8, 32) for x1, _ in a)
    assert all(torch.equal(x1, x2) and torch.equal(y1, y2) for (x1, y1), (x2, y2) in zip(a, b))
    assert not torch.equal(a[0][0], a[1][0])  # the batches differ from each other
    assert torch.equal(a[0][0][:, 1:], a[0][1][:, :-1])  # targets are inputs shifted by one


# Runs compared across processes ask for fp32: precision auto's bf16 probe may decide
# differently in each process on a busy CPU with fast bf16, and the trajectories then differ.
FP32 = ("--dtype", "fp32")


def test_resume_after_a_crash_equals_an_uninterrupted_run(data_dir, tmp_path):
    common = ["--config", "tiny", "--data", str(data_dir), "--steps", "16",
              "--checkpoint-every", "5", "--no-progress", "--device", "cpu", *FP32]  # fmt: skip
    full, crashed = tmp_path / "full", tmp_path / "crashed"
    assert bookgpt.main(["train", *common, "--out", str(full)]) == 0
    # a separate process that dies after step 12: the last checkpoint is step 10
    threads = {"OMP_NUM_THREADS": str(torch.get_num_threads())}  # the same float sums
    proc = run_cli("train", *common, "--out", str(crashed), "--stop-after", "12", env=threads)
    assert proc.returncode == 0, proc.stderr
    assert torch.load(crashed / "ckpt.pt", weights_only=True)["step"] == 10
    assert len(log_losses(crashed)) == 10
    assert bookgpt.main(["train", *common, "--out", str(crashed), "--resume"]) == 0
    a, b = log_losses(full), log_losses(crashed)
    assert len(a) == len(b) == 16
    assert max(abs(x - y) for x, y in zip(a, b)) <= 1e-6  # dropout on: the RNG came back too
    ha = json.loads((full / "log.json").read_text())["evals"]
    hb = json.loads((crashed / "log.json").read_text())["evals"]
    assert [e["val_loss"] for e in ha] == pytest.approx([e["val_loss"] for e in hb], abs=1e-6)
    sa = torch.load(full / "ckpt.pt", weights_only=True)["model"]
    sb = torch.load(crashed / "ckpt.pt", weights_only=True)["model"]
    assert all(torch.allclose(sa[k], sb[k], atol=1e-6) for k in sa)


def _saved_after(run_dir: Path, steps: int) -> bool:
    """Whether the run's logs (written with each checkpoint) hold ``steps`` losses or more."""
    try:
        return len(log_losses(run_dir)) >= steps
    except (FileNotFoundError, json.JSONDecodeError):
        return False


def _training_process(args: list[str], out: Path, until: int) -> subprocess.Popen:
    """``bookgpt train`` in a process of its own, returned once its logs hold ``until``
    losses (written with each checkpoint, step 0's included)."""
    env = {**os.environ, "OMP_NUM_THREADS": str(torch.get_num_threads())}
    proc = subprocess.Popen(
        [sys.executable, "-m", "course_utils", "bookgpt", "train", *args, "--out", str(out)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not _saved_after(out, until):
        if proc.poll() is not None:
            pytest.fail(f"the run ended before its checkpoint: {proc.stderr.read()}")
        assert time.monotonic() < deadline, "no checkpoint within 120 s"
        time.sleep(0.005)
    return proc


def test_resume_after_a_kill_signal_equals_an_uninterrupted_run(data_dir, tmp_path):
    """SIGKILL a real training process (no cleanup of any kind runs) once it has written a
    checkpoint: the checkpoint on disk is whole, and resuming from it reproduces the losses
    of a run that was never interrupted."""
    common = ["--config", "tiny", "--data", str(data_dir), "--steps", "400",
              "--checkpoint-every", "5", "--eval-every", "100", "--no-progress",
              "--device", "cpu", *FP32]  # fmt: skip
    killed, full = tmp_path / "killed", tmp_path / "full"
    proc = _training_process(common, killed, until=5)  # past step 0's checkpoint
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    step = torch.load(killed / "ckpt.pt", weights_only=True)["step"]
    assert 5 <= step < 400 and step % 5 == 0
    assert bookgpt.main(["train", *common, "--out", str(killed), "--resume"]) == 0
    assert bookgpt.main(["train", *common, "--out", str(full)]) == 0
    a, b = log_losses(full), log_losses(killed)
    assert len(a) == len(b) == 400
    assert max(abs(x - y) for x, y in zip(a, b)) <= 1e-6


def test_resume_refuses_another_configuration(data_dir, tmp_path):
    run = tmp_path / "run"
    bookgpt.train_run(
        bookgpt.get_config("tiny", steps=5), data_dir, run, device="cpu", progress=False
    )
    with pytest.raises(CheckpointError, match=r"train.steps was 5, now 8; resume with steps=5"):
        bookgpt.train_run(
            bookgpt.get_config("tiny", steps=8), data_dir, run, resume=True, progress=False
        )


def test_a_resume_on_another_corpus_is_refused_in_one_line_naming_both(data_dir, tmp_path, capsys):
    """The checkpoint records its corpus (books, tokens, a fingerprint of meta.json and of the
    splits' ends): a resume with --data holding another corpus over the same alphabet is
    refused, naming both; the same corpus moved elsewhere resumes; a checkpoint written before
    corpora were recorded resumes as it did."""
    books = tuple(
        Book(f"book{i}", (TEXT * 9).replace("book", name).strip() + "\n")
        for i, name in enumerate(("tome", "scroll", "volume"))
    )
    other = tmp_path / "other"
    prepare(Corpus("other books", books), other)
    assert (
        json.loads((other / "meta.json").read_text())["itos"]
        == json.loads((data_dir / "meta.json").read_text())["itos"]
    )  # the same alphabet: the vocabulary alone cannot tell them apart
    run = tmp_path / "run"
    common = ["train", "--config", "tiny", "--steps", "8", "--no-progress", "--device", "cpu",
              "--out", str(run)]  # fmt: skip
    assert bookgpt.main([*common, "--data", str(data_dir), "--stop-after", "6"]) == 0
    record = torch.load(run / "ckpt.pt", weights_only=True)["meta"]["corpus"]
    assert record["books"] == 3 and len(record["fingerprint"]) == 16
    capsys.readouterr()
    assert bookgpt.main([*common, "--data", str(other), "--resume"]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # refused before the header line
    assert err.count("\n") == 1 and err.startswith(f"error: cannot resume {run / 'ckpt.pt'}:")
    fingerprint = bookgpt.corpus.corpus_record(other)["fingerprint"]
    for said in (str(data_dir.resolve()), str(other.resolve()), record["fingerprint"],
                 fingerprint, "resume with the --data the run began on"):  # fmt: skip
        assert said in err, said
    moved = tmp_path / "moved"
    shutil.copytree(data_dir, moved)
    assert bookgpt.main([*common, "--data", str(moved), "--resume"]) == 0
    assert len(log_losses(run)) == 8
    # a checkpoint without a corpus record (older code): not checked
    old = tmp_path / "old"
    bookgpt.train_run(bookgpt.get_config("tiny", steps=8), data_dir, old, device="cpu",
                      progress=False, stop_after=6)  # fmt: skip
    state = torch.load(old / "ckpt.pt", weights_only=True)
    del state["meta"]["corpus"]
    torch.save(state, old / "ckpt.pt")
    _, history = bookgpt.train_run(bookgpt.get_config("tiny", steps=8), other, old,
                                   device="cpu", progress=False, resume=True)  # fmt: skip
    assert history.steps == 8


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ddp_two_processes_match_one_process(data_dir, tmp_path):
    # fp32 explicitly: in bf16 the rounding differs between one process and two by more than
    # the tolerance
    args = ["--config", "tiny", "--data", str(data_dir), "--steps", "4", "--dropout", "0",
            "--batch-size", "8", "--no-progress", "--device", "cpu", "--dtype", "fp32"]  # fmt: skip
    single = tmp_path / "single"
    assert bookgpt.main(["train", *args, "--out", str(single)]) == 0
    ddp = tmp_path / "ddp"
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2",
         "--master_addr", "127.0.0.1", "--master_port", str(_free_port()),
         "-m", "course_utils", "bookgpt", "train", *args, "--out", str(ddp)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "2 DDP processes" in proc.stdout
    sa = torch.load(single / "ckpt.pt", weights_only=True)["model"]
    sb = torch.load(ddp / "ckpt.pt", weights_only=True)["model"]
    assert sa.keys() == sb.keys()
    for k in sa:
        assert torch.allclose(sa[k], sb[k], atol=1e-5, rtol=1e-4), k
    assert log_losses(single) == pytest.approx(log_losses(ddp), abs=1e-5)
    ranks = torch.load(ddp / "ckpt.pt", weights_only=True)["rank_rng"]
    assert len(ranks) == 2 and not torch.equal(ranks[0]["torch"], ranks[1]["torch"])


def _torchrun(*args: str, processes: int = 2) -> subprocess.CompletedProcess:
    """``bookgpt ARGS`` under torchrun on ``processes`` CPU processes (gloo, one thread each)."""
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1",
         "--nproc_per_node", str(processes), "--master_addr", "127.0.0.1",
         "--master_port", str(_free_port()), "-m", "course_utils", "bookgpt", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_a_ddp_run_with_dropout_resumes_to_the_uninterrupted_losses(data_dir, tmp_path):
    """Two processes, dropout on: a run stopped as a crash would after step 6 (its checkpoint
    is step 4) and resumed reaches the losses and weights of a run never stopped, since each
    rank takes up its own dropout stream. Resumed on two processes, a one-process checkpoint
    gives the new rank a stream of its own (the ranks' states differ at the end)."""
    args = ["train", "--config", "tiny", "--data", str(data_dir), "--steps", "8",
            "--checkpoint-every", "4", "--eval-every", "4", "--batch-size", "8",
            "--no-progress", "--device", "cpu", *FP32]  # fmt: skip
    full, stopped, grown = tmp_path / "full", tmp_path / "stopped", tmp_path / "grown"
    _torchrun(*args, "--out", str(full))
    _torchrun(*args, "--out", str(stopped), "--stop-after", "6")
    assert torch.load(stopped / "ckpt.pt", weights_only=True)["step"] == 4
    _torchrun(*args, "--out", str(stopped), "--resume")
    a, b = log_losses(full), log_losses(stopped)
    assert len(a) == len(b) == 8 and max(abs(x - y) for x, y in zip(a, b)) <= 1e-6
    sa = torch.load(full / "ckpt.pt", weights_only=True)["model"]
    sb = torch.load(stopped / "ckpt.pt", weights_only=True)["model"]
    assert all(torch.allclose(sa[k], sb[k], atol=1e-6) for k in sa)
    # one process to step 4, then two
    threads = {"OMP_NUM_THREADS": "1"}
    proc = run_cli(*args, "--out", str(grown), "--stop-after", "6", env=threads)
    assert proc.returncode == 0, proc.stderr
    assert len(torch.load(grown / "ckpt.pt", weights_only=True)["rank_rng"]) == 1
    _torchrun(*args, "--out", str(grown), "--resume")
    state = torch.load(grown / "ckpt.pt", weights_only=True)
    assert state["step"] == 8 and len(log_losses(grown)) == 8
    ranks = state["rank_rng"]
    assert len(ranks) == 2 and not torch.equal(ranks[0]["torch"], ranks[1]["torch"])


def test_ctrl_c_leaves_a_checkpoint_that_resumes_to_the_same_losses(data_dir, tmp_path):
    """SIGINT in the middle of `bookgpt train`: the step in flight ends, a checkpoint of that
    step is written (not a scheduled one: those are every 100), the process exits 130 with one
    line; --resume then reaches the losses of a run that was never interrupted."""
    common = ["--config", "tiny", "--data", str(data_dir), "--steps", "300",
              "--checkpoint-every", "100", "--eval-every", "100", "--no-progress",
              "--device", "cpu", *FP32]  # fmt: skip
    stopped, full = tmp_path / "stopped", tmp_path / "full"
    proc = _training_process(common, stopped, until=0)  # step 0's checkpoint: it has begun
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().count("\n") == 0 and "interrupted after step" in err
    step = torch.load(stopped / "ckpt.pt", weights_only=True)["step"]
    assert 0 < step < 300 and len(log_losses(stopped)) == step
    assert bookgpt.main(["train", *common, "--out", str(stopped), "--resume"]) == 0
    assert bookgpt.main(["train", *common, "--out", str(full)]) == 0
    a, b = log_losses(full), log_losses(stopped)
    assert len(a) == len(b) == 300
    assert max(abs(x - y) for x, y in zip(a, b)) <= 1e-6


def test_the_cli_refuses_a_resume_with_other_steps_unless_extended(data_dir, tmp_path, capsys):
    common = ["--config", "tiny", "--data", str(data_dir), "--no-progress", "--device", "cpu",
              "--out", str(tmp_path / "run")]  # fmt: skip
    assert bookgpt.main(["train", *common, "--steps", "6"]) == 0
    capsys.readouterr()
    assert bookgpt.main(["train", *common, "--steps", "9", "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "train.steps was 6, now 9" in err and "--extend" in err
    assert bookgpt.main(["train", *common, "--steps", "9", "--resume", "--extend"]) == 0
    assert len(log_losses(tmp_path / "run")) == 9


def test_shards_are_disjoint_differ_and_make_up_the_global_batch():
    from course_utils.engine.distributed import Dist, rank_seed, shard

    batch = torch.arange(24).reshape(8, 3)
    parts = [shard(batch, Dist(rank=r, world=4)) for r in range(4)]
    assert torch.equal(torch.cat(parts), batch)  # in rank order, the global batch
    rows = [tuple(row.tolist()) for part in parts for row in part]
    assert len(set(rows)) == len(rows) == 8  # disjoint
    assert rank_seed(7, 0) == 7 and len({rank_seed(7, r) for r in range(4)}) == 4
    with pytest.raises(ValueError, match="divisible by 3"):
        shard(batch, Dist(rank=0, world=3))


def test_sample_is_deterministic_and_checks_the_prompt(data_dir, tmp_path, capsys):
    run = tmp_path / "run"
    bookgpt.train_run(
        bookgpt.get_config("tiny", steps=5), data_dir, run, device="cpu", progress=False
    )
    ckpt = str(run / "ckpt.pt")
    outs = []
    for _ in range(2):
        assert bookgpt.main(["sample", ckpt, "--prompt", "And the", "--tokens", "40",
                       "--temperature", "0.8", "--top-k", "10", "--seed", "3"]) == 0  # fmt: skip
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] and outs[0].startswith("And the") and len(outs[0]) == 7 + 40 + 1
    assert bookgpt.main(["sample", ckpt, "--prompt", "Zebra€", "--seed", "3"]) == 2
    err = capsys.readouterr().err
    assert "not in the model's vocabulary" in err and "'Z'" in err and "'€'" in err
    model, itos, _ = bookgpt.load_checkpoint(ckpt)
    text = bookgpt.sample_text(model, itos, "the", 30, temperature=1.5, seed=1)
    assert len(text) == 33 and set(text) <= set(itos)


def test_corrupt_or_foreign_checkpoint_gets_a_clear_error(data_dir, tmp_path, capsys):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint at all")
    assert bookgpt.main(["sample", str(bad)]) == 2
    assert "corrupt or not a PyTorch file" in capsys.readouterr().err
    for junk in (b"junk\n", b"", b"PK\x03\x04truncated"):
        bad.write_bytes(junk)
        with pytest.raises(CheckpointError, match="corrupt or not a PyTorch file"):
            bookgpt.load_checkpoint(bad)
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(2)}, foreign)
    with pytest.raises(CheckpointError, match="not a course checkpoint"):
        bookgpt.load_checkpoint(foreign)
    sums = tmp_path / "sums.pt"
    model = build_model(GPT, sumgpt.sumgpt_config(n_layer=1, n_embd=16), seed=0, device="cpu")
    sumgpt.save_checkpoint(sums, model)
    with pytest.raises(CheckpointError, match="written by 'sumgpt', not 'bookgpt'"):
        bookgpt.load_checkpoint(sums)
    run = tmp_path / "run"
    bookgpt.train_run(
        bookgpt.get_config("tiny", steps=5), data_dir, run, device="cpu", progress=False
    )
    state = torch.load(run / "ckpt.pt", weights_only=True)
    state["model_config"]["n_embd"] = 48
    torch.save(state, tmp_path / "mismatch.pt")
    with pytest.raises(CheckpointError, match="weights do not match its config"):
        bookgpt.load_checkpoint(tmp_path / "mismatch.pt")
    assert bookgpt.main(["sample", str(tmp_path / "missing.pt")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_cli_keeps_prepare_and_reports_a_missing_corpus(tmp_path, capsys):
    assert bookgpt.main(["train", "--config", "tiny", "--data", str(tmp_path / "none"),
                   "--no-progress"]) == 2  # fmt: skip
    assert "bookgpt prepare" in capsys.readouterr().err
    folder = tmp_path / "books"
    folder.mkdir()
    (folder / "a.txt").write_text(TEXT * 3, encoding="utf-8")
    assert bookgpt.main(["prepare", "--corpus", str(folder), "--out", str(tmp_path / "d")]) == 0
    assert (tmp_path / "d" / "meta.json").is_file()
