"""BookGPT's `cpu` configuration against Hugging Face GPT-2 of the same size, in one run.

    python benchmarks/bookgpt_train.py [--minutes 3] [--rows ours,hf,ours-fp32] [--config cpu]
        [--data data/bookgpt] [--threads N] [--device cpu] [--pairs 5] [--pair-steps 100]
        [--strict]

Every row trains from scratch on the same prepared corpus (``bookgpt prepare`` first; the default
corpus is the KJV), with the same batches (``batch_at(seed, step)``), the same AdamW groups,
clipping, warmup and peak learning rate, for the same wall-clock budget, all through the
engine's one loop (:func:`course_utils.engine.training.train`, time-budget mode). The cosine
follows the fraction of the budget spent (``lr_at_progress``), so each run's schedule ends when
its time does and a faster implementation simply takes more steps. Rows:

* ``ours``: :class:`course_utils.core.model.GPT` with the engine's default settings
  (``TrainConfig``: precision ``auto``, which is bf16 autocast on CUDA and on CPUs where the
  probe measures it faster, fp32 on the others; compiled where ``uses_compile`` says, i.e. bf16
  on a CPU for a budget of two minutes or more, its compile time counted; its AdamW kernel).
* ``ours-fp32``: the same in fp32 whatever the hardware (fused attention).
* ``hf``: ``transformers.GPT2LMHeadModel`` at the same shape (exact GELU, no dropout, tied head,
  SDPA attention) holding a copy of ours's initial weights: the same parameter count (asserted
  before training) and the same function (tests/test_benchmarks.py), with the optimizer the
  installed transformers' ``Trainer`` picks by default (``TrainingArguments().optim``, e.g.
  ``adamw_torch_fused``), in fp32 like its ``Trainer`` by default.
* ``ours-bf16`` / ``hf-bf16``: the same under bf16 autocast (``--dtype bf16`` of ``bookgpt
  train``).

Columns: updates done in the budget, tokens/s of training (evaluation excluded), MFU (model FLOPs
of training, 3x the forward count of :mod:`course_utils.core.flops`, per second over a measured
1024 x 1024 matmul rate in the row's dtype), and the validation loss after the budget on 32 fixed
batches of the per-book validation split. Before training, a paired throughput check alternates
``--pairs`` rounds of ``--pair-steps`` updates between ``ours`` and ``hf``, so the two see the
same machine load (rounds of 100 updates: shorter rounds read noisier); its median ratio is the
tokens/s figure compared with the target (>= 1.5 where bf16 is fast, AMX and AVX512_BF16; >= 1.2
on the other classes); the other target is the validation loss of ``ours`` after 3 minutes (<=
1.16). ``--strict`` exits with 1 when a target is missed.

``transformers`` is a development-only dependency (``pip install -e '.[instructor,dev]'``); on a
shared 2-core CPU run with ``OMP_WAIT_POLICY=PASSIVE`` (see sumgpt_time_to_accuracy.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch
from torch import nn

from course_utils.core import cpu
from course_utils.core.device import pick_device
from course_utils.core.flops import matmul_throughput, training_flops
from course_utils.core.model import GPT, GPTConfig
from course_utils.engine.throughput import rates
from course_utils.engine.training import (
    TrainConfig,
    Trainer,
    run_precision,
    train,
    uses_compile,
    uses_fused_adamw,
)
from course_utils.projects import corpus
from course_utils.projects.bookgpt import eval_windows, get_config, mean_loss

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cpu_classes  # noqa: E402  (a sibling benchmark module)

ROWS = ("ours", "ours-fp32", "hf", "ours-bf16", "hf-bf16")
RATIO_TARGETS = {"amx": 1.5, "avx512_bf16": 1.5}  # ours/HF tokens/s where bf16 is fast; else 1.2
TARGET_LOSS = 1.16  # nats per character on the validation split, after 3 minutes on 2 CPU cores


def hf_default_optimizer() -> str:
    """The optimizer the installed transformers' ``Trainer`` uses by default
    (``TrainingArguments().optim``, read from the dataclass: no accelerate needed)."""
    import dataclasses

    from transformers import TrainingArguments

    field = next(f for f in dataclasses.fields(TrainingArguments) if f.name == "optim")
    return str(getattr(field.default, "value", field.default))


def row_fused(row: str) -> bool | None:
    """AdamW's kernel for a row: the engine's default for ours (None: its own choice), HF
    Trainer's default for HF."""
    if row.startswith("hf"):
        return hf_default_optimizer() == "adamw_torch_fused"
    return None


def describe_optimizer(row: str, device) -> str:
    name = hf_default_optimizer() if row.startswith("hf") else "the engine's default"
    fused = uses_fused_adamw(TrainConfig(steps=1, fused=row_fused(row)), torch.device(device))
    return f"{name} ({'fused' if fused else 'for-each'} AdamW)"


class HFGPT2(nn.Module):
    """Hugging Face GPT-2 at the shape of a :class:`GPTConfig`, returning logits like ours."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        from transformers import GPT2Config, GPT2LMHeadModel

        hf_config = GPT2Config(
            vocab_size=config.vocab_size,
            n_positions=config.block_size,
            n_embd=config.n_embd,
            n_layer=config.n_layer,
            n_head=config.n_head,
            n_inner=config.hidden_dim,
            activation_function="gelu",  # exact GELU, as F.gelu in ours
            resid_pdrop=config.dropout,
            embd_pdrop=config.dropout,
            attn_pdrop=config.dropout,
            layer_norm_epsilon=config.norm_eps,
            tie_word_embeddings=config.tie_weights,
            bos_token_id=None,  # GPT-2's 50256 is outside a character vocabulary
            eos_token_id=None,
            attn_implementation="sdpa",  # F.scaled_dot_product_attention, as ours
        )
        self.model = GPT2LMHeadModel(hf_config)
        assert self.model.config._attn_implementation == "sdpa"

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=idx, use_cache=False).logits

    @torch.no_grad()
    def load_from(self, ours: GPT) -> HFGPT2:
        """Copy our model's weights in (HF's Conv1D stores a Linear's weight transposed), so
        both implementations start from the same point and compute the same function."""
        t = self.model.transformer
        t.wte.weight.copy_(ours.tok_emb.weight)
        t.wpe.weight.copy_(ours.pos_emb.weight)
        pairs = [(t.ln_f, ours.ln_f)]
        for hf_block, block in zip(t.h, ours.blocks):
            pairs += [(hf_block.ln_1, block.ln_1), (hf_block.ln_2, block.ln_2)]
            for conv, linear in (
                (hf_block.attn.c_attn, block.attn.qkv),
                (hf_block.attn.c_proj, block.attn.proj),
                (hf_block.mlp.c_fc, block.mlp.up),
                (hf_block.mlp.c_proj, block.mlp.down),
            ):
                conv.weight.copy_(linear.weight.T)
                conv.bias.copy_(linear.bias)
        for hf_norm, norm in pairs:
            hf_norm.weight.copy_(norm.weight)
            hf_norm.bias.copy_(norm.bias)
        if not ours.config.tie_weights:
            self.model.lm_head.weight.copy_(ours.head.weight)
        return self


def build(row: str, config: GPTConfig, seed: int, device) -> nn.Module:
    """The row's model: ours initialized on the CPU from ``seed`` (GPT-2's init), or HF's
    GPT-2 holding a copy of those same weights; then moved to ``device``."""
    torch.manual_seed(seed)
    model = GPT(config)
    if row.startswith("hf"):
        model = HFGPT2(config).load_from(model)
    return model.to(device)


def precision_of(row: str) -> str:
    """``auto`` for ours (the engine's default), else the precision the row's name says (HF
    Trainer's default is fp32)."""
    if row == "ours":
        return "auto"
    return "bf16" if row.endswith("bf16") else "fp32"


def dtype_of(row: str, device, cfg, minutes: float = 0.0) -> torch.dtype:
    """The dtype the row's matmuls run in (as its :class:`Trainer` decides), which its MFU is
    measured against."""
    config = row_config(row, cfg, minutes)
    bf16 = run_precision(config, torch.device(device), cfg.n_embd) == "bf16"
    return torch.bfloat16 if bf16 else torch.float32


def row_config(row: str, cfg, minutes: float = 0.0) -> TrainConfig:
    """The engine's settings of a row: ours the engine's defaults (compiled where
    ``uses_compile`` says); HF never compiled (its ``Trainer`` does not compile by default)."""
    tc = replace(
        cfg.train_config(precision=precision_of(row), progress=False), fused=row_fused(row),
        compile=False if row.startswith("hf") else None,
    )  # fmt: skip
    if minutes:  # as many steps as the time allows
        tc = replace(tc, steps=10**9, time_budget=60.0 * minutes, eval_every=0)
    return tc


def trainer_for(row: str, cfg, gpt_config, device, minutes: float = 0.0) -> Trainer:
    """The engine's :class:`Trainer` for one row (fresh model, the row's settings)."""
    device = torch.device(device)
    return Trainer(
        build(row, gpt_config, cfg.seed, device), row_config(row, cfg, minutes), device=device
    )


def sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_steps(trainer: Trainer, batches: Callable, start: int, n: int) -> float:
    """Seconds for updates ``start .. start + n - 1`` (the learning rate held at its peak)."""
    trainer.set_lr(trainer.config.lr)
    sync(trainer.device)
    began = time.perf_counter()
    for step in range(start, start + n):
        x, y = batches(step)
        trainer.train_step(x.to(trainer.device), y.to(trainer.device))
    sync(trainer.device)
    return time.perf_counter() - began


def paired_ratio(cfg, gpt_config, batches, device, pairs, minutes, steps: int = 100) -> list:
    """Tokens/s of ours over HF's, in ``pairs`` alternating rounds (after one warm-up each),
    each with the settings of its ``minutes`` row (ours compiles where that row does)."""
    ours = trainer_for("ours", cfg, gpt_config, device, minutes)
    ref = trainer_for("hf", cfg, gpt_config, device, minutes)
    timed_steps(ours, batches, 0, 3), timed_steps(ref, batches, 0, 3)
    ratios = []
    for i in range(pairs):
        start = 3 + i * steps
        ratios.append(
            timed_steps(ref, batches, start, steps) / timed_steps(ours, batches, start, steps)
        )
    return ratios


def train_row(row: str, cfg, gpt_config, batches, device, minutes: float):
    """Train one row from scratch with the engine for ``minutes`` of updates (the cosine
    follows the time spent); return ``(model, history)``."""
    trainer = trainer_for(row, cfg, gpt_config, device, minutes)
    history = train(trainer.model, batches, trainer.config, device=device, loss_fn=trainer.loss_fn)
    return trainer.model, history


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=3.0, help="training budget per row")
    p.add_argument("--rows", default="ours,hf,ours-fp32", help=f"comma-separated, from {ROWS}")
    p.add_argument("--config", default="cpu", help="a bookgpt configuration")
    p.add_argument("--data", default=str(corpus.DEFAULT_OUT_DIR), help="a prepared corpus")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--pairs", type=int, default=5, help="rounds of the paired throughput check")
    p.add_argument("--pair-steps", type=int, default=100, help="updates per model per round")
    p.add_argument("--eval-batches", type=int, default=32)
    p.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    cpu_classes.add_option(p)
    return p.parse_args(argv)


def check_rows(rows: list[str], pairs: int) -> str | None:
    """Why the rows cannot run (unknown names, transformers missing), or None."""
    unknown = sorted(set(rows) - set(ROWS))
    if unknown:
        return f"unknown rows {unknown}; choose from {list(ROWS)}"
    if any(r.startswith("hf") for r in rows) or pairs:
        try:
            import transformers  # noqa: F401
        except ImportError:
            return (
                "the reference rows need Hugging Face transformers, a development-only "
                "dependency: pip install -e '.[instructor,dev]' (or drop the hf rows and --pairs 0)"
            )
    return None


def load_data(path: str):
    """(meta, train, val) of a prepared corpus; a clear error when there is none."""
    return corpus.load_meta(path), corpus.load_split(path, "train"), corpus.load_split(path, "val")


def train_rows(rows, cfg, gpt_config, batches, val_batches, device, minutes) -> tuple[list, dict]:
    """Train every row for ``minutes``; (table rows, matmul peaks measured per dtype)."""
    peaks, results = {}, []
    flops_per_step = training_flops(gpt_config, cfg.batch_size, cfg.block_size)
    for row in rows:
        dtype = dtype_of(row, device, cfg, minutes)
        if dtype not in peaks:
            peaks[dtype] = matmul_throughput(1024, device, dtype=dtype)
        model, history = train_row(row, cfg, gpt_config, batches, device, minutes)
        loss = mean_loss(model, val_batches, device, precision_of(row))
        measured = rates(
            history.steps * cfg.batch_size * cfg.block_size, flops_per_step * history.steps,
            history.seconds, peaks[dtype],
        )  # fmt: skip
        results.append((row, history.steps, measured["tokens_per_s"], measured["mfu"], loss))
        print(f"  {row}: {history.steps} updates, val loss {loss:.4f}", flush=True)
    return results, peaks


def ratio_target() -> float:
    """The tokens/s target of this CPU class (as emulated): 1.5 where bf16 is fast, else 1.2."""
    return RATIO_TARGETS.get(cpu.cpu_class(), 1.2)


def report(results, peaks, ratios, minutes: float) -> bool:
    """Print the table and the verdicts; True when every target that was measured is met."""
    print(f"\n| row | updates in {minutes:g} min | tokens/s | MFU | val loss (nats/char) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for row, steps, tps, mfu, loss in results:
        print(f"| {row} | {steps:,} | {tps:,.0f} | {mfu:.2%} | {loss:.4f} |")
    print("\npeak (1024^3 matmul, the machine's limit for MFU): " + ", ".join(
        f"{str(k).removeprefix('torch.')} {v / 1e9:,.0f} GFLOP/s" for k, v in peaks.items()
    ))  # fmt: skip
    met = True
    if ratios:
        ratio, target = statistics.median(ratios), ratio_target()
        met &= ratio >= target
        verdict = "met" if ratio >= target else "MISSED"
        print(
            f"target tokens/s ours/HF on {cpu.cpu_class()} >= {target:g}: {ratio:.3f} ({verdict})"
        )
    ours = next((r for r in results if r[0] == "ours"), None)
    if ours is not None:
        met &= ours[4] <= TARGET_LOSS
        verdict = "met" if ours[4] <= TARGET_LOSS else "MISSED"
        print(f"target val loss <= {TARGET_LOSS} after {minutes:g} min (ours, engine default): "
              f"{ours[4]:.4f} ({verdict})")  # fmt: skip
    return met


def main(argv=None) -> int:
    args, per_class = cpu_classes.start(parse, argv)
    if per_class is not None:
        return per_class
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    problem = check_rows(rows, args.pairs)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    try:
        meta, train_data, val_data = load_data(args.data)
    except (corpus.CorpusError, corpus.CorpusNotPreparedError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    cfg = get_config(args.config, dropout=0.0)
    gpt_config = cfg.gpt_config(meta["vocab_size"])
    val_batches = eval_windows(val_data, replace(cfg, eval_batches=args.eval_batches))

    def batches(step: int):
        return corpus.batch_at(train_data, cfg.batch_size, cfg.block_size, cfg.seed, step)

    n_params = sum(p.numel() for p in GPT(gpt_config).parameters())
    compiled = uses_compile(row_config("ours", cfg, args.minutes), device, cfg.n_embd)
    print(f"bookgpt {cfg.name}: d {cfg.n_embd}, {cfg.n_head} heads, {cfg.n_layer} blocks, "
          f"context {cfg.block_size}, batch {cfg.batch_size}, {n_params:,} parameters; "
          f"{args.minutes:g} min per row on {device} with {torch.get_num_threads()} threads; "
          f"ours (engine default) in {str(dtype_of('ours', device, cfg, args.minutes))[6:]}, "
          f"{'compiled' if compiled else 'eager'}; "
          f"optimizers: ours {describe_optimizer('ours', device)}, "
          f"HF {describe_optimizer('hf', device)}",
          flush=True)  # fmt: skip
    ratios = []
    if args.pairs:
        ratios = paired_ratio(
            cfg, gpt_config, batches, device, args.pairs, args.minutes, args.pair_steps
        )
        print(f"paired throughput, {args.pairs} alternating rounds of {args.pair_steps} "
              f"updates: ours/HF "
              f"tokens/s = {statistics.median(ratios):.3f} (median; rounds "
              + ", ".join(f"{r:.3f}" for r in ratios) + ")", flush=True)  # fmt: skip
    results, peaks = train_rows(rows, cfg, gpt_config, batches, val_batches, device, args.minutes)
    met = report(results, peaks, ratios, args.minutes)
    return 1 if args.strict and not met else 0


if __name__ == "__main__":
    import record  # a sibling module: --results FILE records the tables

    sys.exit(record.run(main))
