"""SumGPT: a small GPT that adds two three-digit numbers (lesson 11; from the FLOPs/SumGPT/BookGPT
write-up).

The format: ``123+456=`` then the sum's four digits **units first** (``579`` -> ``9750``), then a
newline. Operands are zero-padded to 3 digits and the answer to 4 (999 + 999 = 1998), so every
example is exactly 13 tokens with a fixed role per position and no padding token: the model reads
the first 12 and predicts the last 12, which fills a context of 12 exactly.

Held-out sums never appear in training, by construction: the space of pairs is split by a fixed
hash of the *unordered* pair {a, b}; about 1 pair in 50 is held out, in both orders, and training
batches are drawn only from the other pairs.

``python -m course_utils sumgpt train|eval`` is the command line.
"""

from __future__ import annotations

import argparse
import functools
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from ..core.batching import step_generator
from ..core.cli import add_subcommand, command_parser, run_command
from ..core.device import pick_device
from ..core.generate import generate
from ..core.model import GPT, GPTConfig
from ..core.modes import eval_mode
from ..core.seeding import build_model
from ..core.tokenizer import CharTokenizer
from ..engine import checkpoint
from ..engine.checkpoint import CheckpointError
from ..engine.config import OPTIMIZER_HELP, OPTIMIZERS
from ..engine.resume import EXTEND_HELP
from ..engine.training import TrainConfig, train

VOCAB = "0123456789+=\n"
TOKENIZER = CharTokenizer(VOCAB)  # ids: "\n" 0, "+" 1, "0".."9" 2..11, "=" 12
DIGIT0, PLUS, EQUALS, NEWLINE = (TOKENIZER.stoi[c] for c in "0+=\n")
N_OPERAND_DIGITS, N_ANSWER_DIGITS = 3, 4
PROMPT_LEN = 2 * N_OPERAND_DIGITS + 2  # "123+456=" -> 8 tokens
ANSWER_LEN = N_ANSWER_DIGITS + 1  # four digits and the newline
SEQ_LEN = PROMPT_LEN + ANSWER_LEN  # 13 tokens
BLOCK_SIZE = SEQ_LEN - 1  # inputs are tokens 0..11, targets tokens 1..12
FIRST_TARGET = PROMPT_LEN - 1  # input position 7 ("=") predicts the first answer digit
IGNORE_INDEX = -100  # F.cross_entropy's default ignore_index
N_NUMBERS = 1000  # operands are 0..999
HELDOUT_MODULUS = 50  # an unordered pair is held out when its hash is 0 modulo this
HELDOUT_SALT = 0x5EED_0003


def sumgpt_config(**overrides) -> GPTConfig:
    """The FLOPs/SumGPT/BookGPT write-up's SumGPT: d_model 128, 4 heads, 4 blocks, context 12,
    over 13 tokens; the course's pre-LN GELU GPT with GPT-2 init and a tied head."""
    base = dict(vocab_size=len(VOCAB), block_size=BLOCK_SIZE, n_layer=4, n_head=4, n_embd=128)
    return GPTConfig(**{**base, **overrides})


# ----------------------------------------------------------------------------- format


def format_example(a: int, b: int, reverse: bool = True) -> str:
    """``format_example(123, 456)`` -> ``'123+456=9750\\n'`` (``'0579'`` when not reversed)."""
    _check_operands(torch.tensor([a]), torch.tensor([b]))
    answer = f"{a + b:04d}"
    return f"{a:03d}+{b:03d}={answer[::-1] if reverse else answer}\n"


def _check_operands(a: torch.Tensor, b: torch.Tensor) -> None:
    if a.shape != b.shape:
        raise ValueError(
            f"a and b must have the same shape, got {tuple(a.shape)} and {tuple(b.shape)}"
        )
    for name, t in (("a", a), ("b", b)):
        if t.numel() and (int(t.min()) < 0 or int(t.max()) >= N_NUMBERS):
            raise ValueError(f"operand {name} out of range: SumGPT adds numbers in [0, 999]")


def _digits(n: torch.Tensor, k: int) -> torch.Tensor:
    """(B,) integers -> (B, k) decimal digits, most significant first."""
    powers = 10 ** torch.arange(k - 1, -1, -1)
    return n[:, None] // powers % 10


def encode_pairs(a, b, reverse: bool = True) -> torch.Tensor:
    """Token ids (B, 13) of the full examples ``aaa+bbb=ssss\\n`` for operand tensors a, b."""
    a = torch.as_tensor(a, dtype=torch.long).reshape(-1)
    b = torch.as_tensor(b, dtype=torch.long).reshape(-1)
    _check_operands(a, b)
    answer = _digits(a + b, N_ANSWER_DIGITS)
    if reverse:
        answer = answer.flip(1)
    column = torch.ones(len(a), 1, dtype=torch.long)
    parts = [
        _digits(a, N_OPERAND_DIGITS) + DIGIT0,
        column * PLUS,
        _digits(b, N_OPERAND_DIGITS) + DIGIT0,
        column * EQUALS,
        answer + DIGIT0,
        column * NEWLINE,
    ]
    return torch.cat(parts, dim=1)


def masked_targets(seq: torch.Tensor, mask: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs (B, 12) and targets (B, 12) of full sequences (B, 13).

    The targets are the inputs shifted by one. With ``mask``, the 7 targets before the answer
    (the operand digits, ``+`` and ``=``) become ``IGNORE_INDEX`` so the loss counts only the
    answer's 4 digits and newline.
    """
    x, y = seq[:, :-1], seq[:, 1:].clone()
    if mask:
        y[:, :FIRST_TARGET] = IGNORE_INDEX
    return x, y


def make_batch(a, b, reverse: bool = True, mask: bool = True):
    """(x, y) for operand tensors a and b: inputs and (masked) targets, both (B, 12)."""
    return masked_targets(encode_pairs(a, b, reverse), mask)


def answers_to_ints(tokens: torch.Tensor, reverse: bool = True) -> torch.Tensor:
    """(B, 5) generated answer tokens -> (B,) integers; -1 where the answer is not four digits
    followed by a newline."""
    digits = tokens[:, :N_ANSWER_DIGITS] - DIGIT0
    ok = ((digits >= 0) & (digits <= 9)).all(1) & (tokens[:, N_ANSWER_DIGITS] == NEWLINE)
    if reverse:
        digits = digits.flip(1)
    powers = 10 ** torch.arange(N_ANSWER_DIGITS - 1, -1, -1, device=tokens.device)
    value = (digits.clamp(0, 9) * powers).sum(1)
    return torch.where(ok, value, torch.full_like(value, -1))


def count_carries(a, b) -> torch.Tensor:
    """How many of the three column additions produce a carry (0 to 3), per pair."""
    a = torch.as_tensor(a, dtype=torch.long).reshape(-1)
    b = torch.as_tensor(b, dtype=torch.long).reshape(-1)
    carries = torch.zeros_like(a)
    carry = torch.zeros_like(a)
    for k in range(N_OPERAND_DIGITS):
        column = a // 10**k % 10 + b // 10**k % 10 + carry
        carry = (column >= 10).long()
        carries += carry
    return carries


# ----------------------------------------------------------------------------- data


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """A fixed 64-bit mixing function (SplitMix64's finalizer): same bits on every machine."""
    x = x.astype(np.uint64)
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return x


def is_heldout(a, b) -> torch.Tensor:
    """True where the pair (a, b) is held out. Depends only on the unordered pair {a, b}, so
    ``a+b`` and ``b+a`` are held out together."""
    a = torch.as_tensor(a, dtype=torch.long).reshape(-1)
    b = torch.as_tensor(b, dtype=torch.long).reshape(-1)
    _check_operands(a, b)
    key = (torch.minimum(a, b) * N_NUMBERS + torch.maximum(a, b)).numpy()
    mixed = _splitmix64(key ^ HELDOUT_SALT)
    return torch.from_numpy(mixed % np.uint64(HELDOUT_MODULUS) == 0)


@functools.cache
def _pair_split() -> tuple[torch.Tensor, torch.Tensor]:
    """Pair indices ``a * 1000 + b`` of the training pool and of the held-out pool."""
    index = torch.arange(N_NUMBERS * N_NUMBERS)
    held = is_heldout(index // N_NUMBERS, index % N_NUMBERS)
    return index[~held], index[held]


def training_pool() -> torch.Tensor:
    """Indices ``a * 1000 + b`` of every pair training may draw (sorted)."""
    return _pair_split()[0]


def heldout_pool() -> torch.Tensor:
    """Indices ``a * 1000 + b`` of every held-out pair (sorted)."""
    return _pair_split()[1]


def heldout_pairs(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` distinct held-out pairs (a, b), chosen by ``seed``; the same on every machine."""
    pool = heldout_pool()
    if not 1 <= n <= len(pool):
        raise ValueError(f"n must lie in [1, {len(pool):,}] (the held-out pairs), got {n}")
    pick = torch.randperm(len(pool), generator=torch.Generator().manual_seed(seed))[:n]
    chosen = pool[pick]
    return chosen // N_NUMBERS, chosen % N_NUMBERS


class SumBatches:
    """Training batches as a function of the step: ``batches(step) -> (x, y)``.

    The batch of step ``s`` draws ``batch_size`` pairs uniformly from the training pool (never
    a held-out pair) on a CPU generator seeded from ``(seed, s)`` alone: the same on every
    machine, and a resumed run sees exactly the batches an uninterrupted one would.
    """

    def __init__(self, batch_size: int, seed: int = 0, reverse: bool = True, mask: bool = True):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size, self.seed, self.reverse, self.mask = batch_size, seed, reverse, mask
        self.pool = training_pool()

    def sample_pairs(self, n: int, step: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        generator = step_generator(self.seed, step)
        chosen = self.pool[torch.randint(len(self.pool), (n,), generator=generator)]
        return chosen // N_NUMBERS, chosen % N_NUMBERS

    def __call__(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        a, b = self.sample_pairs(self.batch_size, step)
        return make_batch(a, b, self.reverse, self.mask)


# ----------------------------------------------------------------------------- inference


def _device_of(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def greedy_decode(model: GPT, prompts: torch.Tensor, steps: int = ANSWER_LEN) -> torch.Tensor:
    """Append the most likely next token ``steps`` times (``generate(..., greedy=True)``);
    return only the new tokens, on the CPU."""
    out = generate(model, prompts.to(_device_of(model)), steps, greedy=True)
    return out[:, prompts.size(1) :].cpu()


def predict_sums(model: GPT, a, b, reverse: bool = True) -> torch.Tensor:
    """What the model answers for each a + b under greedy decoding (-1: not a number)."""
    prompts = encode_pairs(a, b, reverse)[:, :PROMPT_LEN]
    return answers_to_ints(greedy_decode(model, prompts), reverse)


@torch.no_grad()
def correct_answers(model: GPT, a, b, reverse: bool = True, batch_size: int = 2500) -> torch.Tensor:
    """(B,) bool: does greedy decoding produce exactly the right answer and newline?

    Computed in one forward pass per chunk: greedy decoding is right if and only if the
    argmax at every answer position is right when the model is fed the *correct* previous
    tokens (teacher forcing). If every argmax is right, each decoding step sees exactly the
    teacher-forced prefix; at the first wrong argmax, decoding goes wrong too.
    """
    x, y = make_batch(a, b, reverse, mask=True)
    results = []
    with eval_mode(model):
        for start in range(0, len(x), batch_size):
            xb = x[start : start + batch_size].to(_device_of(model))
            pred = model(xb)[:, FIRST_TARGET:].argmax(-1).cpu()
            results.append((pred == y[start : start + batch_size, FIRST_TARGET:]).all(1))
    return torch.cat(results)


def exact_match(model: GPT, a, b, reverse: bool = True) -> float:
    """The fraction of sums the model answers exactly right under greedy decoding."""
    return float(correct_answers(model, a, b, reverse).float().mean())


# ----------------------------------------------------------------------------- checkpoints

PROJECT = "sumgpt"


def save_checkpoint(path, model: GPT, *, reverse: bool = True, **meta) -> Path:
    """Write the model, its config, the digit order and ``meta`` (plain numbers and strings)
    in the course's checkpoint format, atomically."""
    return checkpoint.save_checkpoint(
        path, model, meta={"project": PROJECT, "reverse": bool(reverse), **meta}
    )


def load_checkpoint(path, device=None) -> tuple[GPT, dict]:
    """The model saved at ``path`` (a checkpoint file or a run folder) and its info
    (``reverse``, ``config``, ``meta``). Raises :class:`CheckpointError` saying what is wrong
    with a missing, corrupt, foreign or mismatched file."""
    path = Path(path)
    if path.is_dir():
        path = path / checkpoint.CHECKPOINT_NAME
    state = checkpoint.read_checkpoint(path, project=PROJECT)
    shape = {k: (state["model_config"] or {}).get(k) for k in ("vocab_size", "block_size")}
    if (shape["vocab_size"], shape["block_size"]) != (len(VOCAB), BLOCK_SIZE):
        raise CheckpointError(
            f"{path}: config has vocab_size={shape['vocab_size']}, block_size="
            f"{shape['block_size']}; SumGPT needs vocab_size={len(VOCAB)}, block_size={BLOCK_SIZE}"
        )
    model = checkpoint.model_from_checkpoint(state, path)
    config = model.config
    model.to(device if device is not None else pick_device())
    meta = dict(state["meta"])
    return model, {"reverse": bool(meta.pop("reverse", True)), "config": config, "meta": meta}


# ----------------------------------------------------------------------------- training


@dataclass(frozen=True)
class Recipe:
    """One way to train SumGPT: the model's :class:`GPTConfig`, the engine's
    :class:`TrainConfig` and the batch size (SumGPT's own: the engine takes batches, not a size).
    Chosen with seed sweeps at 1 and 2 threads (``benchmarks/sumgpt_time_to_accuracy.py``; the
    docs/results/sumgpt_time_to_accuracy.md says how each recipe fared)."""

    name: str
    model: GPTConfig
    train: TrainConfig
    batch_size: int


RECIPES: dict[str, Recipe] = {
    # AdamW with beta2 0.95 (it forgets the large early gradients within ~20 steps, so the small
    # ones of the loss plateau take larger steps) and a cosine long enough for a seed that
    # leaves the plateau late; what lesson 11 trains (in fp32) and ``sumgpt train`` by default
    "lesson": Recipe(
        "lesson", sumgpt_config(),
        TrainConfig(steps=2000, lr=1e-3, warmup_steps=100, weight_decay=0.1, betas=(0.9, 0.95),
                    desc="SumGPT"),
        batch_size=128,
    ),
    # Muon (torch.optim.Muon) for the hidden matrices, AdamW for embeddings, norms and biases,
    # as the modded-nanogpt speedruns train; fewer updates to 99.9% than the lesson's recipe
    "fast": Recipe(
        "fast", sumgpt_config(),
        TrainConfig(steps=1000, lr=3e-3, warmup_steps=100, weight_decay=0.0, betas=(0.9, 0.95),
                    optimizer="muon", muon_lr=0.02, desc="SumGPT fast"),
        batch_size=128,
    ),
}  # fmt: skip
DEFAULT_RECIPE = "lesson"
_LESSON = RECIPES[DEFAULT_RECIPE]
# the lesson's numbers by name, as lesson 11 reads them
DEFAULT_TRAIN = dict(
    steps=_LESSON.train.steps, batch_size=_LESSON.batch_size, lr=_LESSON.train.lr,
    warmup_steps=_LESSON.train.warmup_steps, weight_decay=_LESSON.train.weight_decay,
    betas=_LESSON.train.betas,
)  # fmt: skip


def get_recipe(name: str = DEFAULT_RECIPE) -> Recipe:
    """A named recipe; an unknown name is refused with the names there are."""
    if name not in RECIPES:
        raise ValueError(f"unknown SumGPT recipe {name!r}; choose one of {sorted(RECIPES)}")
    return RECIPES[name]


def train_config(
    steps: int | None = None, *, recipe: str = DEFAULT_RECIPE, **overrides
) -> TrainConfig:
    """The engine's settings of a recipe (the lesson's by default) with ``steps`` (default: the
    recipe's) and ``overrides`` applied; the warmup never outlasts the run. Precision ``auto``
    unless overridden: bf16 autocast where it measures faster; lesson 11 asks for fp32."""
    base = get_recipe(recipe).train
    steps = base.steps if steps is None else steps
    warmup = min(overrides.pop("warmup_steps", base.warmup_steps), steps)
    return replace(base, steps=steps, warmup_steps=warmup, **overrides)


def exact_match_evaluation(n: int = 1000, seed: int = 0, reverse: bool = True):
    """An evaluation for the engine: ``exact_match`` on ``n`` fixed held-out sums."""
    a, b = heldout_pairs(n, seed=seed)

    def evaluate(model, step):
        return {"exact_match": exact_match(model, a, b, reverse)}

    return evaluate


def train_sumgpt(
    steps: int | None = None,
    *,
    recipe: str = DEFAULT_RECIPE,
    seed: int = 0,
    batch_size: int | None = None,
    reverse: bool = True,
    mask: bool = True,
    device=None,
    eval_n: int = 1000,
    eval_seed: int = 0,
    stop_at: float | None = None,
    config: GPTConfig | None = None,
    out_dir=None,
    resume: bool = False,
    extend: bool = False,
    **train_options,
):
    """Build the model under ``seed`` and train it with the engine as ``recipe`` says (its
    steps, batch size and model unless given); returns ``(model, history)``.

    Every ``eval_every`` steps (and after the last) the history records ``exact_match`` on
    ``eval_n`` held-out sums; ``stop_at`` stops training once that reaches the threshold. The
    other keyword arguments are :class:`~course_utils.engine.training.TrainConfig` fields.
    """
    chosen = get_recipe(recipe)
    batch_size = chosen.batch_size if batch_size is None else batch_size
    device = torch.device(device) if device is not None else pick_device()
    model = build_model(GPT, config or chosen.model, seed=seed, device=device)
    run = train_config(steps, recipe=recipe, seed=seed, **train_options)
    meta = {"project": PROJECT, "reverse": reverse, "mask": mask, "batch_size": batch_size}
    stop = None if stop_at is None else (lambda row: row["exact_match"] >= stop_at)
    history = train(
        model, SumBatches(batch_size, seed=seed, reverse=reverse, mask=mask), run,
        evaluate=exact_match_evaluation(eval_n, eval_seed, reverse), stop_when=stop,
        device=device, out_dir=out_dir, resume=resume, extend=extend,
        meta={**meta, "seed": seed},
    )  # fmt: skip
    return model, history


# ----------------------------------------------------------------------------- CLI

TRAIN_EXAMPLE = "python -m course_utils sumgpt train --steps 1200 --seed 0 --out runs/sumgpt"
EVAL_EXAMPLE = "python -m course_utils sumgpt eval runs/sumgpt --n 10000"


def configure(parser: argparse.ArgumentParser) -> None:
    """The ``sumgpt`` command: ``train`` and ``eval`` subcommands."""
    parser.description = "SumGPT: train the 3-digit adder of lesson 11, or score a checkpoint."
    parser.epilog = f"examples:\n  {TRAIN_EXAMPLE}\n  {EVAL_EXAMPLE}"
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    tr = add_subcommand(
        sub, "train", "train from scratch and report held-out exact match",
        "Train SumGPT (answers units first, loss masked before '=') and write ckpt.pt, log.csv "
        "and log.json into --out.", TRAIN_EXAMPLE,
    )  # fmt: skip
    tr.add_argument(
        "--recipe", choices=sorted(RECIPES), default=DEFAULT_RECIPE,
        help="the model, optimizer, schedule and batch size (default: lesson 11's; fast: Muon, "
        "1,000 steps); the options below change one part of it",
    )  # fmt: skip
    tr.add_argument("--steps", type=int, default=None, help="updates (default: the recipe's)")
    tr.add_argument("--seed", type=int, default=0, help="model init and data order")
    tr.add_argument("--device", default=None, help="cpu, cuda, mps (default: the best there is)")
    tr.add_argument("--out", type=Path, default=Path("runs/sumgpt"), help="run folder")
    tr.add_argument("--resume", action="store_true", help="continue the run in --out")
    tr.add_argument("--extend", action="store_true", help=EXTEND_HELP)
    tr.add_argument("--optimizer", choices=OPTIMIZERS, default=None, help=OPTIMIZER_HELP)
    tr.add_argument(
        "--checkpoint-every", type=int, default=0,
        help="also write ckpt.pt every N steps (default 0: at the end only)",
    )  # fmt: skip
    tr.add_argument("--batch-size", type=int, default=None, help="default: the recipe's")
    tr.add_argument("--lr", type=float, default=None, help="peak learning rate (the recipe's)")
    tr.add_argument("--dtype", choices=("auto", "bf16", "fp32"), default="auto",
                    help="auto (default): bf16 autocast on CUDA and where a CPU measures it "
                    "faster (python -m course_utils doctor says), fp32 elsewhere")  # fmt: skip
    tr.add_argument(
        "--compile", action=argparse.BooleanOptionalAction, default=None,
        help="torch.compile the model (default: where it measured faster, bf16 on a CPU for "
        "5,000 steps or more; with inductor's cache warm it pays from a few hundred)",
    )  # fmt: skip
    tr.add_argument("--no-progress", action="store_true", help="no progress bar")
    tr.set_defaults(func=run_train)
    ev = add_subcommand(
        sub, "eval", "exact match of a checkpoint on held-out sums",
        "Score a SumGPT checkpoint (a ckpt.pt or its run folder) on held-out sums, overall and "
        "by number of carries.", EVAL_EXAMPLE,
    )  # fmt: skip
    ev.add_argument("checkpoint", type=Path, help="ckpt.pt, or the run folder holding it")
    ev.add_argument("--n", type=int, default=10_000, help="how many held-out sums")
    ev.add_argument("--seed", type=int, default=0, help="which held-out sums")
    ev.add_argument("--device", default=None)
    ev.set_defaults(func=run_eval)


def _report(model, a, b, reverse) -> float:
    ok = correct_answers(model, a, b, reverse)
    carries = count_carries(a, b)
    for c in range(N_OPERAND_DIGITS + 1):
        rows = carries == c
        if rows.any():
            share = float(ok[rows].float().mean())
            print(f"  {c} carries: {share:.4f} of {int(rows.sum()):,}")
    return float(ok.float().mean())


def run_train(args: argparse.Namespace) -> int:
    recipe = get_recipe(args.recipe)
    batch_size = recipe.batch_size if args.batch_size is None else args.batch_size
    if (args.steps is not None and args.steps < 1) or batch_size < 1:
        raise ValueError("--steps and --batch-size must be >= 1")
    chosen = {k: v for k, v in dict(lr=args.lr, optimizer=args.optimizer).items() if v is not None}
    device = pick_device(args.device)
    model, history = train_sumgpt(
        args.steps, recipe=args.recipe, seed=args.seed, batch_size=batch_size,
        precision=args.dtype, compile=args.compile, device=device,
        progress=not args.no_progress, out_dir=args.out, resume=args.resume,
        extend=args.extend, checkpoint_every=args.checkpoint_every, **chosen,
    )  # fmt: skip
    print(
        f"trained {history.steps:,} steps of batch {batch_size} in "
        f"{history.seconds:.1f} s on {device.type}; final loss {history.losses[-1]:.4f}"
    )
    accuracy = _report(model, *heldout_pairs(1000, seed=0), reverse=True)
    print(f"checkpoint: {args.out / checkpoint.CHECKPOINT_NAME}")
    print(f"exact-match: {accuracy:.4f} on 1000 held-out sums")
    return 0


def run_eval(args: argparse.Namespace) -> int:
    if not 1 <= args.n <= len(heldout_pool()):
        raise ValueError(f"--n must lie in [1, {len(heldout_pool()):,}], got {args.n}")
    model, info = load_checkpoint(args.checkpoint, device=pick_device(args.device))
    accuracy = _report(model, *heldout_pairs(args.n, seed=args.seed), info["reverse"])
    print(f"exact-match: {accuracy:.4f} on {args.n} held-out sums")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``sumgpt train ...`` or ``sumgpt eval CKPT ...``; returns the exit status."""
    return run_command(command_parser("python -m course_utils sumgpt", configure), argv)
