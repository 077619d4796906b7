"""The shared training loop: schedule, optimizer groups, clipping, evaluation, checkpoints."""

import json
import math
from dataclasses import replace

import pytest
import torch
from torch import nn

from course_utils import GPT, GPTConfig, build_model
from course_utils.core.model import lm_loss
from course_utils.engine.checkpoint import CHECKPOINT_NAME, CheckpointError, read_checkpoint
from course_utils.engine.training import (
    History,
    NonFiniteError,
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
    with pytest.raises(CheckpointError, match=r"meta.lr was 1, now 2; resume with lr=1"):
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
    out = trainer.train_step(*batch_at(0))
    assert out.shape == (2,) and out.requires_grad is False
    assert not torch.equal(before, model.tok_emb.weight)


def test_history_defaults():
    h = History()
    assert h.steps == 0 and h.metric("x") == ([], [])


def test_compile_by_default_only_for_long_bf16_runs_on_a_cpu(monkeypatch):

    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    from course_utils.engine import policy

    monkeypatch.setattr(policy, "_has_cpp_compiler", lambda: True)
    long = TrainConfig(steps=5000, precision="bf16", progress=False)
    assert uses_compile(long, cpu) and not uses_compile(long, cuda)
    assert not uses_compile(replace(long, steps=4999), cpu)  # a first compile would not pay
    assert uses_compile(replace(long, steps=10, time_budget=120.0), cpu)
    assert not uses_compile(replace(long, time_budget=119.0), cpu)
    assert not uses_compile(replace(long, precision="fp32"), cpu)  # fp32 gains 4-8%
    assert not uses_compile(replace(long, compile=False), cpu)
    assert uses_compile(replace(long, precision="fp32", steps=5, compile=True), cpu)
    monkeypatch.setattr(policy, "_has_cpp_compiler", lambda: False)  # inductor needs one
    assert not uses_compile(long, cpu)


def test_auto_takes_bf16_sooner_in_a_run_that_compiles(monkeypatch):
    """Where bf16's eager step is no faster than fp32's but no slower (BookGPT's width-64 MLP
    on an AMX Xeon: 1.03-1.21x), a long run trains in bf16, compiled (where the compile fuses the
    casts around the matmuls), and a short run in fp32, eager; below 1.0x both stay fp32."""
    from course_utils.core import cpu as cpu_module
    from course_utils.engine import policy

    cpu = torch.device("cpu")
    monkeypatch.setattr(policy, "_has_cpp_compiler", lambda: True)
    monkeypatch.setattr(cpu_module, "cpu_class", lambda: "amx")
    for speedup, short, long in (
        (1.16, "fp32", "bf16"),
        (0.7, "fp32", "fp32"),
        (1.03, "fp32", "bf16"),
        (0.95, "fp32", "fp32"),
        (2.0, "bf16", "bf16"),
    ):
        probe = cpu_module.BF16Probe(64, speedup * 1e-3, 1e-3, "amx")
        monkeypatch.setattr(cpu_module, "bf16_probe", lambda width, probe=probe: probe)
        quick = TrainConfig(steps=100, progress=False)
        lengthy = replace(quick, steps=5000)
        assert policy.run_precision(quick, cpu, 64) == short, speedup
        assert policy.run_precision(lengthy, cpu, 64) == long, speedup
        assert uses_compile(lengthy, cpu, 64) == (long == "bf16") and not uses_compile(quick, cpu)
        no_compile = replace(lengthy, compile=False)  # --no-compile: the eager rule again
        assert policy.run_precision(no_compile, cpu, 64) == short, speedup


def test_a_failed_automatic_compile_trains_uncompiled_with_a_warning(monkeypatch):
    from torch._dynamo.exc import BackendCompilerFailed

    from course_utils.engine import policy

    class Broken(nn.Module):  # what torch.compile returns when inductor cannot build
        def __init__(self, model):
            super().__init__()
            self._orig_mod = model

        def forward(self, x):
            err = BackendCompilerFailed.__new__(BackendCompilerFailed)
            Exception.__init__(err, "backend='inductor' raised: no C++ compiler")
            raise err

    monkeypatch.setattr(
        policy, "uses_compile", lambda config, device, width=None: config.compile is not False
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


def test_ctrl_c_stops_at_a_step_boundary_saves_and_the_resume_matches(tmp_path):
    """A real SIGINT in the middle of step 7 lets that step finish, then the run saves and
    re-raises; resuming gives the uninterrupted run's losses (dropout on: the RNG came back)."""
    import os
    import signal

    cfg = TrainConfig(steps=12, warmup_steps=2, checkpoint_every=100, log_every=5,
                      progress=False)  # fmt: skip
    whole = train(dropout_model(), batch_at, cfg)

    def interrupted_at_7(step):
        if step == 6:
            os.kill(os.getpid(), signal.SIGINT)
        return batch_at(step)

    with pytest.raises(KeyboardInterrupt, match="after step 7"):
        train(dropout_model(), interrupted_at_7, cfg, out_dir=tmp_path)
    state = read_checkpoint(tmp_path / CHECKPOINT_NAME)
    assert state["step"] == 7 and len(state["history"]["losses"]) == 7
    resumed = train(dropout_model(seed=3), batch_at, cfg, out_dir=tmp_path, resume=True)
    assert resumed.losses == whole.losses


def test_an_error_between_steps_still_saves_what_was_trained(tmp_path):
    cfg = TrainConfig(steps=12, warmup_steps=2, log_every=5, progress=False)
    whole = train(dropout_model(), batch_at, cfg)

    def fails_at_9(step):
        if step == 9:
            raise OSError("the data disk went away")
        return batch_at(step)

    with pytest.raises(OSError, match="disk"):
        train(dropout_model(), fails_at_9, cfg, out_dir=tmp_path)
    assert read_checkpoint(tmp_path / CHECKPOINT_NAME)["step"] == 9
    assert len(json.loads((tmp_path / "log.json").read_text())["losses"]) == 9
    resumed = train(dropout_model(), batch_at, cfg, out_dir=tmp_path, resume=True)
    assert resumed.losses == whole.losses


def test_an_early_stop_writes_a_final_checkpoint(tmp_path):
    cfg = TrainConfig(steps=20, eval_every=3, warmup_steps=1, progress=False)
    history = train(tiny_model(), batch_at, cfg, out_dir=tmp_path, evaluate=lambda m, s: {"s": s},
                    stop_when=lambda row: row["s"] >= 6)  # fmt: skip
    assert history.steps == 6 and history.stop_reason == "stop_when"
    assert read_checkpoint(tmp_path / CHECKPOINT_NAME)["step"] == 6


def test_a_diverging_run_stops_at_the_log_point_naming_the_step(tmp_path):
    """Non-finite values are found where the losses are read back anyway (no extra sync), and
    the checkpoint on disk is the last good one."""
    cfg = TrainConfig(steps=40, warmup_steps=1, log_every=10, checkpoint_every=10,
                      progress=False)  # fmt: skip
    calls = []

    def poisoned_loss(logits, y):  # the 14th update's loss and all after it are infinite
        calls.append(1)
        return lm_loss(logits, y) * (math.inf if len(calls) >= 14 else 1.0)

    with pytest.raises(NonFiniteError, match=r"step 14: loss inf .* checkpoint of step 10"):
        train(tiny_model(), batch_at, cfg, out_dir=tmp_path, loss_fn=poisoned_loss)
    state = read_checkpoint(tmp_path / CHECKPOINT_NAME)
    assert state["step"] == 10
    assert all(torch.isfinite(v).all() for v in state["model"].values())
    logged = json.loads((tmp_path / "log.json").read_text())
    assert logged["stop_reason"] == "non_finite" and len(logged["losses"]) == 20


def test_resume_refuses_a_changed_run_in_one_line_and_extend_goes_on_at_the_floor(tmp_path):
    cfg = TrainConfig(steps=10, warmup_steps=2, lr=1e-2, progress=False)
    train(tiny_model(), batch_at, cfg, out_dir=tmp_path, meta={"project": "test"})
    for change, field in [({"steps": 30}, "train.steps was 10, now 30"),
                          ({"lr": 2e-2}, "train.lr was 0.01, now 0.02"),
                          ({"seed": 1}, "train.seed was 0, now 1")]:  # fmt: skip
        with pytest.raises(CheckpointError, match=field) as err:
            train(tiny_model(), batch_at, replace(cfg, **change), out_dir=tmp_path,
                  resume=True, meta={"project": "test"})  # fmt: skip
        assert "\n" not in str(err.value)
    wider = GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=32)
    with pytest.raises(CheckpointError, match="model.n_embd was 16, now 32"):
        train(build_model(GPT, wider, device="cpu"), batch_at, cfg, out_dir=tmp_path,
              resume=True, meta={"project": "test"})  # fmt: skip
    longer = train(tiny_model(), batch_at, replace(cfg, steps=14), out_dir=tmp_path,
                   resume=True, extend=True, meta={"project": "test"})  # fmt: skip
    assert longer.steps == 14
    assert longer.lrs[10:] == pytest.approx([1e-3] * 4)  # the cosine's floor, lr * 0.1


def test_an_older_checkpoint_loads_but_is_not_resumed(tmp_path):
    cfg = TrainConfig(steps=3, warmup_steps=1, progress=False)
    train(tiny_model(), batch_at, cfg, out_dir=tmp_path)
    path = tmp_path / CHECKPOINT_NAME
    state = torch.load(path, weights_only=True)
    state.update(version=1, run=None)
    torch.save(state, path)
    assert read_checkpoint(path)["step"] == 3
    with pytest.raises(CheckpointError, match="format version 1.*start a new run"):
        train(tiny_model(), batch_at, cfg, out_dir=tmp_path, resume=True)


def test_the_gradient_norm_is_the_norm_of_all_gradients_together():
    from course_utils.engine import optimizer

    grads = [torch.randn(3, 4), torch.randn(5), torch.randn(2, 2, 2)]
    expected = torch.linalg.vector_norm(torch.cat([g.flatten() for g in grads]))
    assert optimizer.total_norm(grads) == pytest.approx(float(expected), rel=1e-6)
    cfg = TrainConfig(steps=3, warmup_steps=1, grad_clip=None, progress=False)
    assert len(train(tiny_model(), batch_at, cfg).grad_norms) == 3


def test_throughput_is_logged_at_log_points_with_mfu_given_a_peak():
    cfg = TrainConfig(steps=10, warmup_steps=1, log_every=5, peak_flops=1e12, progress=False)
    history = train(tiny_model(), batch_at, cfg)
    assert [row["step"] for row in history.throughput] == [5, 10]
    assert all(row["tokens_per_s"] > 0 and 0 < row["mfu"] < 1 for row in history.throughput)


def test_muon_takes_the_hidden_matrices_and_adamw_the_rest_on_one_schedule():
    from course_utils.engine.optimizer import hidden_matrices

    model = tiny_model()
    hidden = {id(p) for p in hidden_matrices(model)}
    names = {n for n, p in model.named_parameters() if id(p) in hidden}
    assert names and all(n.startswith("blocks.") and n.endswith(".weight") for n in names)
    assert not any("norm" in n or "ln" in n for n in names)  # matrices only: no gains
    assert id(model.tok_emb.weight) not in hidden and id(model.pos_emb.weight) not in hidden
    cfg = TrainConfig(steps=30, lr=3e-3, warmup_steps=3, weight_decay=0.0, optimizer="muon",
                      progress=False)  # fmt: skip
    trainer = Trainer(model, cfg)
    muon, adamw = trainer.optimizer.optimizers
    assert isinstance(muon, torch.optim.Muon) and isinstance(adamw, torch.optim.AdamW)
    assert {id(p) for g in muon.param_groups for p in g["params"]} == hidden
    assert len(hidden) + sum(len(g["params"]) for g in adamw.param_groups) == len(
        list(model.parameters())
    )
    trainer.set_lr(1.5e-3)  # half the peak: both halve
    assert muon.param_groups[0]["lr"] == pytest.approx(0.01)
    assert all(g["lr"] == 1.5e-3 for g in adamw.param_groups)
    history = train(tiny_model(), copy_task(), cfg, device="cpu")
    assert history.losses[-1] < 0.8 * history.losses[0]  # it learns


def test_a_muon_run_resumes_to_the_uninterrupted_losses(tmp_path):
    cfg = TrainConfig(steps=12, warmup_steps=2, lr=3e-3, weight_decay=0.0, optimizer="muon",
                      checkpoint_every=5, progress=False)  # fmt: skip
    whole = train(dropout_model(), batch_at, cfg)
    train(dropout_model(), batch_at, cfg, out_dir=tmp_path, stop_after=7)
    resumed = train(dropout_model(), batch_at, cfg, out_dir=tmp_path, resume=True)
    assert resumed.losses == whole.losses  # both optimizers' state came back


def test_an_unknown_optimizer_is_a_clear_error():
    with pytest.raises(ValueError, match="optimizer must be one of"):
        TrainConfig(steps=3, optimizer="sgd")


def test_precision_auto_is_decided_once_and_a_resume_keeps_it(tmp_path, monkeypatch):
    """A resumed run computes in the precision the run it continues decided, even where this
    process's bf16 probe reads otherwise (a busy CPU's can); a fresh run decides anew."""
    import course_utils.engine.policy as policy

    cfg = TrainConfig(steps=6, warmup_steps=1, checkpoint_every=3, progress=False)
    assert cfg.precision == "auto"
    meta = {"project": "test"}
    monkeypatch.setattr(policy, "prefers_bf16", lambda device, width=None, compiled=False: True)
    whole = train(tiny_model(), batch_at, cfg, meta=meta)
    train(tiny_model(), batch_at, cfg, out_dir=tmp_path, meta=meta, stop_after=4)
    state = read_checkpoint(tmp_path / CHECKPOINT_NAME, project="test")
    assert state["step"] == 3 and state["run"]["resolved"] == {"precision": "bf16", "device": "cpu"}
    monkeypatch.setattr(policy, "prefers_bf16", lambda device, width=None, compiled=False: False)
    resumed = train(tiny_model(), batch_at, cfg, out_dir=tmp_path, meta=meta, resume=True)
    assert resumed.losses == whole.losses  # bf16 all the way, as the run began
    fresh = train(tiny_model(), batch_at, cfg, meta=meta)
    assert fresh.losses[:3] != whole.losses[:3]  # a fresh run decides anew: fp32 here


def test_logged_throughput_is_exact_under_a_fake_clock(tmp_path, monkeypatch):
    """The clock moves 0.25 s per batch drawn and 7 s per evaluation (which the rate leaves
    out): tokens/s is the tokens of the updates since the last log point (batch x context,
    not rows) over their seconds, and MFU their training FLOPs over the peak, exactly."""
    import types

    from course_utils.core.flops import training_flops
    from course_utils.engine import training

    now = [100.0]
    monkeypatch.setattr(training, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))

    def batch(step):
        now[0] += 0.25
        x = torch.randint(11, (6, 8), generator=torch.Generator().manual_seed(step))
        return x, x.clone()

    def evaluate(model, step):
        now[0] += 7.0
        return {"score": 1.0}

    model = tiny_model()
    cfg = TrainConfig(steps=12, warmup_steps=1, log_every=4, eval_every=6, peak_flops=1e9,
                      progress=False)  # fmt: skip
    history = train(model, batch, cfg, evaluate=evaluate, out_dir=tmp_path)
    flops = training_flops(model.config, 6, 8)
    # log points at 4, 6 (evaluation), 8, 12 (evaluation and the end): 4, 2, 2, 4 updates
    expected = [(4, 4), (6, 2), (8, 2), (12, 4)]
    assert [row["step"] for row in history.throughput] == [s for s, _ in expected]
    for row, (_, n) in zip(history.throughput, expected):
        assert row["tokens_per_s"] == n * 6 * 8 / (n * 0.25)
        assert row["mfu"] == pytest.approx(n * flops / (n * 0.25) / 1e9, rel=1e-12)
    logged = json.loads((tmp_path / "log.json").read_text())["throughput"]
    assert [row["tokens_per_s"] for row in logged] == [192.0] * 4


def test_each_ddp_rank_trains_on_its_share_of_the_global_batch():
    """Under DDP every rank draws the same global batch and updates on its own slice of it;
    the slices, in rank order, are the global batch. (DDP's averaged gradient is the same
    whether or not the batch is sharded, so the end result alone cannot show this.)"""
    from course_utils.engine.distributed import Dist

    seen = []
    for rank in range(2):
        model = tiny_model()
        cfg = TrainConfig(steps=4, warmup_steps=0, progress=False)
        trainer = Trainer(model, cfg, batch_at=batch_at, dist=Dist(rank, 2), net=model)
        trainer.train_step = lambda x, y: seen.append((x, y)) or torch.zeros(2)
        trainer.one_step(3)
    x, y = batch_at(3)
    assert [tuple(a.shape) for a, _ in seen] == [(4, 8), (4, 8)]
    assert torch.equal(seen[0][0], x[:4]) and torch.equal(seen[1][0], x[4:])
    assert torch.equal(seen[0][1], y[:4]) and torch.equal(seen[1][1], y[4:])


def test_a_resume_on_another_number_of_processes_gives_every_rank_its_own_stream(tmp_path):
    """Each rank takes up the dropout stream the checkpoint saved for its rank; a rank the
    checkpoint has none for (more processes than it saved) starts one of its own, seeded from
    the run's seed, its rank and the step: no two ranks share dropout masks."""
    from course_utils.engine.distributed import Dist, resume_seed

    cfg = TrainConfig(steps=8, warmup_steps=1, checkpoint_every=4, progress=False, seed=3)
    meta = {"project": "t"}
    run = tmp_path / "run"  # one process, stopped as a crash would after step 6
    train(dropout_model(), batch_at, cfg, out_dir=run, stop_after=6, meta=meta)

    def stream_after_resume(rank: int, world: int) -> torch.Tensor:
        model = dropout_model()
        Trainer(model, cfg, batch_at=batch_at, out_dir=run, resume=True, meta=meta,
                dist=Dist(rank, world), net=model)  # fmt: skip
        return torch.get_rng_state()

    path = run / CHECKPOINT_NAME
    state = torch.load(path, weights_only=True)
    assert state["step"] == 4 and len(state["rank_rng"]) == 1
    saved = state["rank_rng"][0]["torch"]
    assert torch.equal(stream_after_resume(0, 2), saved)
    fresh = torch.Generator().manual_seed(resume_seed(3, 1, 4)).get_state()
    assert torch.equal(stream_after_resume(1, 2), fresh) and not torch.equal(fresh, saved)
    assert resume_seed(3, 1, 4) not in {resume_seed(3, 2, 4), resume_seed(3, 1, 8), 3}
    # two ranks saved: one process takes up rank 0's stream, two processes each their own
    other = torch.Generator().manual_seed(99).get_state()
    state["rank_rng"] = [state["rank_rng"][0], {"torch": other, "cuda": []}]
    torch.save(state, path)
    assert torch.equal(stream_after_resume(0, 1), saved)
    assert torch.equal(stream_after_resume(1, 2), other)
    # a checkpoint from before rank_rng: rank 0 takes its one state
    state["rank_rng"] = None
    torch.save(state, path)
    assert torch.equal(stream_after_resume(0, 2), saved)
    assert torch.equal(stream_after_resume(1, 2), fresh)
