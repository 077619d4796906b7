"""BookGPT (seed 003): train, resume and sample a character-level GPT on a prepared book corpus.

The corpus side (``bookgpt prepare``, memmaps, ``batch_at``) lives in
:mod:`course_utils.projects.corpus`; this module adds the run on top of the shared training
pieces of :mod:`course_utils.engine.training` (``TrainConfig``, ``lr_at``, ``configure_optimizer``,
:func:`~course_utils.engine.training.autocast_for`, :class:`~course_utils.engine.training.History`,
:func:`~course_utils.engine.training.atomic_save`):

* :data:`CONFIGS`: ``cpu`` (a couple of minutes on 2 CPU cores) and the seed's three shapes,
  ``baseline`` (d 128, 4 heads, 4 blocks, context 256), ``larger`` (d 256, 8 heads, 6 blocks)
  and ``ctx512`` (the larger model at context 512, batch halved).
* :func:`train_run`: warmup + cosine, gradient clipping, evaluation on *fixed* validation
  batches, a tqdm bar, ``log.csv`` / ``log.json``, and checkpoints written atomically. The
  batch of step ``s`` is ``batch_at(seed, s)``: it depends on the step alone, so a resumed run
  (``resume=True``: weights, AdamW moments, step, RNG state and the log come back from the
  checkpoint) reproduces an uninterrupted run's losses. Under ``torchrun`` it runs PyTorch DDP
  (gloo on CPU, nccl on CUDA): every rank takes its slice of the same global batch.
* :func:`load_checkpoint` / :func:`sample_text`: generation from a checkpoint with
  :func:`course_utils.core.generate.generate`, deterministic for a seed.
* :func:`recorded_seed_runs`: the seed's three configurations as trained once on a GPU.

Command line (``python -m course_utils bookgpt ...``, :func:`main`): ``prepare`` (from
:mod:`course_utils.projects.corpus`), ``train`` and ``sample``.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ..core.device import pick_device
from ..core.generate import generate
from ..core.model import GPT, GPTConfig, lm_loss
from ..engine.training import (
    BAR_SECONDS,
    History,
    TrainConfig,
    atomic_save,
    autocast_for,
    configure_optimizer,
    lr_at,
)
from . import corpus as corpus_mod

CHECKPOINT_FORMAT = "bookgpt-checkpoint-1"
CHECKPOINT_NAME = "ckpt.pt"
DEFAULT_RUN_DIR = Path("runs/bookgpt")  # runs/ is git-ignored
EVAL_SEED = 1_234_567  # the fixed evaluation windows are drawn from this seed, never from the run's


class BookGPTError(ValueError):
    """A run or checkpoint that cannot be used; the message says what is wrong and the fix."""


@dataclass(frozen=True)
class RunConfig:
    """Model shape plus training settings of one BookGPT configuration."""

    name: str
    n_embd: int
    n_head: int
    n_layer: int
    block_size: int
    batch_size: int  # the global batch: split across DDP ranks
    steps: int
    lr: float
    warmup_steps: int
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    dropout: float = 0.0
    eval_every: int = 250
    eval_batches: int = 8  # fixed validation (and train) windows: eval_batches x batch_size
    checkpoint_every: int = 250
    seed: int = 0  # model init, dropout and the data order

    def gpt_config(self, vocab_size: int) -> GPTConfig:
        """Our GPT (tied head, GELU, pre-LN, learned positions, biases, fused attention)."""
        return GPTConfig(
            vocab_size=vocab_size,
            block_size=self.block_size,
            n_layer=self.n_layer,
            n_head=self.n_head,
            n_embd=self.n_embd,
            dropout=self.dropout,
        )

    def train_config(self, precision: str = "auto", progress: bool = True) -> TrainConfig:
        return TrainConfig(
            steps=self.steps,
            lr=self.lr,
            min_lr_ratio=self.min_lr_ratio,
            warmup_steps=self.warmup_steps,
            weight_decay=self.weight_decay,
            grad_clip=self.grad_clip,
            eval_every=self.eval_every,
            precision=precision,
            seed=self.seed,
            progress=progress,
            desc=f"bookgpt {self.name}",
        )


CONFIGS: dict[str, RunConfig] = {
    # about a minute on 2 CPU cores (~30 ms a step), to about 1.36 nats/char: words, verse lines
    "cpu": RunConfig(
        "cpu", n_embd=64, n_head=4, n_layer=3, block_size=64, batch_size=32, steps=2000,
        lr=3e-3, warmup_steps=50, eval_every=250, eval_batches=8, checkpoint_every=250,
    ),
    # seconds: for tests and smoke checks (dropout on, so a resume must restore the RNG)
    "tiny": RunConfig(
        "tiny", n_embd=32, n_head=2, n_layer=2, block_size=32, batch_size=8, steps=20,
        lr=3e-3, warmup_steps=4, dropout=0.1, eval_every=5, eval_batches=2, checkpoint_every=5,
    ),
    # seed 003's configurations: batch 128 at context 256, halved to 64 at context 512
    "baseline": RunConfig(
        "baseline", n_embd=128, n_head=4, n_layer=4, block_size=256, batch_size=128,
        steps=5000, lr=1e-3, warmup_steps=200, dropout=0.1,
    ),
    "larger": RunConfig(
        "larger", n_embd=256, n_head=8, n_layer=6, block_size=256, batch_size=128,
        steps=5000, lr=6e-4, warmup_steps=200, dropout=0.1,
    ),
    "ctx512": RunConfig(
        "ctx512", n_embd=256, n_head=8, n_layer=6, block_size=512, batch_size=64,
        steps=5000, lr=6e-4, warmup_steps=200, dropout=0.1,
    ),
}  # fmt: skip


def get_config(name: str, **overrides) -> RunConfig:
    """A named configuration with some fields replaced (e.g. ``steps=40`` for a short run)."""
    if name not in CONFIGS:
        raise BookGPTError(f"unknown config {name!r}; choose one of {sorted(CONFIGS)}")
    known = {f.name for f in fields(RunConfig)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise BookGPTError(f"unknown RunConfig fields {unknown}; known: {sorted(known)}")
    return replace(CONFIGS[name], **{k: v for k, v in overrides.items() if v is not None})


# ---- data ------------------------------------------------------------------------------------


def eval_windows(data: np.ndarray, cfg: RunConfig) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The fixed evaluation batches of a split: ``eval_batches`` batches drawn once from
    :data:`EVAL_SEED`. Every evaluation of every run scores the same windows, so two points of
    a curve differ because the model changed, not because the sample did."""
    g = torch.Generator().manual_seed(EVAL_SEED)
    return [
        corpus_mod.get_batch(data, cfg.batch_size, cfg.block_size, g)
        for _ in range(cfg.eval_batches)
    ]


@torch.no_grad()
def mean_loss(model: nn.Module, batches, device, precision: str = "auto") -> float:
    """Mean cross-entropy (nats per character) of ``model`` over ``batches``, in eval mode."""
    was_training = model.training
    model.eval()
    total = 0.0
    for x, y in batches:
        with autocast_for(device, precision):
            logits = model(x.to(device))
        total += float(lm_loss(logits, y.to(device)))
    model.train(was_training)
    return total / len(batches)


# ---- distributed -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world > 1

    @property
    def main(self) -> bool:
        return self.rank == 0


def dist_from_env() -> Dist:
    """The rank layout torchrun puts in the environment (one process: rank 0 of 1)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    return Dist(int(os.environ.get("RANK", "0")), world, int(os.environ.get("LOCAL_RANK", "0")))


def _wants_cuda(device) -> bool:
    """Whether a run asked for ``device`` (None: the best available) trains on CUDA GPUs."""
    if device is None:
        return torch.cuda.is_available()
    return torch.device(device).type == "cuda"


def shard(x: torch.Tensor, dist: Dist) -> torch.Tensor:
    """This rank's rows of a global batch (equal slices; rank r gets slice r)."""
    if x.size(0) % dist.world:
        raise BookGPTError(
            f"the global batch {x.size(0)} does not split evenly over {dist.world} processes"
        )
    per = x.size(0) // dist.world
    return x[dist.rank * per : (dist.rank + 1) * per]


# ---- checkpoints -----------------------------------------------------------------------------


def _history_dict(history: History) -> dict:
    return {
        "losses": list(history.losses),
        "lrs": list(history.lrs),
        "grad_norms": list(history.grad_norms),
        "evals": [dict(e) for e in history.evals],
        "seconds": history.seconds,
    }


def _history_from(d: dict) -> History:
    return History(
        losses=list(d["losses"]),
        lrs=list(d["lrs"]),
        grad_norms=list(d["grad_norms"]),
        evals=[dict(e) for e in d["evals"]],
        seconds=float(d["seconds"]),
    )


def write_logs(out_dir: Path, history: History) -> None:
    """``log.csv`` (one row per step: step, lr, loss, grad_norm, val_loss, train_eval_loss
    where evaluated) and ``log.json`` (the whole history), each written atomically."""
    evals = {e["step"]: e for e in history.evals}
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["step", "lr", "loss", "grad_norm", "val_loss", "train_eval_loss"])
    for i, (lr, loss, norm) in enumerate(zip(history.lrs, history.losses, history.grad_norms)):
        e = evals.get(i + 1, {})
        writer.writerow(
            [i + 1, f"{lr:.6g}", repr(loss), repr(norm), e.get("val_loss", ""),
             e.get("train_loss", "")]
        )  # fmt: skip
    for name, text in (
        ("log.csv", buf.getvalue()),
        ("log.json", json.dumps(_history_dict(history))),
    ):
        tmp = out_dir / f".{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, out_dir / name)


def save_checkpoint(path, model, optimizer, cfg, gpt_config, step, history, itos) -> Path:
    """Everything a resume or a sample needs, written atomically (temp file + rename)."""
    state = {
        "format": CHECKPOINT_FORMAT,
        "run_config": asdict(cfg),
        "gpt_config": asdict(gpt_config),
        "itos": list(itos),
        "step": step,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "history": _history_dict(history),
    }
    return atomic_save(state, path)


def read_checkpoint(path: str | Path) -> dict:
    """A checkpoint's dict, or a :class:`BookGPTError` that says why it cannot be one."""
    path = Path(path)
    if not path.is_file():
        raise BookGPTError(f"checkpoint {path} does not exist; train first (bookgpt train)")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many kinds (UnpicklingError, KeyError, ...)
        text = str(err).strip().splitlines()[0] if str(err).strip() else ""
        first = f"{type(err).__name__}: {text}" if text else type(err).__name__
        raise BookGPTError(
            f"checkpoint {path} is corrupt or not a PyTorch file ({first}); delete it and "
            f"train again"
        ) from None
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        got = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise BookGPTError(
            f"checkpoint {path} is not a BookGPT checkpoint (format {got!r}, expected "
            f"{CHECKPOINT_FORMAT!r})"
        )
    return state


def load_checkpoint(path: str | Path, device=None) -> tuple[GPT, list[str], dict]:
    """``(model, itos, state)`` from a checkpoint; the model is in eval mode on ``device``.
    Raises :class:`BookGPTError` for a missing, corrupt or mismatched file."""
    state = read_checkpoint(path)
    try:
        gpt_config = GPTConfig(**state["gpt_config"])
        model = GPT(gpt_config)
        model.load_state_dict(state["model"])
    except (KeyError, TypeError, ValueError, RuntimeError) as err:
        first = str(err).strip().splitlines()[0]
        raise BookGPTError(
            f"checkpoint {path} does not match its model configuration ({first})"
        ) from None
    if len(state["itos"]) != gpt_config.vocab_size:
        raise BookGPTError(
            f"checkpoint {path}: vocabulary of {len(state['itos'])} characters but the model "
            f"has vocab_size={gpt_config.vocab_size}"
        )
    model.to(device if device is not None else "cpu").eval()
    return model, list(state["itos"]), state


# ---- training --------------------------------------------------------------------------------


def train_run(
    cfg: RunConfig,
    data_dir: str | Path,
    out_dir: str | Path | None = None,
    *,
    device: str | torch.device | None = None,
    precision: str = "auto",
    resume: bool = False,
    stop_after: int | None = None,
    compile: bool = False,
    progress: bool = True,
    dist: Dist | None = None,
) -> tuple[GPT, History]:
    """Train ``cfg`` on the prepared corpus in ``data_dir``; return ``(model, history)``.

    ``out_dir`` (None: nothing written) receives ``ckpt.pt`` every ``checkpoint_every`` steps
    and at the end, and ``log.csv`` / ``log.json`` with it. ``resume=True`` continues from
    ``out_dir/ckpt.pt``. ``stop_after=N`` stops after step N *without* a final checkpoint, as
    if the process had been killed there (what the resume test does). Under DDP (``dist`` or
    torchrun's environment), each rank trains on its slice of ``batch_at(seed, step)`` and rank
    0 alone evaluates and writes files; the logged loss is the mean over ranks.
    """
    from tqdm.auto import tqdm

    dist = dist or dist_from_env()
    if dist.enabled:  # one process per GPU (cuda:LOCAL_RANK), or CPU processes on request
        device = torch.device(f"cuda:{dist.local_rank}") if _wants_cuda(device) else "cpu"
        if torch.device(device).type == "cuda":
            torch.cuda.set_device(device)
    device = torch.device(device) if device is not None else pick_device()
    out_dir = Path(out_dir) if out_dir is not None else None
    meta = corpus_mod.load_meta(data_dir)
    train_data = corpus_mod.load_split(data_dir, "train")
    val_data = corpus_mod.load_split(data_dir, "val")
    itos = meta["itos"]
    gpt_config = cfg.gpt_config(len(itos))
    tc = cfg.train_config(precision=precision, progress=progress and dist.main)

    ckpt_path = out_dir / CHECKPOINT_NAME if out_dir is not None else None
    state = None
    if resume:
        if ckpt_path is None:
            raise BookGPTError("--resume needs --out DIR holding a checkpoint")
        state = read_checkpoint(ckpt_path)
        if state["run_config"] != asdict(cfg):
            changed = sorted(k for k in asdict(cfg) if state["run_config"].get(k) != asdict(cfg)[k])
            raise BookGPTError(
                f"{ckpt_path} was written by a different configuration (differs in {changed});"
                f" resume with the same --config and options, or use a new --out"
            )
        if state["itos"] != itos:
            raise BookGPTError(f"{ckpt_path} was trained on a different corpus vocabulary")
    elif ckpt_path is not None and ckpt_path.exists() and dist.main:
        raise BookGPTError(
            f"{ckpt_path} exists; pass --resume to continue that run or choose another --out"
        )

    torch.manual_seed(cfg.seed)  # the init; build_model's CPU-then-move recipe
    model = GPT(gpt_config).to(device)
    optimizer = configure_optimizer(model, tc.lr, tc.weight_decay, tc.betas)
    history = History()
    start_step = 0
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        history = _history_from(state["history"])
        start_step = int(state["step"])
        torch.set_rng_state(state["rng"])
        if state["cuda_rng"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
    else:
        torch.manual_seed(cfg.seed + 1)  # dropout's stream, the same on resume via "rng"

    net: nn.Module = model
    if dist.enabled:
        from torch.nn.parallel import DistributedDataParallel as DDP

        net = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    if compile:
        net = torch.compile(net)

    val_batches = eval_windows(val_data, cfg) if dist.main else []
    train_batches = eval_windows(train_data, cfg) if dist.main else []

    def evaluate(step: int) -> None:
        row = {
            "step": step,
            "seconds": history.seconds,
            "val_loss": mean_loss(model, val_batches, device, precision),
            "train_loss": mean_loss(model, train_batches, device, precision),
        }
        history.evals.append(row)
        bar.set_postfix(val=f"{row['val_loss']:.3f}", refresh=False)

    def checkpoint(step: int) -> None:
        if out_dir is not None and dist.main:
            save_checkpoint(ckpt_path, model, optimizer, cfg, gpt_config, step, history, itos)
            write_logs(out_dir, history)

    bar = tqdm(
        total=cfg.steps,
        initial=start_step,
        desc=tc.desc,
        disable=not tc.progress,
        leave=True,
        mininterval=BAR_SECONDS,
    )
    net.train()
    for step in range(start_step, cfg.steps):
        if stop_after is not None and step >= stop_after:
            break
        t0 = time.perf_counter()
        lr = lr_at(step, tc)
        for group in optimizer.param_groups:
            group["lr"] = lr
        x, y = corpus_mod.batch_at(train_data, cfg.batch_size, cfg.block_size, cfg.seed, step)
        if dist.enabled:
            x, y = shard(x, dist), shard(y, dist)
        x, y = x.to(device), y.to(device)
        with autocast_for(device, precision):
            logits = net(x)
        loss = lm_loss(logits, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), tc.grad_clip)
        optimizer.step()
        logged = loss.detach().float()
        if dist.enabled:
            import torch.distributed as tdist

            tdist.all_reduce(logged)
            logged /= dist.world
        history.losses.append(float(logged))
        history.grad_norms.append(float(norm))
        history.lrs.append(lr)
        history.seconds += time.perf_counter() - t0
        bar.update(1)
        done = step + 1
        if dist.main and (done == cfg.steps or (cfg.eval_every and done % cfg.eval_every == 0)):
            evaluate(done)
        if done % 25 == 0:
            bar.set_postfix(loss=f"{history.losses[-1]:.3f}", refresh=False)
        if done == cfg.steps or (cfg.checkpoint_every and done % cfg.checkpoint_every == 0):
            checkpoint(done)
    bar.close()
    return model, history


# ---- sampling --------------------------------------------------------------------------------


def encode_prompt(prompt: str, itos: list[str]) -> list[int]:
    """Token ids of ``prompt``; :class:`BookGPTError` listing every unknown character."""
    stoi = {ch: i for i, ch in enumerate(itos)}
    unknown = sorted(set(prompt) - stoi.keys())
    if unknown:
        raise BookGPTError(
            f"the prompt contains characters not in the model's vocabulary: {unknown!r}; the "
            f"vocabulary is {''.join(itos)!r}"
        )
    return [stoi[ch] for ch in prompt]


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
    new = out[0, idx.size(1) :].tolist()
    return prompt + "".join(itos[i] for i in new)


# ---- recorded runs ---------------------------------------------------------------------------

RECORDED_SEED_RUNS = Path(__file__).parent / "recorded" / "bookgpt_seed_runs.json"


def recorded_seed_runs() -> dict:
    """Seed 003's three configurations trained on a GPU by ``benchmarks/bookgpt_seed_runs.py
    --record``: the command, the machine, and per run the evaluations and a sample. Lesson 11
    reads it, since those runs take hours on a CPU."""
    return json.loads(RECORDED_SEED_RUNS.read_text(encoding="utf-8"))


# ---- command line ----------------------------------------------------------------------------


def add_train_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "train",
        help="train a configuration on a prepared corpus (resumable; DDP under torchrun)",
        description="Train BookGPT on a prepared corpus. Warmup + cosine, clipping, fixed "
        "validation batches, log.csv/log.json and atomic checkpoints in --out. Under "
        "`torchrun --nproc_per_node N` the global batch is split over N DDP processes.",
    )
    p.add_argument("--config", choices=sorted(CONFIGS), default="cpu")
    p.add_argument("--data", type=Path, default=corpus_mod.DEFAULT_OUT_DIR, help="prepared corpus")
    p.add_argument("--out", type=Path, default=None, help="run folder (default runs/bookgpt/CFG)")
    p.add_argument("--max-steps", type=int, default=None, help="total steps (schedule length)")
    p.add_argument("--batch-size", type=int, default=None, help="global batch size")
    p.add_argument("--eval-every", type=int, default=None)
    p.add_argument("--checkpoint-every", type=int, default=None)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--dropout", type=float, default=None)
    p.add_argument(
        "--device", default=None,
        help="cpu, cuda, mps (default: the best available); under torchrun, cuda gives each "
        "process its own GPU (cuda:LOCAL_RANK, nccl) and cpu runs CPU processes (gloo)",
    )  # fmt: skip
    p.add_argument(
        "--dtype", choices=("auto", "bf16", "fp32"), default="auto",
        help="auto: bf16 autocast on CUDA, fp32 elsewhere",
    )  # fmt: skip
    p.add_argument("--resume", action="store_true", help="continue from --out/ckpt.pt")
    p.add_argument(
        "--stop-after", type=int, default=None,
        help="stop after this step without a final checkpoint (simulates a crash)",
    )  # fmt: skip
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--no-progress", action="store_true", help="no tqdm bar")
    p.set_defaults(func=run_train)
    return p


def run_train(args: argparse.Namespace) -> int:
    dist = dist_from_env()
    if dist.enabled:
        import torch.distributed as tdist

        backend = "nccl" if _wants_cuda(args.device) else "gloo"
        tdist.init_process_group(backend=backend)
    try:
        cfg = get_config(
            args.config,
            steps=args.max_steps,
            batch_size=args.batch_size,
            eval_every=args.eval_every,
            checkpoint_every=args.checkpoint_every,
            seed=args.seed,
            dropout=args.dropout,
        )
        out = args.out if args.out is not None else DEFAULT_RUN_DIR / cfg.name
        if dist.main:
            vocab_size = corpus_mod.load_meta(args.data)["vocab_size"]
            n = sum(p.numel() for p in GPT(cfg.gpt_config(vocab_size)).parameters())
            print(
                f"bookgpt {cfg.name}: {n:,} parameters, {cfg.steps} steps x {cfg.batch_size} x "
                f"{cfg.block_size} tokens"
                + (f", {dist.world} DDP processes" if dist.enabled else "")
            )
        _, history = train_run(
            cfg, args.data, out, device=args.device, precision=args.dtype, resume=args.resume,
            stop_after=args.stop_after, compile=args.compile, progress=not args.no_progress,
            dist=dist,
        )  # fmt: skip
    except (BookGPTError, corpus_mod.CorpusError, corpus_mod.CorpusNotPreparedError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    finally:
        if dist.enabled:
            import torch.distributed as tdist

            tdist.destroy_process_group()
    if dist.main:
        if history.evals:
            last = history.evals[-1]
            print(
                f"step {last['step']}: train loss {last['train_loss']:.4f}, val loss "
                f"{last['val_loss']:.4f} (fixed batches)"
            )
        done = len(history.losses)
        where = f"{out}/{CHECKPOINT_NAME}" if done == cfg.steps else "no final checkpoint"
        print(f"{done} of {cfg.steps} steps done, {history.seconds:.1f} s of training; {where}")
    return 0


def add_sample_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "sample", help="generate text from a checkpoint", description="Sample from a checkpoint."
    )
    p.add_argument("checkpoint", type=Path)
    p.add_argument("--prompt", default="\n")
    p.add_argument("--tokens", type=int, default=300)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.set_defaults(func=run_sample)
    return p


def run_sample(args: argparse.Namespace) -> int:
    try:
        if args.temperature <= 0:
            raise BookGPTError(f"--temperature must be > 0, got {args.temperature}")
        if args.top_k is not None and args.top_k < 1:
            raise BookGPTError(f"--top-k must be >= 1, got {args.top_k}")
        model, itos, _ = load_checkpoint(args.checkpoint, device=args.device)
        text = sample_text(
            model, itos, args.prompt, args.tokens, temperature=args.temperature,
            top_k=args.top_k, seed=args.seed,
        )  # fmt: skip
    except BookGPTError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(text)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m course_utils bookgpt",
        description="BookGPT: a character-level GPT on books (prepare, train, sample)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    corpus_mod.add_prepare_parser(sub)
    add_train_parser(sub)
    add_sample_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """``python -m course_utils bookgpt prepare|train|sample ...``."""
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
