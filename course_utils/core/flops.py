"""FLOP accounting for the course GPT: analytic formulas per component, checked against PyTorch.

Convention: one multiply and one add each count as one FLOP, so a dot product of length K costs
2K (K multiplies, K - 1 adds, rounded up) and an (M x K) @ (K x N) product costs 2MNK. That is
also what ``torch.utils.flop_counter.FlopCounterMode`` counts for ``mm``, ``addmm``, ``bmm`` and
``baddbmm``, so every *matmul* term below equals the counter's figure exactly.

What the counter does not count (and the matmul terms below leave out too): softmax, LayerNorm /
RMSNorm, activations (ReLU, GELU, SiLU), bias adds (``addmm`` is counted as its product only),
residual adds, the ``1/sqrt(d_h)`` scaling, masking, and embedding lookups (a copy, no arithmetic).
The softmax is the only one of these that grows with T^2, so it is kept as a separate estimate:
about 4 FLOPs per attention score (max, subtract-and-exp, sum, divide: ~5 per element, rounded to
4 as is usual), i.e. ~4 B h T^2 per layer.

Symbols: B batch, T sequence length (queries), C = d_model, h heads, D output width,
V vocabulary, L layers, d_ff the MLP hidden width (4C by default).

``python -m course_utils flops [--config NAME] [--d-model C --n-layer L ...]`` prints the table.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import replace

import torch

from .cli import command_parser, run_command
from .model import GPTConfig

SOFTMAX_FLOPS_PER_SCORE = 4  # max, subtract+exp, sum, divide: ~5 per element, rounded to 4


def matmul_flops(M: int, N: int, K: int) -> int:
    """(M x K) @ (K x N): M*N dot products of length K, 2K FLOPs each."""
    return 2 * M * N * K


def linear_flops(B: int, T: int, C: int, D: int) -> int:
    """x (B, T, C) @ W (C, D): B*T rows through one matmul. The bias add is not counted."""
    return matmul_flops(B * T, D, C)


def attention_flops(
    B: int, T: int, C: int, n_head: int, n_key: int | None = None
) -> dict[str, int]:
    """One causal self-attention layer with T queries attending to ``n_key`` keys (T without a
    cache). Matmul terms are exact; 'softmax' is the ~4-FLOPs-per-score estimate.

    q, k, v projections 6BTC^2 and the output projection 2BTC^2 (8BTC^2 together); the scores
    QK^T and the weighted sum AV cost 2 B T n_key C each (summed over heads, h * d_h = C), so
    4BT^2C without a cache. The mask is applied to a full T x T score matrix, so a causal model
    pays for the masked half too."""
    t = T if n_key is None else n_key
    return {
        "qkv projections": 3 * linear_flops(B, T, C, C),
        "output projection": linear_flops(B, T, C, C),
        "scores QK^T": 2 * B * T * t * C,
        "weighted sum AV": 2 * B * T * t * C,
        "softmax (estimate)": SOFTMAX_FLOPS_PER_SCORE * B * n_head * T * t,
    }


def mlp_flops(B: int, T: int, C: int, d_ff: int, gated: bool = False) -> dict[str, int]:
    """Up-projection C -> d_ff and down-projection d_ff -> C (plus a gate for SwiGLU); the
    activation is elementwise and not counted. With d_ff = 4C: 8BTC^2 + 8BTC^2 = 16BTC^2."""
    terms = {"up": linear_flops(B, T, C, d_ff)}
    if gated:
        terms["gate"] = linear_flops(B, T, C, d_ff)
    terms["down"] = linear_flops(B, T, d_ff, C)
    return terms


def head_flops(B: int, T: int, C: int, V: int) -> int:
    """The LM head, C -> V for every row it is applied to. Tied or not, the product is done."""
    return linear_flops(B, T, C, V)


def layer_flops(
    config: GPTConfig, B: int, T: int, n_key: int | None = None, softmax: bool = False
) -> int:
    """One block's matmul FLOPs (plus the softmax estimate if ``softmax``)."""
    attn = attention_flops(B, T, config.n_embd, config.n_head, n_key)
    soft = attn.pop("softmax (estimate)")
    mlp = mlp_flops(B, T, config.n_embd, config.hidden_dim, config.activation == "swiglu")
    return sum(attn.values()) + sum(mlp.values()) + (soft if softmax else 0)


def forward_breakdown(config: GPTConfig, B: int = 1, T: int | None = None) -> dict[str, int]:
    """A full forward pass (logits for all T positions), by component, summed over layers.

    The four matmul rows sum to what FlopCounterMode counts for ``GPT(config)`` with the
    explicit attention path; the softmax row is the estimate, not a matmul."""
    T = config.block_size if T is None else T
    C, L = config.n_embd, config.n_layer
    attn = attention_flops(B, T, C, config.n_head)
    mlp = mlp_flops(B, T, C, config.hidden_dim, config.activation == "swiglu")
    return {
        "attention projections": L * (attn["qkv projections"] + attn["output projection"]),
        "attention scores + AV": L * (attn["scores QK^T"] + attn["weighted sum AV"]),
        "MLP": L * sum(mlp.values()),
        "LM head": head_flops(B, T, C, config.vocab_size),
        "softmax (estimate)": L * attn["softmax (estimate)"],
    }


def forward_flops(
    config: GPTConfig, B: int = 1, T: int | None = None, softmax: bool = False
) -> int:
    """Matmul FLOPs of one forward pass (optionally with the softmax estimate)."""
    parts = forward_breakdown(config, B, T)
    soft = parts.pop("softmax (estimate)")
    return sum(parts.values()) + (soft if softmax else 0)


def forward_flops_per_token(config: GPTConfig, T: int | None = None) -> int:
    """Forward matmul FLOPs divided by the B*T tokens processed (an exact integer):
    L * (8C^2 + 4 C d_ff + 4TC) + 2CV, i.e. L * (24C^2 + 4TC) + 2CV when d_ff = 4C."""
    T = config.block_size if T is None else T
    return forward_flops(config, 1, T) // T


def training_flops(config: GPTConfig, B: int = 1, T: int | None = None) -> int:
    """Forward plus backward: each matmul's backward needs two products of the same size as
    the forward one (the gradient for its input and for its weight), so training is 3x."""
    return 3 * forward_flops(config, B, T)


def matmul_parameters(config: GPTConfig) -> int:
    """Weights that take part in a matmul per token (each costs 2 FLOPs per token): the block
    projections and the head. Embeddings, norms and biases are not matmul weights."""
    C, F = config.n_embd, config.hidden_dim
    mlp = (3 if config.activation == "swiglu" else 2) * C * F
    return config.n_layer * (4 * C * C + mlp) + C * config.vocab_size


# ---- autoregressive generation ------------------------------------------------------------


def generation_flops(
    config: GPTConfig, prompt_len: int, new_tokens: int, B: int = 1, kv_cache: bool = False
) -> int:
    """Matmul FLOPs of generating ``new_tokens`` tokens after a prompt of ``prompt_len``, as the
    generators of :mod:`course_utils.core.generate` do it (within the context window).

    Without a cache, step s re-runs the whole forward on the P + s tokens so far (logits for every
    position). With a KV cache, a prefill runs the prompt once, then each further step feeds one
    token that attends to the cached keys; the head is applied to the last position only."""
    P, n = prompt_len, new_tokens
    if not kv_cache:
        return sum(forward_flops(config, B, P + s) for s in range(n))
    C, V, L = config.n_embd, config.vocab_size, config.n_layer
    total = L * layer_flops(config, B, P) + head_flops(B, 1, C, V)  # prefill
    for s in range(1, n):  # one new token at position P + s - 1, attending to P + s keys
        total += L * layer_flops(config, B, 1, n_key=P + s) + head_flops(B, 1, C, V)
    return total


# ---- measuring ----------------------------------------------------------------------------


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def best_time(fn: Callable[[], object], device, repeats: int = 5, warmup: int = 1) -> float:
    """The fastest of ``repeats`` timed calls of ``fn``, in seconds, after ``warmup`` calls;
    waits for the device to finish before reading the clock. The figure is volatile."""
    device = torch.device(device)
    for _ in range(warmup):
        fn()
    _sync(device)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        _sync(device)
        best = min(best, time.perf_counter() - start)
    return best


def matmul_throughput(
    n: int = 1024, device="cpu", repeats: int = 5, dtype: torch.dtype = torch.float32
) -> float:
    """FLOP/s of an n x n matmul in ``dtype`` on ``device`` (best of ``repeats``): a practical
    peak to measure utilization against."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=g).to(device=device, dtype=dtype)
    b = torch.randn(n, n, generator=g).to(device=device, dtype=dtype)
    return matmul_flops(n, n, n) / best_time(lambda: a @ b, device, repeats)


# ---- the table and the command line -------------------------------------------------------


def flop_table(config: GPTConfig, B: int = 1, T: int | None = None) -> str:
    """Forward FLOPs by component, per forward pass and per token, with shares and totals."""
    T = config.block_size if T is None else T
    parts = forward_breakdown(config, B, T)
    soft = parts.pop("softmax (estimate)")
    forward = sum(parts.values())
    tokens = B * T
    formulas = {
        "attention projections": "L*8*B*T*C^2",
        "attention scores + AV": "L*4*B*T^2*C",
        "MLP": f"L*{'6' if config.activation == 'swiglu' else '4'}*B*T*C*d_ff",
        "LM head": "2*B*T*C*V",
    }
    c = config
    lines = [
        f"d_model C={c.n_embd:,}  n_layer L={c.n_layer}  n_head h={c.n_head}  "
        f"d_ff={c.hidden_dim:,}  vocab V={c.vocab_size:,}  T={T:,}  B={B}",
        f"{'component':<26}{'formula':<18}{'FLOPs per forward':>22}{'per token':>16}{'share':>8}",
        "-" * 90,
    ]
    for name, flops in parts.items():
        lines.append(
            f"{name:<26}{formulas[name]:<18}{flops:>22,}{flops // tokens:>16,}"
            f"{100 * flops / forward:>7.1f}%"
        )
    lines += [
        "-" * 90,
        f"{'forward (matmuls)':<44}{forward:>22,}{forward // tokens:>16,}",
        f"{'softmax (estimate)':<26}{'L*4*B*h*T^2':<18}{soft:>22,}{soft // tokens:>16,}",
        f"{'training step (3x fwd)':<44}{3 * forward:>22,}{3 * forward // tokens:>16,}",
        f"matmul parameters: {matmul_parameters(config):,} "
        f"(x2 = {2 * matmul_parameters(config):,} FLOPs per token, plus attention "
        f"4*L*T*C = {4 * c.n_layer * T * c.n_embd:,})",
    ]
    return "\n".join(lines)


GPT2_SMALL = GPTConfig(vocab_size=50_257, block_size=1024, n_layer=12, n_head=12, n_embd=768)


def configure(parser: argparse.ArgumentParser) -> None:
    """The ``flops`` command's arguments."""
    from .configs import NAMED_CONFIGS

    parser.description = (
        "Forward and training FLOPs of a GPT configuration, by component. Without --config the "
        "base is GPT-2 small; the size flags override the base."
    )
    parser.epilog = (
        "examples:\n  python -m course_utils flops\n  python -m course_utils flops --config "
        "mini-lm-L4 --seq-len 64\n  python -m course_utils flops --d-model 1024 --n-layer 24"
    )
    parser.add_argument("--config", choices=sorted(NAMED_CONFIGS), help="a course config")
    parser.add_argument("--d-model", type=int, help="C, the embedding width")
    parser.add_argument("--n-layer", type=int, help="L, the number of blocks")
    parser.add_argument("--n-head", type=int, help="h, attention heads (divides d-model)")
    parser.add_argument("--d-ff", type=int, help="MLP hidden width (default 4 * d-model)")
    parser.add_argument("--context", type=int, help="block size; also T unless --seq-len")
    parser.add_argument("--vocab", type=int, help="V, the vocabulary size")
    parser.add_argument("--seq-len", type=int, help="T for the table (default: the context)")
    parser.add_argument("--batch", type=int, default=1, help="B (default 1)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the FLOP table of the configuration ``args`` describe."""
    from .configs import named_config

    config = named_config(args.config) if args.config else GPT2_SMALL
    overrides = {
        "n_embd": args.d_model,
        "n_layer": args.n_layer,
        "n_head": args.n_head,
        "d_ff": args.d_ff,
        "block_size": args.context,
        "vocab_size": args.vocab,
    }
    config = replace(config, **{k: v for k, v in overrides.items() if v is not None})
    T = args.seq_len if args.seq_len is not None else config.block_size
    if T < 1 or args.batch < 1:
        raise ValueError("--seq-len and --batch must be >= 1")
    print(flop_table(config, args.batch, T))
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(command_parser("python -m course_utils flops", configure), argv)
