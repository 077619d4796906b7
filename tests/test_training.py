"""The shared training loop: schedule, optimizer groups, clipping, evaluation, checkpoints."""

import json
import math
from dataclasses import replace

import pytest
import torch
from torch import nn

from course_utils import GPT, GPTConfig, build_model
from course_utils.engine.checkpoint import CHECKPOINT_NAME, CheckpointError, read_checkpoint
from course_utils.engine.training import (
    History,
    TrainConfig,
    Trainer,
    autocast_for,
    configure_optimizer,
    lr_at,
    train,
    uses_compile,
)


def tiny_model(seed=0):
    config = GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=16)
    return build_model(GPT, config, seed=seed, device="cpu")


def copy_task(seed=0, batch=16):
    """Predict the token itself shifted by one: y[t] = x[t] (learnable in a few steps)."""
    g = torch.Generator().manual_seed(seed)

    def get_batch(step):
        x = torch.randint(11, (batch, 8), generator=g)
        return x, x.clone()

    return get_batch


def test_schedule_warms_up_linearly_then_follows_a_cosine_to_the_floor():
    cfg = TrainConfig(steps=110, lr=1.0, warmup_steps=10, min_lr_ratio=0.1)
    lrs = [lr_at(s, cfg) for s in range(cfg.steps)]
    assert lrs[:10] == pytest.approx([(s + 1) / 10 for s in range(10)])
    assert lrs[10] == pytest.approx(1.0)
    assert lrs[-1] == pytest.approx(0.1)
    assert lrs[60] == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 50 / 99)))
    after = lrs[10:]
    assert all(a >= b for a, b in zip(after, after[1:]))


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="steps"):
        TrainConfig(steps=0)
    with pytest.raises(ValueError, match="precision"):
        TrainConfig(steps=1, precision="fp16")
    with pytest.raises(ValueError, match="min_lr_ratio"):
        TrainConfig(steps=1, min_lr_ratio=2.0)
    with pytest.raises(ValueError, match="grad_clip"):
        TrainConfig(steps=1, grad_clip=0.0)


def test_weight_decay_applies_to_matrices_only_and_tied_weights_once():
    model = tiny_model()
    opt = configure_optimizer(model, lr=1e-3, weight_decay=0.1)
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert all(p.dim() >= 2 for p in decay["params"])
    assert all(p.dim() == 1 for p in no_decay["params"])
    ids = [id(p) for g in opt.param_groups for p in g["params"]]
    assert len(ids) == len(set(ids)) == len(list(model.parameters()))
    assert any(p is model.tok_emb.weight for p in decay["params"])  # the tied head, once


def test_training_is_seeded_learns_and_records_a_history():
    cfg = TrainConfig(steps=60, lr=1e-2, warmup_steps=5, progress=False)
    first = train(tiny_model(), copy_task(), cfg, device="cpu")
    again = train(tiny_model(), copy_task(), cfg, device="cpu")
    assert first.losses == again.losses
    assert len(first.losses) == len(first.lrs) == len(first.grad_norms) == 60
    assert first.losses[-1] < 0.3 * first.losses[0]
    assert first.lrs[:5] == pytest.approx([1e-2 * (s + 1) / 5 for s in range(5)])
    assert first.seconds > 0


def test_evaluation_runs_on_schedule_in_eval_mode_and_can_stop_training():
    seen = []

    def evaluate(model, step):
        seen.append((step, model.training, torch.is_grad_enabled()))
        return {"score": step / 10}

    model = tiny_model()
    cfg = TrainConfig(steps=7, eval_every=3, warmup_steps=1, progress=False)
    history = train(model, copy_task(), cfg, evaluate=evaluate, device="cpu")
    assert seen == [(3, False, False), (6, False, False), (7, False, False)]
    assert model.training  # put back in training mode
    assert history.metric("score") == ([3, 6, 7], [0.3, 0.6, 0.7])
    assert history.first_step_reaching("score", 0.5)["step"] == 6
    assert history.first_step_reaching("score", 0.9) is None

    cfg = TrainConfig(steps=20, eval_every=2, warmup_steps=1, progress=False)
    stopped = train(
        tiny_model(),
        copy_task(),
        cfg,
        evaluate=lambda m, s: {"score": s},
        stop_when=lambda row: row["score"] >= 4,
        device="cpu",
    )
    assert stopped.steps == 4 and stopped.stopped_early


def test_gradients_are_clipped_to_the_limit_and_norms_are_recorded_before_clipping():
    model = tiny_model()
    cfg = TrainConfig(steps=3, grad_clip=1e-3, warmup_steps=1, progress=False)
    history = train(model, copy_task(), cfg, device="cpu")
    norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()]))
    assert float(norm) <= 1e-3 * 1.001
    assert min(history.grad_norms) > 1e-3  # what was measured before clipping


def test_bf16_autocast_on_cpu_and_plain_fp32_otherwise():
    cpu = torch.device("cpu")
    with autocast_for(cpu, "bf16"):
        y = nn.Linear(4, 4)(torch.ones(2, 4))
    assert y.dtype == torch.bfloat16
    with autocast_for(cpu, "fp32"):
        assert nn.Linear(4, 4)(torch.ones(2, 4)).dtype == torch.float32
    for amx, expected in ((True, torch.bfloat16), (False, torch.float32)):  # AMX CPUs only
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(torch.cpu, "_is_amx_tile_supported", lambda amx=amx: amx)
            with autocast_for(cpu, "auto"):
                assert nn.Linear(4, 4)(torch.ones(2, 4)).dtype == expected
    with pytest.raises(ValueError, match="precision"):
        autocast_for(cpu, "half")
    cfg = TrainConfig(steps=3, precision="bf16", warmup_steps=1, progress=False)
    history = train(tiny_model(), copy_task(), cfg, device="cpu")
    assert all(math.isfinite(v) for v in history.losses)


def batch_at(step, batch=8):
    """The copy task as a function of the step: what resumable runs need."""
    x = torch.randint(11, (batch, 8), generator=torch.Generator().manual_seed(step))
    return x, x.clone()


def dropout_model(seed=0):
    config = GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=16, dropout=0.2)
    return build_model(GPT, config, seed=seed, device="cpu")


def test_resume_after_a_stop_reproduces_the_uninterrupted_losses_exactly(tmp_path):
    """Dropout is on, so the RNG state must come back too, as must the AdamW moments."""
    cfg = TrainConfig(steps=30, warmup_steps=3, eval_every=10, checkpoint_every=10, log_every=4,
                      progress=False)  # fmt: skip
    meta = {"project": "test", "run": 1}
    whole = train(dropout_model(), batch_at, cfg, evaluate=lambda m, s: {"s": s}, meta=meta)
    stopped = train(dropout_model(), batch_at, cfg, out_dir=tmp_path, meta=meta, stop_after=17,
                    evaluate=lambda m, s: {"s": s})  # fmt: skip
    assert stopped.steps == 17
    state = read_checkpoint(tmp_path / CHECKPOINT_NAME, project="test")
    assert state["step"] == 10 and len(state["history"]["losses"]) == 10
    resumed = train(dropout_model(seed=5), batch_at, cfg, out_dir=tmp_path, meta=meta,
                    resume=True, evaluate=lambda m, s: {"s": s})  # fmt: skip
    assert resumed.losses == whole.losses and resumed.grad_norms == whole.grad_norms
    assert resumed.metric("s") == whole.metric("s") == ([10, 20, 30], [10, 20, 30])
    rows = (tmp_path / "log.csv").read_text().splitlines()
    assert rows[0] == "step,lr,loss,grad_norm,s" and len(rows) == 31
    assert rows[10].endswith(",10") and rows[11].endswith(",")
    logged = json.loads((tmp_path / "log.json").read_text())
    assert logged["losses"] == whole.losses


def test_a_run_refuses_to_overwrite_or_resume_the_wrong_run(tmp_path):
    cfg = TrainConfig(steps=4, warmup_steps=1, progress=False)
    train(tiny_model(), batch_at, cfg, out_dir=tmp_path, meta={"project": "test", "lr": 1})
    with pytest.raises(CheckpointError, match="exists; pass resume=True"):
        train(tiny_model(), batch_at, cfg, out_dir=tmp_path, meta={"project": "test", "lr": 1})
    with pytest.raises(CheckpointError, match=r"differs in \['lr'\]"):
        train(tiny_model(), batch_at, cfg, out_dir=tmp_path, resume=True,
              meta={"project": "test", "lr": 2})  # fmt: skip
    with pytest.raises(CheckpointError, match="written by 'test', not 'other'"):
        train(tiny_model(), batch_at, cfg, out_dir=tmp_path, resume=True,
              meta={"project": "other"})  # fmt: skip
    with pytest.raises(CheckpointError, match="does not exist"):
        train(tiny_model(), batch_at, cfg, out_dir=tmp_path / "new", resume=True)


def test_losses_are_read_back_only_at_log_points(monkeypatch):
    """Between log points nothing leaves the device: the loop keeps the step's tensors."""
    reads = []
    real = torch.Tensor.tolist
    monkeypatch.setattr(torch.Tensor, "tolist", lambda t: reads.append(t.shape) or real(t))
    cfg = TrainConfig(steps=12, warmup_steps=1, log_every=5, progress=False)
    history = train(tiny_model(), batch_at, cfg)
    assert history.steps == 12
    assert reads == [torch.Size([5])] * 4 + [torch.Size([2])] * 2  # loss and norm at 5, 10, 12


def test_a_time_budget_ends_the_run_and_drives_the_cosine(monkeypatch):
    """With a fake clock (each reading 10 ms later) the run is deterministic: the budget of
    0.5 s ends it, and the cosine follows the fraction of the time spent."""
    import types

    from course_utils.engine import training

    ticks = iter(range(10**6))
    monkeypatch.setattr(
        training, "time", types.SimpleNamespace(perf_counter=lambda: next(ticks) / 100)
    )
    cfg = TrainConfig(steps=10**6, warmup_steps=2, time_budget=0.5, progress=False)
    history = train(tiny_model(), batch_at, cfg)
    assert 5 < history.steps < 50 and history.seconds >= 0.5
    after = history.lrs[2:]
    assert all(a >= b for a, b in zip(after, after[1:]))  # the cosine, in time
    assert after[0] > 0.9 * cfg.lr and after[-1] < 0.2 * cfg.lr  # from the peak to the floor


def test_the_trainer_steps_without_reading_anything_back():
    model = tiny_model()
    trainer = Trainer(model, TrainConfig(steps=1, warmup_steps=0, progress=False))
    before = model.tok_emb.weight.detach().clone()
    out = trainer.step(*batch_at(0))
    assert out.shape == (2,) and out.requires_grad is False
    assert not torch.equal(before, model.tok_emb.weight)


def test_history_defaults():
    h = History()
    assert h.steps == 0 and h.metric("x") == ([], [])


def test_auto_precision_is_bf16_on_cuda_gpus_with_bf16_and_amx_cpus(monkeypatch):
    from course_utils.core import device as dev

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    assert dev.prefers_bf16("cuda") and not dev.prefers_bf16("cpu")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert not dev.prefers_bf16("cuda")
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)
    assert dev.prefers_bf16("cpu") and dev.has_amx()
    monkeypatch.delattr(torch.cpu, "_is_amx_tile_supported")  # an older torch: no AMX probe
    assert not dev.prefers_bf16("cpu")


def test_compile_by_default_only_for_long_bf16_runs_on_a_cpu(monkeypatch):
    from course_utils.engine import training

    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    monkeypatch.setattr(training, "_has_cpp_compiler", lambda: True)
    long = TrainConfig(steps=5000, precision="bf16", progress=False)
    assert uses_compile(long, cpu) and not uses_compile(long, cuda)
    assert not uses_compile(replace(long, steps=4999), cpu)  # a first compile would not pay
    assert uses_compile(replace(long, steps=10, time_budget=120.0), cpu)
    assert not uses_compile(replace(long, time_budget=119.0), cpu)
    assert not uses_compile(replace(long, precision="fp32"), cpu)  # fp32 gains 4-8%
    assert not uses_compile(replace(long, compile=False), cpu)
    assert uses_compile(replace(long, precision="fp32", steps=5, compile=True), cpu)
    monkeypatch.setattr(training, "_has_cpp_compiler", lambda: False)  # inductor needs one
    assert not uses_compile(long, cpu)


def test_a_failed_automatic_compile_trains_uncompiled_with_a_warning(monkeypatch):
    from torch._dynamo.exc import BackendCompilerFailed

    from course_utils.engine import training

    class Broken(nn.Module):  # what torch.compile returns when inductor cannot build
        def __init__(self, model):
            super().__init__()
            self._orig_mod = model

        def forward(self, x):
            err = BackendCompilerFailed.__new__(BackendCompilerFailed)
            Exception.__init__(err, "backend='inductor' raised: no C++ compiler")
            raise err

    monkeypatch.setattr(
        training, "uses_compile", lambda config, device: config.compile is not False
    )
    monkeypatch.setattr(torch, "compile", lambda model, **kw: Broken(model))
    cfg = TrainConfig(steps=3, warmup_steps=1, precision="fp32", progress=False)
    model = tiny_model()
    with pytest.warns(UserWarning, match="trains uncompiled.*no C\\+\\+ compiler"):
        history = train(model, copy_task(), cfg, device="cpu")
    expected = train(tiny_model(), copy_task(), replace(cfg, compile=False), device="cpu")
    assert history.losses == expected.losses  # the same run, eagerly
    with pytest.raises(BackendCompilerFailed):  # asked for explicitly: the error stands
        train(tiny_model(), copy_task(), replace(cfg, compile=True), device="cpu")


def test_a_compiled_bf16_run_is_deterministic_and_follows_the_eager_one():
    cfg = TrainConfig(steps=6, warmup_steps=2, precision="bf16", compile=True, progress=False)
    first = train(tiny_model(), copy_task(), cfg, device="cpu")
    again = train(tiny_model(), copy_task(), cfg, device="cpu")
    eager = train(tiny_model(), copy_task(), replace(cfg, compile=False), device="cpu")
    assert first.losses == again.losses
    assert first.losses == pytest.approx(eager.losses, rel=0.02)
    assert first.losses != eager.losses  # it did compile: the fused kernels round differently


def test_compile_for_takes_inductors_cpp_wrapper_on_a_cpu_only(monkeypatch):
    from course_utils.engine import training

    calls = []
    monkeypatch.setattr(torch, "compile", lambda net, **kw: calls.append(kw) or net)
    net = nn.Linear(2, 2)
    assert training.compile_for(net, torch.device("cpu")) is net
    training.compile_for(net, torch.device("cuda"), fullgraph=True)
    assert calls == [
        {"fullgraph": False, "options": {"cpp_wrapper": True}},
        {"fullgraph": True, "options": None},
    ]
