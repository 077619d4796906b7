"""Every graded exercise of every lab fails on a plausible wrong answer, and its hidden test does.

For each graded test cell of each solution, ``WRONG`` holds a typical student mistake written as
text replacements in one answer cell of that exercise. Each lab runs in one kernel, cell by cell
(:func:`run_with_wrong_answers`): just before a test cell, the names are saved, the answer cell
is re-run with the mistake, the test cell must raise ``CheckFailed`` and so must its hidden part
on its own; then the names are restored and the test cell runs as published (it must pass: the
positive control). Nothing trains more than the solution does: the mistakes sit in cheap answer
cells (functions and constants), and a test cell that trains re-runs its own small training.
"""

from __future__ import annotations

import os
import re

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from course_utils.tools.labs import SOLUTIONS

SOLVED = sorted(SOLUTIONS.glob("*.ipynb"))
HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", re.S)
SAVE = "__wrong_answers_saved__ = dict(globals())"
RESTORE = "(lambda saved: (globals().clear(), globals().update(saved)))(__wrong_answers_saved__)"
FAILED_CHECKS = {"CheckFailed", "ValuesDiffer"}  # a check's failure, not a crash

# lab -> test cell -> (answer cell, {solution text: the mistake that replaces it}).
WRONG = {
    "01_tokens_and_embeddings": {
        "ex1-check": ("ex1-answer", {"itos = sorted(set(text))":
                                     "itos = list(dict.fromkeys(text))"}),
        "ex2-check": ("ex2-answer", {"return one_hot @ weight": "return weight[ids]"}),
        "ex3-check": ("ex3-answer", {"tok_weight[ids] + pos_weight[positions]": "tok_weight[ids]"}),
        "ex4-check": ("ex4-answer", {"65 * 128  #": "65 * 128 + 128  #"}),
    },
    "02_attention": {
        "ex1-check": ("ex1-answer", {"triu(diagonal=1)": "triu(diagonal=0)"}),
        "ex2-check": ("ex2-answer", {" / math.sqrt(q.size(-1))": ""}),
        "ex3-check": ("ex3-answer", {"x.view(B, T, n_head, C // n_head).transpose(1, 2)":
                                     "x.view(B, T, C // n_head, n_head).permute(0, 3, 1, 2)"}),
        "ex4-check": ("ex4-answer", {"edited = x.clone()": "edited = x"}),
        "ex5-check": ("ex5-answer", {"copy_(attn.proj.weight)": "copy_(attn.proj.weight.T)"}),
    },
    "03_block_assembly": {
        "ex1-check": ("ex1-answer", {"var = (x - mu).pow(2).mean(dim=-1, keepdim=True)":
                                     "var = x.var(dim=-1, keepdim=True)"}),
        "ex2-check": ("ex2-answer", {"layernorm_4096 = 2 * 4096": "layernorm_4096 = 4096"}),
        "ex3-check": ("ex3-answer", {"F.silu(self.w_gate(x)) * self.w_up(x)":
                                     "F.silu(self.w_up(x)) * self.w_gate(x)"}),
        "ex4-check": ("ex4-answer", {"norms = 2 * (2 * d if norm == \"layernorm\" else d)":
                                     "norms = 2 * d if norm == \"layernorm\" else d"}),
        "ex5-check": ("ex5-answer", {"x = x + attn(ln_1(x))": "x = ln_1(x) + attn(ln_1(x))"}),
    },
    "04_torch_nn_internals": {
        "ex1-check": ("ex1-answer", {", persistent=False": ""}),
        "ex2-check": ("ex2-answer", {'nn.init.kaiming_normal_(module.weight, nonlinearity="relu")':
                                     "nn.init.xavier_normal_(module.weight)"}),
        "ex3-check": ("ex3-answer", {"return (params + buffers) / 2**20":
                                     "return params / 2**20"}),
        "ex4-check": ("ex4-answer", {"clamp(-5.0, 5.0)": "clamp(max=5.0)"}),
        "ex5-check": ("ex5-answer", {'key.removeprefix("module.")': 'key.replace("module.", "")'}),
        "ex6-check": ("ex6-answer", {"model.stage1.requires_grad_(False)": "pass"}),
    },
    "05_stacked_model": {
        "ex1-check": ("ex1-answer", {"(0 if tied else V * d)": "0"}),
        "ex2-check": ("ex2-answer", {"for L in range(1, 7)": "for L in range(1, 6)"}),
        "ex3-check": ("ex3-answer", {"[first] * len(model.blocks)": "list(model.blocks)"}),
        "ex4-check": ("ex4-answer", {"model.named_parameters(remove_duplicate=False)":
                                     "model.named_parameters()"}),
        "ex5-check": ("ex5-answer", {"per_block = 12 * 64 * 64 + 13 * 64":
                                     "per_block = 12 * 64 * 64"}),
    },
    "06_initialization_variance": {
        "ex1-check": ("ex1-answer", {"math.sqrt(2.0 / (fan_in + fan_out))":
                                     "math.sqrt(1.0 / (fan_in + fan_out))"}),
        "ex2-check": ("ex2-answer", {"mode=\"fan_in\"": "mode=\"fan_out\""}),
        "ex3-check": ("ex3-answer", {"x = torch.relu(x @ W.T)": "x = x @ W.T"}),
        "ex4-check": ("ex4-answer", {", a=-2 * std, b=2 * std": ""}),
        "ex5-check": ("ex5-answer", {"math.sqrt(2 * n_layer)": "math.sqrt(n_layer)"}),
    },
    "07_loss_at_init": {
        "ex1-check": ("ex1-answer", {"logit_std**2 / 2": "logit_std**2"}),
        "ex2-check": ("ex2-answer", {"return logits.std().item(), loss.item()":
                                     "return loss.item(), logits.std().item()"}),
        "ex3-check": ("ex3-answer", {"reinit_token_embedding_(model, std, seed=0)": "pass"}),
        "ex4-check": ("ex4-answer", {"math.sqrt(d_model) * emb_std": "d_model * emb_std"}),
        "ex5-check": ("ex5-answer", {'first_check = "b"': 'first_check = "a"'}),
    },
    "08_frozen_decoder_audit": {
        "ex1-check": ("ex1-answer", {"norms = 2 * (2 * d)": "norms = 2 * d"}),
        "ex2-check": ("ex2-answer", {"targets[targets == PAD] = IGNORE": "pass"}),
        "ex3-check": ("ex3-answer", {"(lse - z_y).sum() / valid.sum()":
                                     "(lse - z_y).sum() / targets.numel()"}),
        "ex4-check": ("ex4-answer", {"(model(changed)[:, :t] - base[:, :t])":
                                     "(model(changed)[:, t:] - base[:, t:])"}),
        "ex5-check": ("ex5-answer", {"audit(net, batch": 'audit(mystery["P"], batch'}),
    },
    "09_flop_accounting": {
        "ex1-check": ("ex1-answer", {"4 * B * T * T * C": "2 * B * T * T * C"}),
        "ex2-check": ("ex2-answer", {"+ 2 * C * V": "+ C * V"}),
        "ex3-check": ("ex3-answer", {"return 6 * C": "return 24 * C"}),
        "ex4-check": ("ex4-answer", {"4 * t * C": "4 * t * t * C"}),
        "ex5-check": ("ex5-answer", {"train_flops_per_token = 3 *": "train_flops_per_token = 2 *"}),
    },
    "10_training_loop": {
        "ex1-check": ("ex1-answer", {"m_hat = m / (1 - beta1**t)": "m_hat = m"}),
        "ex2-check": ("ex2-answer", {"peak_lr * (step + 1) / warmup_steps":
                                     "peak_lr * step / warmup_steps"}),
        "ex3-check": ("ex3-answer", {"g.mul_(max_norm / (norm + 1e-6))":
                                     "g.mul_(max_norm / (g.norm() + 1e-6))"}),
        "ex4-check": ("ex4-answer", {"optimizer.step()": "pass"}),
        "ex5-check": ("ex5-answer", {'"optimizer": optimizer.state_dict(), ': "",
                                     'optimizer.load_state_dict(state["optimizer"])': "pass"}),
    },
    "11_sumgpt": {
        "ex1-check": ("ex1-answer", {"answer = answer[::-1]": "pass"}),
        "ex2-check": ("ex2-answer", {"y[:, :7] = -100": "y[:, :8] = -100"}),
        "ex3-check": ("ex3-answer", {"irreducible_loss = 5 *": "irreducible_loss = 6 *"}),
        "ex4-check": ("ex4-answer", {"for _ in range(n_new)": "for _ in range(n_new - 1)"}),
        "ex5-check": ("ex5-answer", {"carry = (ak + bk + carry) // 10": "carry = (ak + bk) // 10"}),
    },
    "12_bookgpt": {
        "ex1-check": ("ex1-answer", {"round(len(b) * (1 - val_fraction))":
                                     "round(len(b) * val_fraction)"}),
        "ex2-check": ("ex2-answer", {"return chunk[:, :-1], chunk[:, 1:]":
                                     "return chunk[:, :-1], chunk[:, :-1]"}),
        "ex3-check": ("ex3-answer", {"torch.softmax(logits / temperature":
                                     "torch.softmax(logits * temperature"}),
        "ex4-check": ("ex4-answer", {" + T * d + ": " + "}),
    },
    "13_fast_on_your_cpu": {
        "ex1-check": ("ex1-answer", {"statistics.median(times)": "statistics.mean(times)"}),
        "ex2-check": ("ex2-answer", {"return 3 * B * T": "return 2 * B * T"}),
        "ex3-check": ("ex3-answer", {">= 1.25": "> 1.25"}),
    },
}  # fmt: skip

# (lab, test cell) -> why it has no wrong answer. Every exclusion is listed here with its reason;
# none is skipped silently (test_every_graded_test_cell_has_a_wrong_answer_or_a_reason). There
# are none: labs 11 and 12 train no model in their cells, so every exercise fails in seconds.
EXCLUDED: dict[tuple[str, str], str] = {}


def grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def graded_tests(nb) -> list[str]:
    return [grade_id(c) for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade")]


def _failure(client, source: str, index: int) -> str | None:
    """Run ``source`` as a new cell; the name of the exception it raised, or None."""
    try:
        client.execute_cell(nbformat.v4.new_code_cell(source), index)
    except CellExecutionError as exc:
        return exc.ename
    return None


def run_with_wrong_answers(solution, wrong: dict, timeout: int = 900) -> list[str]:
    """Run ``solution`` top to bottom in one kernel with each of ``wrong``'s mistakes bound
    before its test cell; the problems found (an empty list when every mistake is caught by its
    test cell and by its hidden part alone, and the solution itself passes)."""
    nb = nbformat.read(solution, as_version=4)
    answers = {grade_id(c): c.source for c in nb.cells}
    problems = []
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as publish runs them
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3",
        resources={"metadata": {"path": str(solution.parent)}},
    )  # fmt: skip
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            test = grade_id(cell)
            if test in wrong:
                answer, replacements = wrong[test]
                source = answers[answer]
                for old, new in replacements.items():
                    assert source.count(old) == 1, f"{solution.stem} {answer}: {old!r} not once"
                    source = source.replace(old, new)
                assert _failure(client, SAVE, index) is None
                if error := _failure(client, source, index):
                    problems.append(f"{test}: the wrong answer itself raised {error}")
                if (error := _failure(client, cell.source, index)) not in FAILED_CHECKS:
                    problems.append(f"{test}: passed a wrong answer ({error or 'no error'})")
                hidden = HIDDEN.search(cell.source)
                if (error := _failure(client, hidden.group(1), index)) not in FAILED_CHECKS:
                    problems.append(f"{test}: its hidden test passed a wrong answer ({error})")
                assert _failure(client, RESTORE, index) is None, f"{test}: names not restored"
            if error := _failure(client, cell.source, index):
                problems.append(f"cell {index} ({test or 'not graded'}) of the solution: {error}")
    return problems


def test_every_graded_test_cell_has_a_wrong_answer_or_a_reason():
    covered = {(lab, test) for lab, tests in WRONG.items() for test in tests}
    assert not covered & set(EXCLUDED)
    graded = {(p.stem, test) for p in SOLVED for test in graded_tests(nbformat.read(p, 4))}
    assert covered | set(EXCLUDED) == graded


@pytest.mark.parametrize("solution", SOLVED, ids=[p.stem for p in SOLVED])
def test_each_exercise_fails_its_wrong_answer_and_passes_the_solution(solution):
    assert run_with_wrong_answers(solution, WRONG[solution.stem]) == []


def test_a_right_answer_in_place_of_a_wrong_one_is_reported():
    """The mutation: with the solution's own text as ex2's "mistake", the run names ex2."""
    solution = SOLUTIONS / "09_flop_accounting.ipynb"
    wrong = dict(WRONG[solution.stem])
    wrong["ex2-check"] = ("ex2-answer", {"+ 2 * C * V": "+ 2 * C * V"})
    assert run_with_wrong_answers(solution, wrong) == [
        "ex2-check: passed a wrong answer (no error)",
        "ex2-check: its hidden test passed a wrong answer (None)",
    ]
