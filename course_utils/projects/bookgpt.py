"""BookGPT (the FLOPs/SumGPT/BookGPT write-up): a character-level GPT trained on a prepared book
corpus, and sampled.

The corpus side (``bookgpt prepare``, memmaps, ``batch_at``) is :mod:`course_utils.projects.corpus`;
this module is the recipe handed to the engine (:func:`course_utils.engine.training.train`):

* :data:`CONFIGS`: ``cpu`` (a short CPU run), ``tiny`` (tests) and the write-up's
  three shapes, ``baseline`` (d 128, 4 heads, 4 blocks, context 256), ``larger`` (d 256, 8
  heads, 6 blocks) and ``ctx512`` (the larger model at context 512, batch halved).
* :func:`train_run`: the model, ``batch_at(step)`` (the batch depends on the seed and the step
  alone, so a resumed run reproduces an uninterrupted one), and an evaluation on *fixed*
  validation and train windows; the engine does the rest (schedule, clipping, logs,
  checkpoints, resume, DDP under ``torchrun``).
* :func:`load_checkpoint` / :func:`sample_text`: generation from a checkpoint, deterministic
  for a seed; :func:`sample_statistics` / :func:`temperature_trend`: lesson 12's judgement of
  samples across temperatures; :func:`recorded_reference_runs`: the write-up's three
  configurations trained on a GPU.

Command line: ``python -m course_utils bookgpt prepare|train|sample`` (:func:`configure`).
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ..core.cli import add_subcommand, command_parser, run_command
from ..core.device import pick_device
from ..core.generate import generate
from ..core.model import GPT, GPTConfig, lm_loss
from ..core.modes import eval_mode
from ..core.seeding import build_model
from ..core.tokenizer import CharTokenizer, UnknownCharacterError
from ..engine import checkpoint
from ..engine.config import OPTIMIZER_HELP, OPTIMIZERS
from ..engine.distributed import Dist, dist_from_env, process_group, rank_device
from ..engine.policy import model_width
from ..engine.resume import EXTEND_HELP, check_run_dir
from ..engine.training import History, TrainConfig, autocast_for, train
from . import corpus

PROJECT = "bookgpt"
CHECKPOINT_NAME = checkpoint.CHECKPOINT_NAME
DEFAULT_RUN_DIR = Path("runs/bookgpt")  # runs/ is git-ignored
EVAL_SEED = 1_234_567  # the fixed evaluation windows are drawn from this seed, never from the run's


class BookGPTError(ValueError):
    """A run or checkpoint that cannot be used; the message says what is wrong and the fix."""


UNSET_VOCAB = 1  # a RunConfig's model has no vocabulary yet: gpt_config sets the corpus's


@dataclass(frozen=True)
class RunConfig:
    """One BookGPT configuration: the model's :class:`GPTConfig` (its vocabulary set from the
    corpus by :meth:`gpt_config`), the engine's :class:`TrainConfig`, and what BookGPT adds.
    Their fields read flat too (``cfg.steps``, ``cfg.block_size``)."""

    name: str
    model: GPTConfig
    train: TrainConfig
    batch_size: int  # the global batch: split across DDP ranks
    eval_batches: int = 8  # fixed validation (and train) windows: eval_batches x batch_size
    seed: int = 0  # model init and the data order; dropout draws from seed + 1

    def __getattr__(self, name: str):
        for part in ("model", "train"):
            config = object.__getattribute__(self, part)
            if name in {f.name for f in fields(config)}:
                return getattr(config, name)
        raise AttributeError(f"RunConfig has no field {name!r}")

    def gpt_config(self, vocab_size: int) -> GPTConfig:
        """Our GPT (tied head, GELU, pre-LN, learned positions, biases, fused attention) over
        the corpus's ``vocab_size`` characters."""
        return replace(self.model, vocab_size=vocab_size)

    def train_config(
        self,
        precision: str = "auto",
        progress: bool = True,
        compile: bool | None = None,
        optimizer: str = "adamw",
    ) -> TrainConfig:
        """The engine's settings for this configuration, with the run's choices."""
        return replace(
            self.train, precision=precision, progress=progress, compile=compile,
            optimizer=optimizer, seed=self.seed + 1, desc=f"bookgpt {self.name}",
        )  # fmt: skip


def _config(name: str, model: dict, train: dict, **bookgpt) -> RunConfig:
    """A :class:`RunConfig` from the fields that differ from the defaults."""
    settings = {"eval_every": 250, "checkpoint_every": 250, "log_every": 25, **train}
    return RunConfig(
        name, GPTConfig(vocab_size=UNSET_VOCAB, **model), TrainConfig(**settings), **bookgpt
    )


CONFIGS: dict[str, RunConfig] = {
    # about a minute on 2 CPU cores (docs/results/bookgpt_train.md), to words and verse lines
    "cpu": _config(
        "cpu", dict(n_embd=64, n_head=4, n_layer=3, block_size=64),
        dict(steps=2000, lr=3e-3, warmup_steps=50), batch_size=32, eval_batches=8,
    ),
    # seconds: for tests and smoke checks (dropout on, so a resume must restore the RNG)
    "tiny": _config(
        "tiny", dict(n_embd=32, n_head=2, n_layer=2, block_size=32, dropout=0.1),
        dict(steps=20, lr=3e-3, warmup_steps=4, eval_every=5, checkpoint_every=5),
        batch_size=8, eval_batches=2,
    ),
    # the FLOPs/SumGPT/BookGPT write-up's configurations: batch 128 at context 256, halved to 64
    # at context 512
    "baseline": _config(
        "baseline", dict(n_embd=128, n_head=4, n_layer=4, block_size=256, dropout=0.1),
        dict(steps=5000, lr=1e-3, warmup_steps=200), batch_size=128,
    ),
    "larger": _config(
        "larger", dict(n_embd=256, n_head=8, n_layer=6, block_size=256, dropout=0.1),
        dict(steps=5000, lr=6e-4, warmup_steps=200), batch_size=128,
    ),
    "ctx512": _config(
        "ctx512", dict(n_embd=256, n_head=8, n_layer=6, block_size=512, dropout=0.1),
        dict(steps=5000, lr=6e-4, warmup_steps=200), batch_size=64,
    ),
}  # fmt: skip


def get_config(name: str, **overrides) -> RunConfig:
    """A named configuration with some fields replaced, each where it lives (``steps=40`` in
    its TrainConfig, ``dropout=0.0`` in its GPTConfig, ``batch_size`` in BookGPT's own)."""
    if name not in CONFIGS:
        raise BookGPTError(f"unknown config {name!r}; choose one of {sorted(CONFIGS)}")
    cfg = CONFIGS[name]
    own = {f.name for f in fields(RunConfig)} - {"name", "model", "train"}
    parts = {"model": {f.name for f in fields(GPTConfig)} - {"vocab_size"},
             "train": {f.name for f in fields(TrainConfig)} - {"seed"}}  # fmt: skip
    given = {k: v for k, v in overrides.items() if v is not None}
    unknown = sorted(set(given) - own - parts["model"] - parts["train"])
    if unknown:
        known = sorted(own | parts["model"] | parts["train"])
        raise BookGPTError(f"unknown RunConfig fields {unknown}; known: {known}")
    split = {part: {k: v for k, v in given.items() if k in names and k not in own}
             for part, names in parts.items()}  # fmt: skip
    return replace(
        cfg, model=replace(cfg.model, **split["model"]), train=replace(cfg.train, **split["train"]),
        **{k: v for k, v in given.items() if k in own},
    )  # fmt: skip


# ---- data ------------------------------------------------------------------------------------


def eval_windows(data: np.ndarray, cfg: RunConfig) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The fixed evaluation batches of a split: ``eval_batches`` batches drawn once from
    :data:`EVAL_SEED`. Every evaluation of every run scores the same windows, so two points of
    a curve differ because the model changed, not because the sample did."""
    g = torch.Generator().manual_seed(EVAL_SEED)
    return [
        corpus.get_batch(data, cfg.batch_size, cfg.block_size, g) for _ in range(cfg.eval_batches)
    ]


def mean_loss(model: nn.Module, batches, device, precision: str = "auto") -> float:
    """Mean cross-entropy (nats per character) of ``model`` over ``batches``, in eval mode."""
    total = torch.zeros((), device=device)
    with eval_mode(model):
        for x, y in batches:
            with autocast_for(device, precision, model_width(model)):
                logits = model(x.to(device))
            total += lm_loss(logits, y.to(device))
    return float(total) / len(batches)


def loss_evaluation(val_data, train_data, cfg: RunConfig, device, precision: str):
    """An evaluation for the engine: ``val_loss`` and ``train_loss`` on fixed windows."""
    val_batches, train_batches = eval_windows(val_data, cfg), eval_windows(train_data, cfg)

    def evaluate(model, step):
        return {
            "val_loss": mean_loss(model, val_batches, device, precision),
            "train_loss": mean_loss(model, train_batches, device, precision),
        }

    return evaluate


# ---- checkpoints and training ----------------------------------------------------------------


def load_checkpoint(path: str | Path, device=None) -> tuple[GPT, list[str], dict]:
    """``(model, itos, state)`` from a checkpoint (a ``ckpt.pt`` or its run folder); the model
    is in eval mode on ``device``. Raises a clear error for a missing, corrupt or foreign file."""
    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT_NAME
    state = checkpoint.read_checkpoint(path, project=PROJECT)
    model = checkpoint.model_from_checkpoint(state, path)
    itos = list(state["meta"].get("itos", []))
    if len(itos) != model.config.vocab_size:
        raise checkpoint.CheckpointError(
            f"checkpoint {path}: vocabulary of {len(itos)} characters but the model has "
            f"vocab_size={model.config.vocab_size}"
        )
    return model.to(device if device is not None else "cpu"), itos, state


def train_run(
    cfg: RunConfig,
    data_dir: str | Path,
    out_dir: str | Path | None = None,
    *,
    device: str | torch.device | None = None,
    precision: str = "auto",
    resume: bool = False,
    stop_after: int | None = None,
    compile: bool | None = None,
    progress: bool = True,
    dist: Dist | None = None,
    extend: bool = False,
    optimizer: str = "adamw",
) -> tuple[GPT, History]:
    """Train ``cfg`` on the prepared corpus in ``data_dir``; return ``(model, history)``.

    ``out_dir`` (None: nothing written) receives ``ckpt.pt``, ``log.csv`` and ``log.json``
    every ``checkpoint_every`` steps and at the end; ``resume=True`` continues from there.
    ``extend=True`` (with ``resume``) trains past the run's planned steps at the schedule's final
    learning rate. ``stop_after=N`` stops after step N without a final checkpoint, as a crash
    would. Under
    DDP (``dist`` or torchrun's environment) each rank trains on its slice of the batch.
    """
    dist = dist or dist_from_env()
    if dist.enabled:  # one process per GPU (cuda:LOCAL_RANK), or CPU processes on request
        device = rank_device(dist, device)
    device = torch.device(device) if device is not None else pick_device()
    itos = corpus.load_meta(data_dir)["itos"]
    train_data = corpus.load_split(data_dir, "train")
    model = build_model(GPT, cfg.gpt_config(len(itos)), seed=cfg.seed, device=device)
    evaluate = None
    if dist.main:
        evaluate = loss_evaluation(
            corpus.load_split(data_dir, "val"), train_data, cfg, device, precision
        )

    def batch_at(step: int):
        return corpus.batch_at(train_data, cfg.batch_size, cfg.block_size, cfg.seed, step)

    record = corpus.corpus_record(data_dir)
    if resume and out_dir is not None:
        check_same_corpus(Path(out_dir) / CHECKPOINT_NAME, record)
    meta = {"project": PROJECT, "run_config": asdict(cfg), "itos": list(itos), "corpus": record}
    settings = cfg.train_config(precision, progress, compile, optimizer)
    history = train(
        model, batch_at, settings, evaluate=evaluate, device=device, out_dir=out_dir,
        resume=resume, stop_after=stop_after, dist=dist, extend=extend, meta=meta,
    )  # fmt: skip
    return model, history


def check_same_corpus(path: Path, record: dict) -> None:
    """Refuse, in one line naming both corpora, to resume the run of ``path`` on another
    corpus than it trained on (``record``: :func:`~.corpus.corpus_record`). A checkpoint that
    recorded no corpus (older code) is not checked; a missing one is the engine's to report."""
    if not path.is_file():
        return
    saved = checkpoint.read_checkpoint(path, project=PROJECT)["meta"].get("corpus")
    if saved is None or saved.get("fingerprint") == record["fingerprint"]:
        return
    raise BookGPTError(
        f"cannot resume {path}: it trained on the corpus in {saved.get('_dir', '?')} "
        f"({corpus.describe_record(saved)}), but --data {record['_dir']} holds another "
        f"({corpus.describe_record(record)}); resume with the --data the run began on, or "
        f"train into a new output folder (--out)"
    )


# ---- sampling --------------------------------------------------------------------------------


def encode_prompt(prompt: str, itos: list[str]) -> list[int]:
    """Token ids of ``prompt`` under the model's vocabulary; a :class:`BookGPTError` lists
    every unknown character and the vocabulary."""
    try:
        return CharTokenizer(itos).encode(prompt)
    except UnknownCharacterError as err:
        raise BookGPTError(
            f"the prompt contains characters not in the model's vocabulary: {err.chars!r}; the "
            f"vocabulary is {''.join(itos)!r}"
        ) from None


def sample_text(
    model: GPT,
    itos: list[str],
    prompt: str = "\n",
    tokens: int = 200,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int = 0,
) -> str:
    """``prompt`` followed by ``tokens`` sampled characters; the same seed gives the same text
    (the draws come from a seeded CPU generator, :func:`course_utils.core.generate.pick_next`)."""
    if not prompt:
        raise BookGPTError("the prompt is empty; pass at least one character (e.g. a newline)")
    if tokens < 0:
        raise BookGPTError(f"--tokens must be >= 0, got {tokens}")
    ids = encode_prompt(prompt, itos)
    device = next(model.parameters()).device
    idx = torch.tensor([ids[-model.config.block_size :]], dtype=torch.long, device=device)
    generator = torch.Generator().manual_seed(seed)
    out = generate(model, idx, tokens, temperature=temperature, top_k=top_k, generator=generator)
    return prompt + CharTokenizer(itos).decode(out[0, idx.size(1) :])


def sample_statistics(
    model: GPT, itos: list[str], known_words: set[str], temperature: float, seeds=range(6), n=300
) -> tuple[float, float]:
    """How repetitive and how word-like samples at one temperature are: the mean over ``seeds``
    of (distinct 5-grams / all 5-grams, share of the sampled words that are in ``known_words``),
    each sample ``n`` characters after a newline."""
    distinct, known = [], []
    for seed in seeds:
        text = sample_text(model, itos, "\n", n, temperature=temperature, seed=seed)
        grams = [text[i : i + 5] for i in range(len(text) - 4)]
        words = re.findall(r"[A-Za-z]+", text)
        distinct.append(len(set(grams)) / len(grams))
        known.append(sum(w in known_words for w in words) / max(1, len(words)))
    return sum(distinct) / len(distinct), sum(known) / len(known)


def temperature_trend(low, mid, high) -> tuple[bool, bool]:
    """Lesson 12's claim about samples at three rising temperatures, from their
    :func:`sample_statistics`: (fewer repeats, fewer real words), each by a margin. The
    distinct 5-grams saturate near 1, so the middle and high ones are only both compared with
    the low."""
    (d_lo, k_lo), (d_mid, k_mid), (d_hi, k_hi) = low, mid, high
    return d_lo + 0.05 < min(d_mid, d_hi), k_lo > k_mid + 0.05 > k_hi + 0.1


# ---- recorded runs ---------------------------------------------------------------------------

RECORDED_REFERENCE_RUNS = Path(__file__).parent / "recorded" / "bookgpt_reference_runs.json"


def recorded_reference_runs() -> dict:
    """The write-up's three configurations (baseline, larger, ctx512) trained once on a GPU by
    ``benchmarks/bookgpt_reference_runs.py --record``: the command, the machine, and per run
    the evaluations and a sample. Lesson 12 reads it, since those runs take hours on a CPU."""
    return json.loads(RECORDED_REFERENCE_RUNS.read_text(encoding="utf-8"))


# ---- command line ----------------------------------------------------------------------------

TRAIN_EXAMPLE = "python -m course_utils bookgpt train --config cpu --out runs/bookgpt/cpu"
SAMPLE_EXAMPLE = (
    "python -m course_utils bookgpt sample runs/bookgpt/cpu --prompt 'And the LORD' --tokens 200"
)


def _train_parser(sub) -> None:
    p = add_subcommand(
        sub, "train", "train a configuration on a prepared corpus (resumable; DDP under torchrun)",
        "Train BookGPT on a prepared corpus: warmup + cosine, clipping, fixed validation "
        "batches, log.csv/log.json and atomic checkpoints in --out. Under `torchrun "
        "--nproc_per_node N` the global batch is split over N DDP processes.", TRAIN_EXAMPLE,
    )  # fmt: skip
    p.epilog += (
        f"\n  {TRAIN_EXAMPLE} --resume\n  torchrun --nproc_per_node 2 -m course_utils bookgpt "
        "train --config cpu --device cpu"
    )
    p.add_argument("--config", choices=sorted(CONFIGS), default="cpu")
    p.add_argument("--data", type=Path, default=corpus.DEFAULT_OUT_DIR, help="prepared corpus")
    p.add_argument("--out", type=Path, default=None, help="run folder (default runs/bookgpt/CFG)")
    p.add_argument("--steps", type=int, default=None, help="total steps (the schedule's length)")
    p.add_argument("--batch-size", type=int, default=None, help="global batch size")
    p.add_argument("--eval-every", type=int, default=None)
    p.add_argument("--checkpoint-every", type=int, default=None)
    p.add_argument("--seed", type=int, default=None, help="model init, dropout and data order")
    p.add_argument("--dropout", type=float, default=None)
    p.add_argument(
        "--device", default=None,
        help="cpu, cuda, mps (default: the best available); under torchrun, cuda gives each "
        "process its own GPU (cuda:LOCAL_RANK, nccl) and cpu runs CPU processes (gloo)",
    )  # fmt: skip
    p.add_argument("--dtype", choices=("auto", "bf16", "fp32"), default="auto",
                   help="auto: bf16 autocast on CUDA and where a CPU measures it faster, "
                   "else fp32")  # fmt: skip
    p.add_argument("--resume", action="store_true", help="continue from --out/ckpt.pt")
    p.add_argument("--extend", action="store_true", help=EXTEND_HELP)
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw", help=OPTIMIZER_HELP)
    p.add_argument("--lr", type=float, default=None, help="peak learning rate")
    p.add_argument(
        "--stop-after",
        type=int,
        default=None,
        help="stop after this step without a final checkpoint (simulates a crash)",
    )
    p.add_argument(
        "--compile", action=argparse.BooleanOptionalAction, default=None,
        help="torch.compile the model (default: where it measured faster, bf16 on a CPU for "
        "5,000 steps or more; --no-compile: never)",
    )  # fmt: skip
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run_train)


def run_train(args: argparse.Namespace) -> int:
    dist = dist_from_env()
    cfg = get_config(
        args.config, steps=args.steps, batch_size=args.batch_size, eval_every=args.eval_every,
        checkpoint_every=args.checkpoint_every, seed=args.seed, dropout=args.dropout,
        lr=args.lr,
    )  # fmt: skip
    out = args.out if args.out is not None else DEFAULT_RUN_DIR / cfg.name
    check_run_dir(out)  # before the corpus and the header line
    if args.resume:
        check_same_corpus(out / CHECKPOINT_NAME, corpus.corpus_record(args.data))
    with process_group(dist, args.device):
        if dist.main:
            vocab_size = corpus.load_meta(args.data)["vocab_size"]
            n = sum(p.numel() for p in GPT(cfg.gpt_config(vocab_size)).parameters())
            ddp = f", {dist.world} DDP processes" if dist.enabled else ""
            print(f"bookgpt {cfg.name}: {n:,} parameters, {cfg.steps} steps x "
                  f"{cfg.batch_size} x {cfg.block_size} tokens{ddp}")  # fmt: skip
        _, history = train_run(
            cfg, args.data, out, device=args.device, precision=args.dtype, resume=args.resume,
            stop_after=args.stop_after, compile=args.compile, progress=not args.no_progress,
            dist=dist, extend=args.extend, optimizer=args.optimizer,
        )  # fmt: skip
    if dist.main:
        if history.evals:
            last = history.evals[-1]
            print(f"step {last['step']}: train loss {last['train_loss']:.4f}, val loss "
                  f"{last['val_loss']:.4f} (fixed batches)")  # fmt: skip
        done = history.steps
        where = f"{out}/{CHECKPOINT_NAME}" if done == cfg.steps else "no final checkpoint"
        print(f"{done} of {cfg.steps} steps done, {history.seconds:.1f} s of training; {where}")
    return 0


def _sample_parser(sub) -> None:
    p = add_subcommand(
        sub, "sample", "generate text from a checkpoint",
        "Sample text from a BookGPT checkpoint (a ckpt.pt or its run folder); the same seed "
        "gives the same text.", SAMPLE_EXAMPLE,
    )  # fmt: skip
    p.add_argument("checkpoint", type=Path, help="ckpt.pt, or the run folder holding it")
    p.add_argument("--prompt", default="\n")
    p.add_argument("--tokens", type=int, default=300)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.set_defaults(func=run_sample)


def run_sample(args: argparse.Namespace) -> int:
    if args.temperature <= 0:
        raise BookGPTError(f"--temperature must be > 0, got {args.temperature}")
    if args.top_k is not None and args.top_k < 1:
        raise BookGPTError(f"--top-k must be >= 1, got {args.top_k}")
    model, itos, _ = load_checkpoint(args.checkpoint, device=args.device)
    print(sample_text(
        model, itos, args.prompt, args.tokens, temperature=args.temperature, top_k=args.top_k,
        seed=args.seed,
    ))  # fmt: skip
    return 0


def configure(parser: argparse.ArgumentParser) -> None:
    """The ``bookgpt`` command: ``prepare`` (the corpus), ``train`` and ``sample``."""
    parser.description = "BookGPT: a character-level GPT on books (prepare, train, sample)"
    parser.epilog = (
        f"examples:\n  {corpus.PREPARE_COMMAND.format(out='data/bookgpt')}\n  {TRAIN_EXAMPLE}"
        f"\n  {SAMPLE_EXAMPLE}"
    )
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    corpus.add_prepare_parser(sub)
    _train_parser(sub)
    _sample_parser(sub)


def main(argv: list[str] | None = None) -> int:
    """``python -m course_utils bookgpt prepare|train|sample ...``."""
    return run_command(command_parser("python -m course_utils bookgpt", configure), argv)
