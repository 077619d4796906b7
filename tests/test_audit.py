"""The decoder audit passes the sound frozen decoder and catches each broken one at its check."""

import pytest
import torch
from torch.nn import functional as F

from course_utils import GPT, build_model, count_parameters, mini_lm_config
from course_utils.core.configs import frozen_decoder_config
from course_utils.lessons.audit import (
    BROKEN,
    CHECKS,
    IGNORE_INDEX,
    audit,
    broken_model,
    decode,
    encode,
    expected_ledger,
    expected_total,
    ledger_sum,
    make_batch,
    mystery_models,
)


@pytest.fixture
def batch():
    return make_batch(["A B C", "B A", "C"])


def test_make_batch_follows_the_target_contract(batch):
    x, y = batch
    assert decode(x[0]) == "<bos> A B C" and decode(y[0]) == "A B C <eos>"
    assert decode(x[1]) == "<bos> B A <eos>" and y[1].tolist()[-1] == IGNORE_INDEX
    assert decode(y[2]) == "C <eos> - -"
    assert int((y != IGNORE_INDEX).sum()) == 9
    with pytest.raises(ValueError, match="context holds 4"):
        make_batch(["A B C D"])
    with pytest.raises(ValueError, match="not one of"):
        encode("A Z")


def test_the_sound_frozen_decoder_passes_every_check_in_order(batch, capsys):
    model = build_model(GPT, frozen_decoder_config(), seed=0, device="cpu")
    report = audit(model, batch)
    assert report.passed and report.first_failure is None
    assert [c.name for c in report.checks] == list(CHECKS)
    out = capsys.readouterr().out
    assert out.count("[PASS]") == 8 and "8 of 8 checks passed" in out
    assert "32 + 16 + 2 x (64 + 76 + 16) + 8 + 0 = 368" in out
    with torch.no_grad():
        logits = model(batch[0])
    want = F.cross_entropy(logits.reshape(-1, 8), batch[1].reshape(-1), ignore_index=-100)
    assert report.loss == pytest.approx(float(want), abs=1e-6)


def test_the_untied_frozen_decoder_passes_with_400_parameters(batch):
    model = build_model(GPT, frozen_decoder_config(tie_weights=False), seed=0, device="cpu")
    report = audit(model, batch, verbose=False)
    assert report.passed
    assert count_parameters(model) == expected_total(model.config) == 400


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_each_broken_model_is_caught_first_by_the_right_check(kind, batch):
    report = audit(broken_model(kind, seed=0), batch, verbose=False)
    assert not report.passed
    assert report.first_failure == BROKEN[kind]
    if kind == "wrong norm axis":
        assert "axis 1 (time)" in report.checks[3].detail
    expected = {BROKEN[kind]}
    if kind == "untied but claimed tied":
        expected.add("complete parameter ledger")  # the ledger sees the extra 32 too
    assert set(report.failed) == expected


def test_broken_models_keep_the_sound_weights_where_they_can():
    sound = build_model(GPT, frozen_decoder_config(), seed=3, device="cpu")
    for kind in BROKEN:
        broken = broken_model(kind, seed=3, device="cpu")  # default: the best device
        assert torch.equal(broken.blocks[1].attn.qkv.weight, sound.blocks[1].attn.qkv.weight)
        assert torch.equal(broken.head.weight, sound.head.weight)
    with pytest.raises(ValueError, match="unknown kind"):
        broken_model("typo")


def test_a_shift_bug_and_a_wrong_denominator_bug_are_caught(batch):
    model = build_model(GPT, frozen_decoder_config(), seed=0, device="cpu")
    x, y = batch
    unshifted = audit(model, (x, x.clone()), verbose=False)
    assert unshifted.failed == ["input-target shift"]
    assert "not the next input token" in unshifted.checks[5].detail
    out_of_range = x.clone()
    out_of_range[0, 0] = 8
    assert audit(model, (out_of_range, y), verbose=False).first_failure == CHECKS[0]


def test_a_crashing_forward_fails_every_check(batch):
    model = build_model(GPT, frozen_decoder_config(), seed=0, device="cpu")
    x, y = batch
    too_long = torch.cat([x, x[:, :1]], dim=1)
    report = audit(model, (too_long, torch.cat([y, y[:, :1]], dim=1)), verbose=False)
    assert report.failed == list(CHECKS)
    assert "ValueError" in report.checks[0].detail


def test_expected_ledger_matches_real_models_beyond_the_frozen_decoder():
    for config in (
        mini_lm_config(2),
        mini_lm_config(1, tie_weights=False, head_bias=True),
        frozen_decoder_config(norm="rmsnorm", activation="swiglu", n_layer=3),
        frozen_decoder_config(attn_bias=True, mlp_bias=False, norm_bias=False),
    ):
        assert count_parameters(GPT(config)) == expected_total(config)
    e = expected_ledger(frozen_decoder_config())
    assert (e["attention"], e["MLP"], e["norms"]) == (64, 76, 16)
    assert ledger_sum(frozen_decoder_config(tie_weights=False)).endswith("+ 32 = 400")


def test_mystery_models_hold_one_sound_decoder_and_each_bug_once(batch):
    models = mystery_models(seed=4)
    assert sorted(models) == ["P", "Q", "R", "S"]
    first = {name: audit(m, batch, verbose=False).first_failure for name, m in models.items()}
    assert sorted(first.values(), key=str) == sorted([None, *BROKEN.values()], key=str)
