"""The parameter ledger adds up, memory estimates match AdamW, the inspector flags list traps."""

import torch
from torch import nn

from course_utils import (
    GPT,
    count_parameters,
    format_ledger,
    frozen_decoder_config,
    memory_estimate,
    mini_lm_config,
    parameter_ledger,
)
from course_utils.lessons.inspector import hidden_modules, inspect_model, main, mlp_stack


def test_ledger_rows_sum_to_the_total_and_tied_head_counts_zero():
    model = GPT(frozen_decoder_config())
    rows = parameter_ledger(model)
    assert sum(r.params for r in rows) == count_parameters(model) == 368
    by_name = {r.component: r for r in rows}
    assert by_name["token embedding"].params == 32
    assert by_name["position embedding"].params == 16
    assert [
        by_name[f"block {i} {part}"].params
        for i in (0, 1)
        for part in ("attention", "MLP", "norms")
    ] == [64, 76, 16] * 2
    assert by_name["final norm"].params == 8
    assert by_name["head"].params == 0 and "tied" in by_name["head"].note
    assert format_ledger(rows).splitlines()[-1].split() == ["total", "368"]


def test_untied_ledger_has_a_head_row_of_v_times_d():
    rows = {r.component: r.params for r in parameter_ledger(GPT(frozen_decoder_config(False)))}
    assert rows["head"] == 32


def test_per_block_ledger_matches_the_formula_in_d_and_d_ff():
    d, d_ff = 32, 128
    rows = {r.component: r.params for r in parameter_ledger(GPT(mini_lm_config(2)))}
    assert rows["block 1 attention"] == 4 * d * d + 4 * d
    assert rows["block 1 MLP"] == 2 * d * d_ff + d_ff + d
    assert rows["block 1 norms"] == 4 * d


def test_memory_estimate_matches_adamw_state_after_a_step():
    model = mlp_stack(16, 2)
    model[0].weight.requires_grad_(False)
    estimate = memory_estimate(model)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad])
    model(torch.randn(4, 16)).sum().backward()
    opt.step()
    state_bytes = sum(
        t.numel() * t.element_size()
        for s in opt.state.values()
        for k, t in s.items()
        if k in ("exp_avg", "exp_avg_sq")
    )
    grad_bytes = sum(
        p.grad.numel() * p.grad.element_size() for p in model.parameters() if p.grad is not None
    )
    assert estimate.adamw_state == state_bytes
    assert estimate.gradients == grad_bytes
    assert estimate.weights == 4 * count_parameters(model)


def test_inspector_cli_prints_the_internals_chapter_capstone_count(capsys):
    assert main(["--dim", "1024", "--layers", "12"]) == 0
    out = capsys.readouterr().out
    assert "parameters:  100,724,736" in out
    assert "frozen:    0 (0.00%)" in out
    assert "weights:         384.23 MiB (402,898,944 bytes)" in out
    assert "ok: no modules hidden" in out


def test_inspector_freezing_moves_parameters_to_the_frozen_side():
    model = mlp_stack(8, 2)
    model[0].weight.requires_grad_(False)
    report = inspect_model(model)
    assert report.frozen == 8 * 32
    assert report.trainable == report.total - 8 * 32


class _Trap(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = [nn.Linear(4, 4), nn.ReLU()]
        self.heads = {"a": nn.Linear(4, 2)}
        self.ok = nn.ModuleList([nn.Linear(4, 4)])


def test_hidden_modules_finds_plain_list_and_dict_members_only():
    found = hidden_modules(_Trap())
    assert found == ["layers[0] (Linear)", "layers[1] (ReLU)", "heads['a'] (Linear)"]
    assert hidden_modules(GPT(frozen_decoder_config())) == []


def test_inspector_cli_takes_course_configs_and_flags_the_list_trap(capsys):
    main(["--config", "frozen-decoder-untied"])
    out = capsys.readouterr().out
    assert "parameters:  400" in out and "head" in out
    main(["--list-trap-demo", "--dim", "4"])
    assert "HIDDEN: layers[0] (Linear)" in capsys.readouterr().out
