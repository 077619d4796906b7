"""Every plausible wrong answer to a lab's exercise fails the check the student sees, with the
line the lab wrote for that mistake, and fails the hidden test too.

For each graded test cell of each solution, ``WRONG`` holds the typical mistakes a student makes
there (among them every mistake the lesson or the lab warns about), each written as text
replacements in one answer cell of that exercise, with a piece of the ❌ line its visible check
must show (``sees``: the lab's hint for that mistake where it wrote one), or, where the visible
check cannot tell, why not (``blind``). Each lab runs in one kernel, cell by cell
(:func:`run_with_wrong_answers`): just before a test cell, the names are saved, the answer cell
is re-run with a mistake, the visible part of the test cell (all but its hidden tests) and the
hidden part each run on their own; then the names are restored, and after the last mistake the
test cell runs as published (it must pass: the positive control). Nothing trains more than the
solution does: the mistakes sit in cheap answer cells (functions and constants), and a test cell
that trains re-runs its own small training.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

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


@dataclass(frozen=True)
class W:
    """A plausible wrong answer: ``replace`` (solution text -> the mistake) in the ``answer``
    cell, and either a piece of the ❌ line the visible check shows for it (``sees``) or why the
    visible check cannot tell (``blind``; then it must indeed pass it, and the hidden test not)."""

    answer: str
    replace: dict[str, str] = field(hash=False)
    sees: str = ""
    blind: str = ""
    crash: str = ""  # where PyTorch itself refuses the mistake: its error, which the student sees


# Why a visible check can leave a mistake to the hidden test: the exercise's answer is a number or
# a choice, and its visible check shows only the answer's type or form, as the exercise says
# (showing whether it is right would give the answer away).
TYPE_ONLY = "the answer is a number: its check shows only its type (and a sanity range)"
CHOICE = "a multiple-choice answer: its check shows only that the runs behave as described"
DIAGNOSIS = "the diagnosis is the answer: its check shows only that it names a check or None"

WRONG = {
    "01_tokens_and_embeddings": {
        "ex1-check": [W("ex1-answer", {"itos = sorted(set(text))":
                                       "itos = list(dict.fromkeys(text))"},
                        sees="itos: first difference at index 0")],
        "ex2-check": [W("ex2-answer", {"return one_hot @ weight": "return weight[ids]"},
                        sees="multiply the one-hot matrix by weight instead of looking rows up")],
        "ex3-check": [W("ex3-answer", {"tok_weight[ids] + pos_weight[positions]":
                                       "tok_weight[ids]"},
                        sees="add_positions, T = 5: values off")],
        "ex4-check": [W("ex4-answer", {"65 * 128  #": "65 * 128 + 128  #"}, blind=TYPE_ONLY)],
    },
    "02_attention": {
        "ex1-check": [W("ex1-answer", {"triu(diagonal=1)": "triu(diagonal=0)"},
                        sees="row 0 may only see position 0")],
        "ex2-check": [W("ex2-answer", {" / math.sqrt(q.size(-1))": ""},
                        sees="divide the scores by sqrt(d_k) before the softmax")],
        "ex3-check": [W("ex3-answer", {"x.view(B, T, n_head, C // n_head).transpose(1, 2)":
                                       "x.view(B, T, C // n_head, n_head).permute(0, 3, 1, 2)"},
                        sees="merge_heads(split_heads(x, 3)): values off")],
        "ex4-check": [W("ex4-answer", {"edited = x.clone()": "edited = x"},
                        sees="expected 4 items got 0: missing 3, 4, 5, 6")],
        "ex5-check": [W("ex5-answer", {"copy_(attn.proj.weight)": "copy_(attn.proj.weight.T)"},
                        sees="nn.MultiheadAttention output: values off"),
                      W("ex5-answer", {"ones(T, T, dtype=torch.bool).triu(diagonal=1)":
                                       "ones(T, T, dtype=torch.bool).tril()"},
                        sees="True means may NOT attend")],
    },
    "03_block_assembly": {
        "ex1-check": [W("ex1-answer", {"var = (x - mu).pow(2).mean(dim=-1, keepdim=True)":
                                       "var = x.var(dim=-1, keepdim=True)"},
                        sees="divide the variance by d, not d - 1"),
                      W("ex1-answer", {"mu = x.mean(dim=-1, keepdim=True)":
                                       "mu = x.mean(dim=1, keepdim=True)",
                                       "var = (x - mu).pow(2).mean(dim=-1, keepdim=True)":
                                       "var = (x - mu).pow(2).mean(dim=1, keepdim=True)"},
                        sees="the last axis (dim=-1): another axis mixes positions")],
        "ex2-check": [W("ex2-answer", {"layernorm_4096 = 2 * 4096": "layernorm_4096 = 4096"},
                        blind=TYPE_ONLY)],
        "ex3-check": [W("ex3-answer", {"F.silu(self.w_gate(x)) * self.w_up(x)":
                                       "F.silu(self.w_up(x)) * self.w_gate(x)"},
                        sees="SwiGLUFeedForward output: values off")],
        "ex4-check": [W("ex4-answer", {"norms = 2 * (2 * d if norm == \"layernorm\" else d)":
                                       "norms = 2 * d if norm == \"layernorm\" else d"},
                        sees="(d=32, d_ff=128, ReLU): expected 12,704 got 12,640")],
        "ex5-check": [W("ex5-answer", {"x = x + attn(ln_1(x))": "x = ln_1(x) + attn(ln_1(x))"},
                        sees="block_forward, prenorm=True: values off")],
    },
    "04_torch_nn_internals": {
        "ex1-check": [W("ex1-answer", {", persistent=False": ""},
                        sees="likely cause: state_dict() holds the persistent buffers only"),
                      W("ex1-answer", {'self.register_buffer("scratch_pad", torch.zeros(100), '
                                       'persistent=False)': "self.scratch_pad = torch.zeros(100)"},
                        sees="a plain tensor attribute keeps its dtype")],
        "ex2-check": [W("ex2-answer", {'kaiming_normal_(module.weight, nonlinearity="relu")':
                                       "xavier_normal_(module.weight)"},
                        sees="std of net[0].weight (target sqrt(2/512)): expected about 0.0625"),
                      W("ex2-answer", {"kaiming_normal_": "kaiming_uniform_"},
                        sees="kaiming_uniform_ has the same std but uniform draws")],
        "ex3-check": [W("ex3-answer", {"return (params + buffers) / 2**20":
                                       "return params / 2**20"},
                        sees="count the buffers too"),
                      W("ex3-answer", {"for p in model.parameters()":
                                       "for p in model.state_dict().values()",
                                       "for b in model.buffers()": "for b in []"},
                        sees="a tied weight is one tensor")],
        "ex4-check": [W("ex4-answer", {"clamp(-5.0, 5.0)": "clamp(max=5.0)"},
                        sees="layer(inp) with the hook: values off")],
        "ex5-check": [W("ex5-answer", {'key.removeprefix("module.")': 'key.replace("module.", "")'},
                        sees="strip module. only at the start of a key")],
        "ex6-check": [W("ex6-answer", {"model.stage1.requires_grad_(False)": "pass"},
                        sees="set requires_grad=False on every parameter of model.stage1"),
                      W("ex6-answer", {'{"params": model.stage2.parameters(),':
                                       '{"params": [*model.stage1.parameters(), '
                                       '*model.stage2.parameters()],'},
                        sees="stage1's parameters are in a group")],
    },
    "05_stacked_model": {
        "ex1-check": [W("ex1-answer", {"(0 if tied else V * d)": "0"},
                        sees="an untied head has its own V x d matrix")],
        "ex2-check": [W("ex2-answer", {"for L in range(1, 7)": "for L in range(1, 6)"},
                        sees="number of counts: expected 6 got 5")],
        "ex3-check": [W("ex3-answer", {"[first] * len(model.blocks)": "list(model.blocks)"},
                        sees="put the same module object (model.blocks[0]) in every slot"),
                      W("ex3-answer", {"nn.ModuleList([first] * len(model.blocks))":
                                       "[first] * len(model.blocks)"},
                        crash="TypeError", sees="cannot assign 'list' as child module 'blocks'")],
        "ex4-check": [W("ex4-answer", {"model.named_parameters(remove_duplicate=False)":
                                       "model.named_parameters()"},
                        sees="missing ('head.weight', 'tok_emb.weight')")],
        "ex5-check": [W("ex5-answer", {"per_block = 12 * 64 * 64 + 13 * 64":
                                       "per_block = 12 * 64 * 64"},
                        sees="L blocks fit the budget: 20 blocks need 1,010,304 parameters")],
    },
    "06_initialization_variance": {
        "ex1-check": [W("ex1-answer", {"math.sqrt(2.0 / (fan_in + fan_out))":
                                       "math.sqrt(1.0 / (fan_in + fan_out))"},
                        sees="weights drawn with init_std('xavier', 256, 384): values off")],
        "ex2-check": [W("ex2-answer", {"mode=\"fan_in\"": "mode=\"fan_out\""},
                        sees="std of net[0].weight (fan_in 256): expected about 0.0883883")],
        "ex3-check": [W("ex3-answer", {"x = torch.relu(x @ W.T)": "x = x @ W.T"},
                        sees="did you apply a ReLU after every layer?")],
        "ex4-check": [W("ex4-answer", {", a=-2 * std, b=2 * std": ""},
                        sees="beyond 2 * 0.02: where does the cut sit?")],
        "ex5-check": [W("ex5-answer", {"math.sqrt(2 * n_layer)": "math.sqrt(n_layer)"},
                        sees="residual_std(12) vs the model's residual projections")],
    },
    "07_loss_at_init": {
        "ex1-check": [W("ex1-answer", {"logit_std**2 / 2": "logit_std**2"},
                        sees="small_logit_loss(100, 0.2) vs 20,000 rows")],
        "ex2-check": [W("ex2-answer", {"return logits.std().item(), loss.item()":
                                       "return loss.item(), logits.std().item()"},
                        sees="expected a logit std near 6 with the default init, got 21.3")],
        "ex3-check": [W("ex3-answer", {"reinit_token_embedding_(model, std, seed=0)": "pass"},
                        sees="the losses should fall as the std shrinks")],
        "ex4-check": [W("ex4-answer", {"math.sqrt(d_model) * emb_std": "d_model * emb_std"},
                        sees="predicted_logit_std(32, 0.5) vs the model's logits")],
        "ex5-check": [W("ex5-answer", {'first_check = "b"': 'first_check = "a"'}, blind=CHOICE)],
    },
    "08_frozen_decoder_audit": {
        "ex1-check": [W("ex1-answer", {"norms = 2 * (2 * d)": "norms = 2 * d"},
                        sees="decoder_parameters, frozen decoder, tied: expected 368 got 352")],
        "ex2-check": [W("ex2-answer", {"targets[targets == PAD] = IGNORE": "pass"},
                        sees="targets: 3 of 12 values differ"),
                      W("ex2-answer", {"tokens[:, 1:].clone()": "tokens[:, :-1].clone()"},
                        sees="the targets are all tokens but the first")],
        "ex3-check": [W("ex3-answer", {"(lse - z_y).sum() / valid.sum()":
                                       "(lse - z_y).sum() / targets.numel()"},
                        sees="mean over the 9 valid rows: expected about 5.23034 got 3.92276"),
                      W("ex3-answer", {"m = z.amax(dim=-1, keepdim=True)":
                                       "m = torch.zeros_like(z[:, :1])"},
                        sees="subtract the row max first")],
        "ex4-check": [W("ex4-answer", {"(model(changed)[:, :t] - base[:, :t])":
                                       "(model(changed)[:, t:] - base[:, t:])"},
                        sees="sound decoder leaks: expected False got True")],
        "ex5-check": [W("ex5-answer", {"audit(net, batch": 'audit(mystery["P"], batch'},
                        blind=DIAGNOSIS)],
    },
    "09_flop_accounting": {
        "ex1-check": [W("ex1-answer", {"4 * B * T * T * C": "2 * B * T * T * C"},
                        sees="attention_matmul_flops(2, 10, 16): expected 53,760 got 47,360")],
        "ex2-check": [W("ex2-answer", {"+ 2 * C * V": "+ C * V"},
                        sees="flops_per_token(32, 3, 12, 50): expected 81,536 got 79,936")],
        "ex3-check": [W("ex3-answer", {"return 6 * C": "return 24 * C"},
                        sees="at T = crossover_context(256): attention T^2 terms vs projections")],
        "ex4-check": [W("ex4-answer", {"4 * t * C": "4 * t * t * C"},
                        sees="decode_step_flops(16, 2, 40, t=10): expected 14,848 got 26,368")],
        "ex5-check": [W("ex5-answer", {"train_flops_per_token = 3 *":
                                       "train_flops_per_token = 2 *"},
                        blind=TYPE_ONLY)],
    },
    "10_training_loop": {
        "ex1-check": [W("ex1-answer", {"m_hat = m / (1 - beta1**t)": "m_hat = m"},
                        sees="bias correction: divide m by 1 - beta1**t"),
                      W("ex1-answer", {"m = beta1 * m + (1 - beta1) * g":
                                       "g = g + weight_decay * p\n"
                                       "    m = beta1 * m + (1 - beta1) * g",
                                       "p * (1 - lr * weight_decay)": "p"},
                        sees="with weight_decay=0.1 (decoupled: shrink p, not g)")],
        "ex2-check": [W("ex2-answer", {"peak_lr * (step + 1) / warmup_steps":
                                       "peak_lr * step / warmup_steps"},
                        sees="first wrong at index (0,): expected 5e-05 got 0")],
        "ex3-check": [W("ex3-answer", {"g.mul_(max_norm / (norm + 1e-6))":
                                       "g.mul_(max_norm / (g.norm() + 1e-6))"},
                        sees="the global norm after clip_gradients(..., 0.5): expected about 0.5")],
        "ex4-check": [W("ex4-answer", {"optimizer.step()": "pass"},
                        sees="check that the optimizer updates this model's parameters"),
                      W("ex4-answer", {"torch.optim.AdamW(model.parameters(),":
                                       "torch.optim.AdamW(build_model(GPT, config, seed=0, "
                                       'device="cpu").parameters(),'},
                        sees="check that the optimizer updates this model's parameters")],
        "ex5-check": [W("ex5-answer", {'"optimizer": optimizer.state_dict(), ': "",
                                       'optimizer.load_state_dict(state["optimizer"])': "pass"},
                        sees="save optimizer.state_dict() and load it with")],
    },
    "11_sumgpt": {
        "ex1-check": [W("ex1-answer", {"answer = answer[::-1]": "pass"},
                        sees="format_sum(123, 456): strings differ at character 8")],
        "ex2-check": [W("ex2-answer", {"y[:, :7] = -100": "y[:, :8] = -100"},
                        sees="every target before them is -100"),
                      W("ex2-answer", {"y[:, :7] = -100": "pass"},
                        sees="every target before them is -100")],
        "ex3-check": [W("ex3-answer", {"irreducible_loss = 5 *": "irreducible_loss = 6 *"},
                        blind=TYPE_ONLY)],
        "ex4-check": [W("ex4-answer", {"for _ in range(n_new)": "for _ in range(n_new - 1)"},
                        sees="output shape: first difference at index 1: expected 5 got 4")],
        "ex5-check": [W("ex5-answer", {"carry = (ak + bk + carry) // 10":
                                       "carry = (ak + bk) // 10"},
                        sees="the carry out of a column counts the carry that came into it")],
    },
    "12_bookgpt": {
        "ex1-check": [W("ex1-answer", {"round(len(b) * (1 - val_fraction))":
                                       "round(len(b) * val_fraction)"},
                        sees="train of three books: strings differ at character 1")],
        "ex2-check": [W("ex2-answer", {"return chunk[:, :-1], chunk[:, 1:]":
                                       "return chunk[:, :-1], chunk[:, :-1]"},
                        sees="y: 12 of 12 values differ")],
        "ex3-check": [W("ex3-answer", {"torch.softmax(logits / temperature":
                                       "torch.softmax(logits * temperature"},
                        sees="tau=0.5: values off")],
        "ex4-check": [W("ex4-answer", {" + T * d + ": " + "},
                        sees="gpt_params(140, 128, 4, 256, True): expected 844,032 got 811,264")],
    },
    "13_fast_on_your_cpu": {
        "ex1-check": [W("ex1-answer", {"statistics.median(times)": "statistics.mean(times)"},
                        sees="the median, not the mean")],
        "ex2-check": [W("ex2-answer", {"return 3 * B * T": "return 2 * B * T"},
                        sees="train_step_flops for BookGPT's cpu model, batch 32")],
        "ex3-check": [W("ex3-answer", {">= 1.25": "> 1.25"}, sees="at least 1.25 times as long")],
    },
}  # fmt: skip


def grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def graded_tests(nb) -> list[str]:
    return [grade_id(c) for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade")]


def visible_part(source: str) -> str:
    """A test cell as the student runs it in the lab: without its hidden tests."""
    return HIDDEN.sub("", source)


def _failure(client, source: str, index: int) -> tuple[str | None, str]:
    """Run ``source`` as a new cell; the name of the exception it raised (None when it raised
    none) and its message."""
    try:
        client.execute_cell(nbformat.v4.new_code_cell(source), index)
    except CellExecutionError as exc:
        return exc.ename, exc.evalue
    return None, ""


def _problems(test: str, wrong: W, visible: tuple[str | None, str], hidden: str | None):
    """What is wrong with how a test cell took ``wrong``: the visible check passed it, or showed
    another line than the table says, or the hidden test passed it."""
    label = f"{test} {next(iter(wrong.replace.values()))!r:.60}"
    error, shown = visible
    failed = FAILED_CHECKS | {wrong.crash} - {""}
    if wrong.blind and error is not None:
        yield f"{label}: said blind, yet the visible check shows {shown!r}"
    elif not wrong.blind and error not in failed:
        yield f"{label}: the visible check passed it ({error or 'no error'})"
    elif not wrong.blind and wrong.sees not in shown:
        yield f"{label}: the visible check shows {shown!r}, not {wrong.sees!r}"
    if hidden not in failed:
        yield f"{label}: its hidden test passed it ({hidden})"


def run_with_wrong_answers(solution, wrong: dict, nb=None, until: str | None = None) -> list[str]:
    """Run ``solution`` (or ``nb``, a changed copy of it) top to bottom in one kernel, each of
    ``wrong``'s mistakes bound in turn before its test cell, stopping after test cell ``until``;
    the problems found (an empty list when each mistake fails the visible check as the table
    says and the hidden test, and the solution itself passes)."""
    nb = nb or nbformat.read(solution, as_version=4)
    answers = {grade_id(c): c.source for c in nb.cells}
    problems = []
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as publish runs them
    client = NotebookClient(
        nb, timeout=900, kernel_name="python3",
        resources={"metadata": {"path": str(solution.parent)}},
    )  # fmt: skip
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            test = grade_id(cell)
            for mistake in wrong.get(test, []):
                source = answers[mistake.answer]
                for old, new in mistake.replace.items():
                    assert source.count(old) == 1, f"{solution.stem} {mistake.answer}: {old!r}"
                    source = source.replace(old, new)
                assert _failure(client, SAVE, index)[0] is None
                if error := _failure(client, source, index)[0]:
                    problems.append(f"{test}: the wrong answer {source!r:.80} raised {error}")
                visible = _failure(client, visible_part(cell.source), index)
                hidden = _failure(client, HIDDEN.search(cell.source).group(1), index)[0]
                problems += _problems(test, mistake, visible, hidden)
                assert _failure(client, RESTORE, index)[0] is None, f"{test}: names not restored"
            if error := _failure(client, cell.source, index)[0]:
                problems.append(f"cell {index} ({test or 'not graded'}) of the solution: {error}")
            if until is not None and test == until:
                break
    return problems


def test_every_graded_test_cell_has_wrong_answers_each_seen_or_said_blind():
    covered = {(lab, test) for lab, tests in WRONG.items() for test, mistakes in tests.items()
               if mistakes}  # fmt: skip
    graded = {(p.stem, test) for p in SOLVED for test in graded_tests(nbformat.read(p, 4))}
    assert covered == graded
    for tests in WRONG.values():
        for mistakes in tests.values():
            assert all(bool(w.sees) != bool(w.blind) for w in mistakes), mistakes


@pytest.mark.parametrize("solution", SOLVED, ids=[p.stem for p in SOLVED])
def test_each_wrong_answer_fails_the_check_the_student_sees_and_the_hidden_test(solution):
    assert run_with_wrong_answers(solution, WRONG[solution.stem]) == []


def test_a_right_answer_in_place_of_a_wrong_one_is_reported():
    """The mutation: with the solution's own text as ex2's "mistake", the run names ex2."""
    solution = SOLUTIONS / "09_flop_accounting.ipynb"
    right = W("ex2-answer", {"+ 2 * C * V": "+ 2 * C * V"}, sees="expected")
    assert run_with_wrong_answers(solution, {"ex2-check": [right]}, until="ex2-check") == [
        "ex2-check '+ 2 * C * V': the visible check passed it (no error)",
        "ex2-check '+ 2 * C * V': its hidden test passed it (None)",
    ]


# Lab 04's visible checks of exercises 1 and 3 as they were before they caught the mistakes the
# lab's text warns about (issue 46): the mutation the suite must catch.
LAB04_BEFORE = {
    "ex1-check": """pad = ScratchPad()
check_value("state_dict keys", list(pad.state_dict()), ["total"])
check_value(
    "buffer names", sorted(name for name, _ in pad.named_buffers()), ["scratch_pad", "total"]
)
check_value("scratch_pad shape", tuple(pad.scratch_pad.shape), (100,))
check_value("number of parameters", sum(p.numel() for p in pad.parameters()), 0)
pad.to(torch.float64)
check_value(
    "buffer dtypes after .to(float64)",
    [str(pad.scratch_pad.dtype), str(pad.total.dtype)],
    ["torch.float64", "torch.float64"],
    hint="a plain tensor attribute keeps its dtype: register both with register_buffer",
)
""",
    "ex3-check": """with torch.device("meta"):
    big = nn.Linear(4096, 4096)
check_value("model_size_mib(nn.Linear(4096, 4096))", model_size_mib(big), 64.015625)
""",
}


def test_lab_04s_checks_as_they_were_fail_the_suite():
    """The mutation: lab 04's visible checks as they were, where exercise 1's hint for a plain
    attribute was never reached and exercise 3 passed the two mistakes its text warns about."""
    solution = SOLUTIONS / "04_torch_nn_internals.ipynb"
    nb = nbformat.read(solution, as_version=4)
    for cell in nb.cells:
        if grade_id(cell) in LAB04_BEFORE:
            hidden = cell.source.index("### BEGIN HIDDEN TESTS")
            cell.source = LAB04_BEFORE[grade_id(cell)] + cell.source[hidden:]
    problems = run_with_wrong_answers(solution, WRONG[solution.stem], nb=nb, until="ex3-check")
    assert problems == [
        "ex1-check '': the visible check shows \"state_dict keys: expected 1 items got 2: "
        "extra 'scratch_pad'\", not 'likely cause: state_dict() holds the persistent buffers "
        "only'",
        "ex1-check 'self.scratch_pad = torch.zeros(100)': the visible check shows \"buffer "
        "names: expected 2 items got 1: missing 'scratch_pad'\", not 'a plain tensor attribute "
        "keeps its dtype'",
        "ex3-check 'return params / 2**20': the visible check passed it (no error)",
        "ex3-check 'for p in model.state_dict().values()': the visible check passed it (no error)",
    ]


def test_a_visible_check_cut_down_to_a_shape_check_is_reported():
    """The mutation: lab 01's embedding check cut down to its shape check."""
    solution = SOLUTIONS / "01_tokens_and_embeddings.ipynb"
    nb = nbformat.read(solution, as_version=4)
    cell = next(c for c in nb.cells if grade_id(c) == "ex2-check")
    hidden = cell.source.index("### BEGIN HIDDEN TESTS")
    cell.source = cell.source[: cell.source.index("check_tensor(")] + cell.source[hidden:]
    problems = run_with_wrong_answers(solution, WRONG[solution.stem], nb=nb, until="ex2-check")
    assert problems and all("the visible check passed it" in p for p in problems), problems
