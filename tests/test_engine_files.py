"""The engine's files: atomic writes, and the one checkpoint format with its errors and readers."""

import os
import pickle

import pytest
import torch

from course_utils import GPT, GPTConfig, build_model
from course_utils.engine import checkpoint
from course_utils.engine.checkpoint import CheckpointError, read_checkpoint
from course_utils.engine.io import atomic_folder, atomic_write, atomic_write_text


def tiny():
    config = GPTConfig(vocab_size=7, block_size=4, n_layer=1, n_head=1, n_embd=8)
    return build_model(GPT, config, seed=0, device="cpu")


def test_atomic_write_replaces_whole_files_and_leaves_nothing_behind(tmp_path):
    path = tmp_path / "sub" / "ckpt.pt"
    atomic_write(path, lambda f: torch.save({"a": torch.ones(2)}, f))
    assert torch.equal(torch.load(path)["a"], torch.ones(2))
    with pytest.raises((pickle.PicklingError, AttributeError)):  # a lambda cannot be pickled
        atomic_write(path, lambda f: torch.save({"f": lambda: 0}, f))
    assert torch.equal(torch.load(path)["a"], torch.ones(2))  # the old file survived
    assert os.listdir(path.parent) == ["ckpt.pt"]
    atomic_write_text(tmp_path / "log.csv", "a,b\n")
    assert (tmp_path / "log.csv").read_text() == "a,b\n"
    assert oct((tmp_path / "log.csv").stat().st_mode & 0o777) == "0o644"


def test_atomic_folder_swaps_in_whole_or_not_at_all(tmp_path):
    out = tmp_path / "corpus"
    atomic_folder(out, lambda tmp: (tmp / "a.bin").write_bytes(b"1"))

    def fail(tmp):
        (tmp / "a.bin").write_bytes(b"2")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_folder(out, fail)
    assert (out / "a.bin").read_bytes() == b"1" and os.listdir(tmp_path) == ["corpus"]


def test_checkpoints_round_trip_the_model_and_meta(tmp_path):
    model = tiny()
    path = checkpoint.save_checkpoint(tmp_path / "c.pt", model, step=3, meta={"project": "x"})
    state = read_checkpoint(path, project="x")
    again = checkpoint.model_from_checkpoint(state, path)
    ids = torch.tensor([[1, 2, 3]])
    assert torch.equal(again(ids), model.eval()(ids)) and state["step"] == 3


@pytest.mark.parametrize(
    "payload, message",
    [
        (b"not a checkpoint at all", "is corrupt or not a PyTorch file"),
        ({"weights": 1}, "is not a course checkpoint"),
        ([1, 2, 3], "is not a course checkpoint"),
        ({"format": checkpoint.FORMAT, "version": 99, "meta": {}}, "version 99.*update the course"),
    ],
)
def test_bad_checkpoints_name_the_file_and_the_fix(tmp_path, payload, message):
    path = tmp_path / "bad.pt"
    if isinstance(payload, bytes):
        path.write_bytes(payload)
    else:
        torch.save(payload, path)
    with pytest.raises(CheckpointError, match=message) as err:
        read_checkpoint(path)
    assert str(path) in str(err.value)


def test_a_truncated_checkpoint_is_corrupt(tmp_path):
    path = checkpoint.save_checkpoint(tmp_path / "c.pt", tiny(), meta={"project": "x"})
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(CheckpointError, match="corrupt.*delete it and train again"):
        read_checkpoint(path)


def test_mismatched_weights_are_named(tmp_path):
    model = tiny()
    path = checkpoint.save_checkpoint(tmp_path / "c.pt", model, meta={"project": "x"})
    state = read_checkpoint(path)
    state["model_config"]["n_embd"] = 16
    state["model_config"]["n_head"] = 2
    with pytest.raises(CheckpointError, match="shape mismatch: tok_emb.weight"):
        checkpoint.model_from_checkpoint(state, path)


def test_the_earlier_sumgpt_and_bookgpt_formats_are_read(tmp_path):
    model = tiny()
    config = {k: getattr(model.config, k) for k in model.config.__dataclass_fields__}
    old_sum = {"kind": "sumgpt", "version": 1, "config": config, "reverse": False,
               "state_dict": model.state_dict(), "meta": {"steps": 5}}  # fmt: skip
    torch.save(old_sum, tmp_path / "sum.pt")
    state = read_checkpoint(tmp_path / "sum.pt", project="sumgpt")
    assert state["meta"] == {"project": "sumgpt", "reverse": False, "steps": 5}
    checkpoint.model_from_checkpoint(state)
    old_book = {"format": "bookgpt-checkpoint-1", "run_config": {"name": "cpu"},
                "gpt_config": config, "itos": list("abcdefg"), "step": 2,
                "model": model.state_dict(), "optimizer": None, "rng": torch.get_rng_state(),
                "cuda_rng": [], "history": {"losses": [1.0, 0.5]}}  # fmt: skip
    torch.save(old_book, tmp_path / "book.pt")
    state = read_checkpoint(tmp_path / "book.pt", project="bookgpt")
    assert state["meta"]["itos"] == list("abcdefg") and state["step"] == 2
    with pytest.raises(CheckpointError, match="written by 'bookgpt', not 'sumgpt'"):
        read_checkpoint(tmp_path / "book.pt", project="sumgpt")


def test_a_corrupt_checkpoint_quotes_only_torchs_first_sentence(tmp_path, monkeypatch):
    """What follows it (advice, which torch 2.9 and 2.13 word differently) stays out, so the
    line a lesson prints is the same on every torch the course allows."""
    path = checkpoint.save_checkpoint(tmp_path / "c.pt", tiny(), meta={"project": "x"})

    def load(*args, **kwargs):
        raise RuntimeError("reading failed: no central directory. This is a miniz error. Retry")

    monkeypatch.setattr(checkpoint.torch, "load", load)
    with pytest.raises(CheckpointError) as err:
        read_checkpoint(path)
    assert "(RuntimeError: reading failed: no central directory);" in str(err.value)
