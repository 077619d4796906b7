"""SumGPT: format, masked targets, the held-out split, decoding, accuracy, checkpoints, CLI."""

import re

import pytest
import torch
from torch import nn

from course_utils import GPT, build_model, count_parameters
from course_utils.projects import sumgpt


def test_format_pads_operands_to_3_and_the_answer_to_4_digits_units_first():
    assert sumgpt.format_example(123, 456) == "123+456=9750\n"
    assert sumgpt.format_example(123, 456, reverse=False) == "123+456=0579\n"
    assert sumgpt.format_example(5, 7) == "005+007=2100\n"
    assert sumgpt.format_example(999, 999) == "999+999=8991\n"
    with pytest.raises(ValueError, match="out of range"):
        sumgpt.format_example(1000, 1)


def test_token_encoding_matches_the_text_format_and_fills_the_context_exactly():
    a = torch.tensor([0, 5, 123, 999, 450, 71])
    b = torch.tensor([0, 7, 456, 999, 550, 8])
    for reverse in (True, False):
        seq = sumgpt.encode_pairs(a, b, reverse)
        assert seq.shape == (6, sumgpt.SEQ_LEN) == (6, 13)
        for row, x, y in zip(seq, a.tolist(), b.tolist()):
            assert sumgpt.TOKENIZER.decode(row) == sumgpt.format_example(x, y, reverse)
    assert sumgpt.BLOCK_SIZE == 12 and len(sumgpt.VOCAB) == 13


def test_masked_targets_ignore_everything_before_the_answer():
    seq = sumgpt.encode_pairs([123], [456])
    x, y = sumgpt.masked_targets(seq)
    assert x.shape == y.shape == (1, 12)
    assert torch.equal(x, seq[:, :12])
    assert (y[0, :7] == sumgpt.IGNORE_INDEX).all()
    assert sumgpt.TOKENIZER.decode(y[0, 7:]) == "9750\n"
    assert sumgpt.TOKENIZER.decode(x[0, 7:8]) == "="  # "=" predicts the first answer digit
    _, unmasked = sumgpt.masked_targets(seq, mask=False)
    assert torch.equal(unmasked, seq[:, 1:])
    assert not (seq == sumgpt.IGNORE_INDEX).any()  # masking does not touch the input


def test_answers_parse_back_to_integers_and_malformed_ones_are_minus_one():
    a, b = torch.tensor([5, 999, 123]), torch.tensor([7, 999, 456])
    for reverse in (True, False):
        answers = sumgpt.encode_pairs(a, b, reverse)[:, sumgpt.PROMPT_LEN :]
        assert sumgpt.answers_to_ints(answers, reverse).tolist() == [12, 1998, 579]
    bad = sumgpt.encode_pairs(a, b)[:, sumgpt.PROMPT_LEN :].clone()
    bad[0, 1] = sumgpt.PLUS
    bad[1, 4] = sumgpt.DIGIT0  # no newline at the end
    assert sumgpt.answers_to_ints(bad).tolist() == [-1, -1, 579]


def test_carries_are_counted_per_column_including_ripples():
    a = [0, 123, 55, 999, 909, 500]
    b = [0, 456, 45, 1, 91, 500]
    assert sumgpt.count_carries(a, b).tolist() == [0, 0, 2, 3, 3, 1]


def test_seed_configuration_has_the_expected_size():
    config = sumgpt.sumgpt_config()
    assert (config.n_embd, config.n_head, config.n_layer, config.block_size) == (128, 4, 4, 12)
    model = build_model(GPT, config, seed=0, device="cpu")
    assert count_parameters(model) == 796_544


def test_heldout_split_is_symmetric_disjoint_and_about_one_pair_in_fifty():
    train_pool, held_pool = sumgpt.training_pool(), sumgpt.heldout_pool()
    assert len(train_pool) + len(held_pool) == 1_000_000
    assert len(held_pool) == 20_411
    assert not set(held_pool[:2000].tolist()) & set(train_pool.tolist())
    a, b = held_pool // 1000, held_pool % 1000
    assert sumgpt.is_heldout(b, a).all()  # b+a is held out whenever a+b is
    assert not sumgpt.is_heldout(train_pool // 1000, train_pool % 1000).any()


def test_training_batches_are_seeded_and_never_contain_a_heldout_pair():
    first = sumgpt.SumBatches(512, seed=3)
    again = sumgpt.SumBatches(512, seed=3)
    other = sumgpt.SumBatches(512, seed=4)
    x1, y1 = first(5)
    x2, y2 = again(5)
    assert torch.equal(x1, x2) and torch.equal(y1, y2)  # a function of (seed, step) alone
    assert not torch.equal(x1, other(5)[0]) and not torch.equal(x1, first(6)[0])
    for step in range(20):
        x, _ = first(step)
        digits = x[:, [0, 1, 2, 4, 5, 6]] - sumgpt.DIGIT0
        a = digits[:, 0] * 100 + digits[:, 1] * 10 + digits[:, 2]
        b = digits[:, 3] * 100 + digits[:, 4] * 10 + digits[:, 5]
        assert not sumgpt.is_heldout(a, b).any()


def test_heldout_pairs_are_distinct_reproducible_and_bounded():
    a, b = sumgpt.heldout_pairs(5000, seed=0)
    assert sumgpt.is_heldout(a, b).all()
    assert len(set((a * 1000 + b).tolist())) == 5000
    a2, b2 = sumgpt.heldout_pairs(5000, seed=0)
    assert torch.equal(a, a2) and torch.equal(b, b2)
    with pytest.raises(ValueError, match="held-out"):
        sumgpt.heldout_pairs(10**6)


class Oracle(nn.Module):
    """A stand-in model that reads the prompt and predicts the right next token, except for
    planted mistakes: a wrong units digit when a's tens digit is 5, a wrong tens digit when a's
    units digit is 7, and a "+" instead of the final newline when b's units digit is 3."""

    def __init__(self):
        super().__init__()
        self.config = sumgpt.sumgpt_config()
        self.dummy = nn.Parameter(torch.zeros(1))

    def forward(self, idx):
        d = idx[:, :7] - sumgpt.DIGIT0
        a = d[:, 0] * 100 + d[:, 1] * 10 + d[:, 2]
        b = d[:, 4] * 100 + d[:, 5] * 10 + d[:, 6]
        truth = sumgpt.encode_pairs(a, b)
        nxt = truth[:, 1 : idx.size(1) + 1].clone()
        T = idx.size(1)
        for position, wrong in ((7, a // 10 % 10 == 5), (8, a % 10 == 7)):  # units, tens
            if T > position:
                nxt[wrong, position] = (
                    sumgpt.DIGIT0 + (nxt[wrong, position] - sumgpt.DIGIT0 + 1) % 10
                )
        if T > 11:  # position 11 predicts the newline
            nxt[b % 10 == 3, 11] = sumgpt.PLUS
        return nn.functional.one_hot(nxt, len(sumgpt.VOCAB)).float() + 0 * self.dummy


def test_greedy_decoding_and_the_one_pass_exact_match_agree():
    oracle = Oracle()
    a, b = sumgpt.heldout_pairs(400, seed=2)
    planted = (a // 10 % 10 == 5) | (a % 10 == 7) | (b % 10 == 3)
    predicted = sumgpt.predict_sums(oracle, a, b)
    assert torch.equal(predicted == a + b, ~planted)
    assert (predicted[b % 10 == 3] == -1).all()  # no newline: not a well-formed answer
    correct = sumgpt.correct_answers(oracle, a, b, batch_size=64)
    assert torch.equal(correct, ~planted)
    assert sumgpt.exact_match(oracle, a, b) == pytest.approx(float((~planted).float().mean()))


def test_greedy_decode_appends_argmax_tokens_of_a_real_model():
    model = build_model(GPT, sumgpt.sumgpt_config(n_layer=1), seed=1, device="cpu")
    prompts = sumgpt.encode_pairs([12, 340], [5, 999])[:, : sumgpt.PROMPT_LEN]
    out = sumgpt.greedy_decode(model, prompts)
    assert out.shape == (2, sumgpt.ANSWER_LEN)
    with torch.no_grad():
        manual = prompts
        for _ in range(sumgpt.ANSWER_LEN):
            manual = torch.cat([manual, model(manual)[:, -1:].argmax(-1)], 1)
    assert torch.equal(out, manual[:, sumgpt.PROMPT_LEN :])
    assert model.training  # mode restored


def small_model():
    return build_model(GPT, sumgpt.sumgpt_config(n_layer=1, n_embd=32), seed=0, device="cpu")


def test_checkpoints_round_trip(tmp_path):
    model = small_model()
    path = sumgpt.save_checkpoint(tmp_path / "m.pt", model, reverse=False, steps=7)
    loaded, info = sumgpt.load_checkpoint(path, device="cpu")
    assert info["reverse"] is False and info["meta"]["steps"] == 7
    x = sumgpt.encode_pairs([1, 2], [3, 4])[:, :12]
    with torch.no_grad():
        assert torch.equal(loaded(x), model(x))


def test_bad_checkpoints_get_clear_errors(tmp_path):
    with pytest.raises(sumgpt.CheckpointError, match="does not exist"):
        sumgpt.load_checkpoint(tmp_path / "missing.pt")
    good = sumgpt.save_checkpoint(tmp_path / "good.pt", small_model())
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(good.read_bytes()[:200])
    with pytest.raises(sumgpt.CheckpointError, match="corrupt or not a PyTorch file"):
        sumgpt.load_checkpoint(truncated)
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint at all")
    with pytest.raises(sumgpt.CheckpointError, match="corrupt or not a PyTorch file"):
        sumgpt.load_checkpoint(garbage)
    foreign = tmp_path / "foreign.pt"
    torch.save({"model": {}}, foreign)
    with pytest.raises(sumgpt.CheckpointError, match="not a course checkpoint"):
        sumgpt.load_checkpoint(foreign)

    payload = torch.load(good, weights_only=True)
    payload["model_config"]["n_embd"] = 64
    torch.save(payload, tmp_path / "shape.pt")
    with pytest.raises(sumgpt.CheckpointError, match="shape mismatch"):
        sumgpt.load_checkpoint(tmp_path / "shape.pt")
    payload = torch.load(good, weights_only=True)
    payload["model_config"]["n_layer"] = 2
    torch.save(payload, tmp_path / "layers.pt")
    with pytest.raises(sumgpt.CheckpointError, match="missing"):
        sumgpt.load_checkpoint(tmp_path / "layers.pt")
    payload = torch.load(good, weights_only=True)
    payload["model_config"]["vocab_size"] = 20
    torch.save(payload, tmp_path / "vocab.pt")
    with pytest.raises(sumgpt.CheckpointError, match="SumGPT needs vocab_size=13"):
        sumgpt.load_checkpoint(tmp_path / "vocab.pt")


def test_cli_trains_saves_resumes_and_evaluates(tmp_path, capsys):
    run = tmp_path / "run"
    argv = ["train", "--steps", "3", "--out", str(run), "--device", "cpu", "--no-progress"]
    assert sumgpt.main(argv) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert re.fullmatch(r"exact-match: \d\.\d{4} on 1000 held-out sums", out[-1])
    assert (run / "ckpt.pt").is_file() and (run / "log.csv").is_file()
    assert sumgpt.main(argv) == 2  # a finished run is not overwritten silently
    assert "--resume" in capsys.readouterr().err
    assert sumgpt.main([*argv, "--resume"]) == 0  # nothing left to do, but it reloads
    capsys.readouterr()
    longer = [*argv[:2], "5", *argv[3:], "--resume"]
    assert sumgpt.main(longer) == 2  # SumGPT's meta holds no steps: the engine's record does
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "train.steps was 3, now 5" in err and "--extend" in err
    assert sumgpt.main([*longer, "--lr", "2e-3"]) == 2
    assert "train.steps was 3" in capsys.readouterr().err  # the first difference is named
    assert sumgpt.main([*longer, "--extend"]) == 0
    capsys.readouterr()
    assert sumgpt.main(["eval", str(run), "--n", "200", "--device", "cpu"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert re.fullmatch(r"exact-match: \d\.\d{4} on 200 held-out sums", out[-1])
    assert any("carries" in line for line in out)


def test_cli_reports_bad_checkpoints_and_arguments(tmp_path, capsys):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"\x00" * 10)
    assert sumgpt.main(["eval", str(bad), "--device", "cpu"]) == 2
    assert "corrupt or not a PyTorch file" in capsys.readouterr().err
    good = sumgpt.save_checkpoint(tmp_path / "good.pt", small_model())
    assert sumgpt.main(["eval", str(good), "--n", "0", "--device", "cpu"]) == 2
    assert "--n" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        sumgpt.main(["fly"])


def test_recipes_compose_the_engines_and_the_models_configs():
    lesson = sumgpt.get_recipe("lesson")
    assert lesson.model == sumgpt.sumgpt_config() and lesson.batch_size == 128
    assert sumgpt.train_config() == lesson.train  # the lesson's recipe is the default
    named = {k: sumgpt.DEFAULT_TRAIN[k] for k in ("steps", "batch_size", "lr", "betas")}
    recipe = (lesson.train.steps, lesson.batch_size, lesson.train.lr, lesson.train.betas)
    assert tuple(named.values()) == recipe  # lesson 11 reads DEFAULT_TRAIN
    short = sumgpt.train_config(40, lr=2e-3, warmup_steps=300)
    assert (short.steps, short.lr, short.warmup_steps) == (40, 2e-3, 40)  # warmup within the run
    fast = sumgpt.train_config(recipe="fast")
    assert fast.optimizer == "muon" and fast.steps == sumgpt.RECIPES["fast"].train.steps
    with pytest.raises(ValueError, match=r"unknown SumGPT recipe 'slow'; choose one of \['fast'"):
        sumgpt.get_recipe("slow")


def test_cli_trains_a_named_recipe_and_a_resume_keeps_to_it(tmp_path, capsys):
    run = tmp_path / "run"
    argv = ["train", "--recipe", "fast", "--steps", "3", "--out", str(run), "--device", "cpu",
            "--no-progress"]  # fmt: skip
    assert sumgpt.main(argv) == 0
    saved = torch.load(run / "ckpt.pt", weights_only=True)
    assert "batch 128" in capsys.readouterr().out  # the recipe's batch size
    assert sumgpt.main(["train", *argv[3:], "--resume", "--steps", "3"]) == 2  # the lesson's
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "train.lr was 0.003, now 0.001" in err  # its first field
    assert sumgpt.main([*argv, "--resume"]) == 0
    assert torch.load(run / "ckpt.pt", weights_only=True)["step"] == saved["step"] == 3


def test_muon_orthogonalizes_in_float32_where_the_cpu_emulates_bf16(monkeypatch):
    """torch's Muon casts to bf16 for its Newton-Schulz iterations, which a CPU without bf16
    units emulates at several times an AdamW step: there the engine's Muon runs them in float32,
    with torch's own step around them (momentum, Nesterov, the learning-rate scale)."""
    import math

    from torch.optim import _muon

    from course_utils.engine import optimizer

    for klass, expected in (
        ("avx2", True),
        ("avx512", True),
        ("avx512_bf16", False),
        ("amx", False),
    ):
        monkeypatch.setattr(optimizer.cpu, "cpu_class", lambda klass=klass: klass)
        assert optimizer.newton_schulz_in_float32("cpu") == expected, klass
        assert not optimizer.newton_schulz_in_float32("cuda")
        model = GPT(sumgpt.sumgpt_config())
        config = sumgpt.train_config(recipe="fast")
        hidden = optimizer.muon_optimizer(model, config, device="cpu").optimizers[0]
        assert isinstance(hidden, optimizer.Float32Muon) == expected, klass

    original = _muon._zeropower_via_newtonschulz
    gen = torch.Generator().manual_seed(0)
    start, grad = torch.randn(96, 32, generator=gen), torch.randn(96, 32, generator=gen)
    moved = {}
    for name, kind in (("fp32", optimizer.Float32Muon), ("bf16", torch.optim.Muon)):
        p = torch.nn.Parameter(start.clone())
        p.grad = grad.clone()
        kind([p], lr=0.02, weight_decay=0.0, momentum=0.95, nesterov=True).step()
        moved[name] = p.detach()
    assert _muon._zeropower_via_newtonschulz is original  # restored after the step
    nesterov = grad.lerp(0.05 * grad, 0.95)  # the first step's momentum buffer is 0.05 g
    expected = start - 0.02 * math.sqrt(96 / 32) * optimizer.newton_schulz_float32(
        nesterov, (3.4445, -4.7750, 2.0315), 5, 1e-7
    )
    assert torch.allclose(moved["fp32"], expected, atol=1e-6)
    bf16_gap = (moved["bf16"] - expected).abs().max().item()
    assert 1e-5 < bf16_gap < 5e-3  # bf16's rounding, not another algorithm
