"""The course's reference GPT: one config dataclass and one class per component.

Written in the spirit of nanoGPT's ``model.py`` so a student can read it top to bottom. The same
classes rebuild the source documents' models exactly (see :mod:`course_utils.core.configs`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

NORMS = ("layernorm", "rmsnorm")
ACTIVATIONS = ("relu", "gelu", "swiglu")
INITS = ("pytorch-default", "gpt2")
ATTENTION_PATHS = ("fused", "explicit")


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


@dataclass
class GPTConfig:
    """Every architectural choice of the course's decoder-only transformer, in one place."""

    vocab_size: int = 100
    block_size: int = 64  # longest context: the number of rows in the position table
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 32
    d_ff: int | None = None  # MLP hidden width; None means 4 * n_embd
    norm: str = "layernorm"  # "layernorm" or "rmsnorm"
    activation: str = "gelu"  # "relu", "gelu" or "swiglu"
    prenorm: bool = True  # normalize before each sublayer (GPT-2) or after the residual add
    attn_bias: bool = True
    mlp_bias: bool = True
    norm_bias: bool = True  # LayerNorm only; RMSNorm has no bias
    head_bias: bool = False
    tie_weights: bool = True  # the head reuses the token embedding matrix
    dropout: float = 0.0
    init: str = "gpt2"  # "gpt2" (std 0.02, scaled residual projections) or "pytorch-default"
    attention: str = "fused"  # "fused" (F.scaled_dot_product_attention) or "explicit" math
    norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if self.n_embd % self.n_head != 0:
            raise ValueError(
                f"n_head={self.n_head} does not divide n_embd={self.n_embd}: "
                f"n_head must be one of {_divisors(self.n_embd)}"
            )
        if self.d_ff is not None and (not isinstance(self.d_ff, int) or self.d_ff < 1):
            raise ValueError(f"d_ff must be an integer >= 1 or None, got {self.d_ff!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {self.dropout!r}")
        for name, allowed in (
            ("norm", NORMS),
            ("activation", ACTIVATIONS),
            ("init", INITS),
            ("attention", ATTENTION_PATHS),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @property
    def hidden_dim(self) -> int:
        return self.d_ff if self.d_ff is not None else 4 * self.n_embd


def make_norm(config: GPTConfig) -> nn.Module:
    """LayerNorm (mean and variance) or RMSNorm (root mean square only) over the feature axis."""
    if config.norm == "rmsnorm":
        return nn.RMSNorm(config.n_embd, eps=config.norm_eps)
    return nn.LayerNorm(config.n_embd, eps=config.norm_eps, bias=config.norm_bias)


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which position t only sees positions <= t."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.head_dim = config.head_dim
        self.path = config.attention
        self.dropout = config.dropout
        self.qkv = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.attn_bias)
        self.proj = nn.Linear(config.n_embd, config.n_embd, bias=config.attn_bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        # Added to the scores: 0 where query t may see key j (j <= t), -inf above the diagonal.
        # In fp32 the same weights as masked_fill, bit for bit, and faster: the add's backward
        # passes the gradient straight on. Under bf16 autocast the float mask promotes the
        # scores, so the softmax runs in fp32 (tests/test_model.py).
        future = torch.ones(config.block_size, config.block_size, dtype=torch.bool).triu(1)
        causal = torch.zeros(config.block_size, config.block_size).masked_fill(future, -math.inf)
        self.register_buffer("causal_mask", causal, persistent=False)

    def _heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Project to queries, keys and values, each split into heads: (B, h, T, d_h)."""
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        return tuple(t.view(B, T, self.n_head, self.head_dim).transpose(1, 2) for t in (q, k, v))

    def _weights(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        T = q.size(-2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, h, T, T)
        return (scores + self.causal_mask[:T, :T]).softmax(dim=-1)

    def attention_weights(self, x: torch.Tensor) -> torch.Tensor:
        """The softmax attention pattern, (B, h, T, T), for plots and checks."""
        q, k, _ = self._heads(x)
        return self._weights(q, k)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self._heads(x)  # (B, h, T, d_h) each
        # The fused kernel is the fast path everywhere but in bf16 on a CPU, where its backward is
        # several times slower than the explicit matmuls (benchmarks/train_step.py): same math.
        if self.path == "fused" and not (q.dtype == torch.bfloat16 and q.device.type == "cpu"):
            p = self.dropout if self.training else 0.0
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        else:
            y = self.attn_dropout(self._weights(q, k)) @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C): the heads merged back
        return self.resid_dropout(self.proj(y))


class MLP(nn.Module):
    """The position-wise feed-forward network: widen, apply a nonlinearity, project back."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        hidden = config.hidden_dim
        self.activation = config.activation
        self.up = nn.Linear(config.n_embd, hidden, bias=config.mlp_bias)
        if config.activation == "swiglu":
            self.gate = nn.Linear(config.n_embd, hidden, bias=config.mlp_bias)
        self.down = nn.Linear(hidden, config.n_embd, bias=config.mlp_bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.up(x)
        if self.activation == "swiglu":
            h = F.silu(self.gate(x)) * h
        elif self.activation == "gelu":
            h = F.gelu(h)
        else:
            h = F.relu(h)
        return self.dropout(self.down(h))


class Block(nn.Module):
    """One transformer block: attention then MLP, each wrapped in a residual connection."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.prenorm = config.prenorm
        self.ln_1 = make_norm(config)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = make_norm(config)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.prenorm:
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))
        x = self.ln_1(x + self.attn(x))
        return self.ln_2(x + self.mlp(x))


class GPT(nn.Module):
    """Token and position embeddings, a stack of independent blocks, a final norm and a head."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.n_embd)
        self.pos_emb = nn.Embedding(config.block_size, config.n_embd)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = make_norm(config)
        self.head = nn.Linear(config.n_embd, config.vocab_size, bias=config.head_bias)
        if config.tie_weights:
            self.head.weight = self.tok_emb.weight  # one matrix, two uses
        if config.init == "gpt2":
            self.apply_gpt2_init()

    @torch.no_grad()
    def apply_gpt2_init(self) -> None:
        """GPT-2's init as nanoGPT writes it: N(0, 0.02) for every matrix and both embedding
        tables, zero biases, and the residual projections scaled by 1/sqrt(2 * n_layer) so the
        residual stream's variance does not grow with depth. (GPT-2's own code draws its position
        table at std 0.01; lesson 06 measures the difference.)"""
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        residual_std = 0.02 / math.sqrt(2 * self.config.n_layer)
        for block in self.blocks:
            nn.init.normal_(block.attn.proj.weight, mean=0.0, std=residual_std)
            nn.init.normal_(block.mlp.down.weight, mean=0.0, std=residual_std)

    def check_shape(self, idx: torch.Tensor) -> None:
        """Raise a ValueError that names the problem when ``idx`` is not a (B, T) tensor of
        integer ids with 1 <= T <= block_size. Reads only metadata: free on any device."""
        cfg = self.config
        if idx.dim() != 2:
            raise ValueError(f"idx must have shape (B, T), got {tuple(idx.shape)}")
        if idx.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"idx must hold integer token ids (torch.long), got {idx.dtype}")
        T = idx.size(1)
        if not 1 <= T <= cfg.block_size:
            raise ValueError(
                f"sequence length T={T} is out of range: T must lie in [1, block_size] = "
                f"[1, {cfg.block_size}]"
            )

    def check_input(self, idx: torch.Tensor) -> None:
        """:meth:`check_shape`, then every id in [0, vocab_size). The id check reads values
        back, which on a GPU waits for the device: the training loop runs it on the CPU batch
        before the transfer, and ``forward`` only on CPU tensors."""
        self.check_shape(idx)
        low, high = int(idx.min()), int(idx.max())
        if low < 0 or high >= self.config.vocab_size:
            bad = low if low < 0 else high
            raise ValueError(
                f"token id {bad} is out of range: idx values must lie in "
                f"[0, vocab_size - 1] = [0, {self.config.vocab_size - 1}]"
            )

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Map token ids (B, T) to next-token logits (B, T, vocab_size)."""
        if idx.device.type == "cpu" and not torch.compiler.is_compiling():
            self.check_input(idx)  # cheap on the CPU; compiled graphs keep the shape check only
        else:
            self.check_shape(idx)
        pos = torch.arange(idx.size(1), device=idx.device)  # (T,)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(pos))  # (B, T, C)
        for block in self.blocks:
            x = block(x)  # (B, T, C)
        return self.head(self.ln_f(x))  # (B, T, vocab_size)


def lm_loss(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """Mean cross-entropy over the target positions that are not ``ignore_index``."""
    return F.cross_entropy(
        logits.flatten(0, -2).float(), targets.flatten(), ignore_index=ignore_index
    )
