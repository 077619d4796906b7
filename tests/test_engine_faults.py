"""Faults a broken training engine could have that the other tests would let through: validation
scored on the training split, clipping after the optimizer step, a host read of a device tensor
in every step. Each check drives only the public API (``train``, ``TrainConfig``,
``bookgpt.train_run``) and is shown failing on an engine broken inside the test itself."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_pre_hook

from course_utils import GPT, GPTConfig, build_model, lm_loss
from course_utils.engine.training import TrainConfig, train
from course_utils.projects import bookgpt, corpus

CLIP = 0.05  # far below the gradient norms of a fresh model, so every step needs clipping


# ---- validation is scored on the validation split --------------------------------------------


@pytest.fixture(scope="module")
def two_texts(tmp_path_factory):
    """A corpus whose books train on one repeating line and validate on its reverse: a model
    that learned its training text predicts the validation text badly."""
    line_train, line_val = "abcdefgh\n", "hgfedcba\n"
    books = tuple(
        corpus.Book(f"book {i}", line_train * 900 + "\n" + line_val * 100, "\n\n") for i in range(4)
    )
    out = tmp_path_factory.mktemp("two_texts") / "data"
    corpus.prepare(corpus.Corpus("test: two texts", books), out)
    return out


def final_losses(data) -> dict:
    cfg = bookgpt.get_config(
        "tiny", steps=40, eval_every=0, eval_batches=2, dropout=0.0, warmup_steps=5
    )
    _, history = bookgpt.train_run(cfg, data, None, device="cpu", precision="fp32", progress=False)
    return history.evals[-1]


def test_validation_is_scored_on_the_val_split(two_texts):
    last = final_losses(two_texts)
    assert last["train_loss"] < 1.0 and last["val_loss"] > last["train_loss"] + 1.0, last


@pytest.mark.parametrize("wrong", [{"val": "train"}, {"train": "val"}])
def test_the_split_check_fails_when_a_split_is_read_in_place_of_the_other(
    two_texts, monkeypatch, wrong
):
    """A project that scores validation on the training split, or trains on the validation
    split: the check above then sees val at or below train."""
    load = corpus.load_split
    monkeypatch.setattr(
        corpus, "load_split", lambda d, split, **kw: load(d, wrong.get(split, split), **kw)
    )
    last = final_losses(two_texts)
    assert not (last["val_loss"] > last["train_loss"] + 1.0), last


# ---- clipping happens before optimizer.step() ------------------------------------------------


def norms_seen_by_step(steps: int = 8) -> tuple[list[float], list[float]]:
    """(global gradient norm at each optimizer.step() call, the norms the history logged),
    read by a global pre-hook on every optimizer's step."""
    seen: list[float] = []

    def pre_hook(optimizer, args, kwargs):
        grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        seen.append(float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))))

    config = GPTConfig(vocab_size=16, block_size=8, n_layer=1, n_head=2, n_embd=16)
    model = build_model(GPT, config, seed=0, device="cpu")
    x = torch.randint(16, (4, 8), generator=torch.Generator().manual_seed(0))
    cfg = TrainConfig(steps=steps, lr=1e-3, warmup_steps=1, grad_clip=CLIP, log_every=steps,
                      precision="fp32", compile=False, progress=False)  # fmt: skip
    handle = register_optimizer_step_pre_hook(pre_hook)
    try:
        history = train(model, lambda step: (x, x.roll(-1, 1)), cfg)
    finally:
        handle.remove()
    return seen, history.grad_norms


def test_the_optimizer_steps_with_clipped_gradients():
    seen, logged = norms_seen_by_step()
    assert len(seen) == 8 and min(logged) > 2 * CLIP  # every step needed clipping
    assert max(seen) <= CLIP * (1 + 1e-4), seen


def test_the_clipping_check_fails_when_clipping_comes_after_the_step(monkeypatch):
    """An engine that clips after optimizer.step() hands the step unclipped gradients; a
    clip_grad_norm_ that leaves the gradients alone is what step() then sees."""

    def no_clip(parameters, max_norm, *args, **kwargs):
        grads = [p.grad for p in parameters if p.grad is not None]
        return torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", no_clip)
    seen, _ = norms_seen_by_step()
    assert max(seen) > CLIP * (1 + 1e-4)


# ---- no host read of a tensor in the step ----------------------------------------------------

HOST_READS = ("item", "tolist", "cpu", "numpy", "__float__", "__int__", "__bool__", "__index__")


class TinyLM(nn.Module):
    """A language model with no input check: GPT's ``check_input`` reads the CPU batch's ids,
    which on a CPU cannot be told apart from a read of a device tensor."""

    def __init__(self, vocab_size: int = 16, width: int = 16) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab_size, width)
        self.head = nn.Linear(width, vocab_size)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.head(self.emb(idx))


def host_reads(monkeypatch, steps: int, loss_fn=lm_loss) -> int:
    """How many times a run of ``steps`` updates, with one log point at the end and no
    evaluation, reads a tensor back to the host (every Tensor method that does, patched)."""
    count = [0]
    for name in HOST_READS:
        real = getattr(torch.Tensor, name)

        def counting(self, *args, _real=real, **kwargs):
            count[0] += 1
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counting)
    torch.manual_seed(0)
    model = TinyLM()
    x = torch.randint(16, (4, 8), generator=torch.Generator().manual_seed(0))
    cfg = TrainConfig(steps=steps, warmup_steps=1, log_every=steps, precision="fp32",
                      compile=False, progress=False)  # fmt: skip
    before = count[0]
    train(model, lambda step: (x, x.roll(-1, 1)), cfg, loss_fn=loss_fn)
    reads = count[0] - before
    monkeypatch.undo()
    return reads


def test_the_step_reads_nothing_back_between_log_points(monkeypatch):
    """Reads that do not grow with the number of steps happen at the log points only."""
    assert host_reads(monkeypatch, 10) == host_reads(monkeypatch, 30)


def test_the_host_read_check_fails_for_a_step_that_calls_item(monkeypatch):
    """A loss that reads itself back every step (``loss.item()``, as a broken engine logging
    each loss would) makes the count grow with the steps."""

    def reading_loss(logits, targets):
        loss = lm_loss(logits, targets)
        loss.item()
        return loss

    short = host_reads(monkeypatch, 10, reading_loss)
    long = host_reads(monkeypatch, 30, reading_loss)
    assert long - short == 20
