"""Autoregressive generation for :class:`course_utils.core.model.GPT`, without and with a KV cache.

``generate`` re-runs the model on the whole context for every new token, as nanoGPT does.
``generate_cached`` runs the prompt once (the *prefill*), keeps every layer's keys and values,
and then feeds one token per step: the new token's query attends to the cached keys, so nothing
already computed is computed again. It reuses the model's own modules and weights (embeddings,
norms, ``attn.qkv``, ``attn.proj``, the MLP, the head); only the attention over the cache is
written out here. Both pick tokens the same way, so with the same seed they produce the same
tokens (checked in ``tests/test_generate.py``).

Sampling draws from a CPU ``torch.Generator`` on CPU probabilities, so a seeded generation gives
the same tokens on any device.
"""

from __future__ import annotations

import math

import torch

from .model import GPT
from .modes import eval_mode


def pick_next(
    logits: torch.Tensor,
    *,
    greedy: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """(B, V) last-position logits -> (B, 1) next token ids: argmax if ``greedy``, else a sample
    from softmax(logits / temperature), optionally restricted to the ``top_k`` largest."""
    if greedy:
        return logits.argmax(dim=-1, keepdim=True)
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 (or use greedy=True), got {temperature}")
    logits = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.size(-1)), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = logits.softmax(dim=-1).cpu()
    return torch.multinomial(probs, 1, generator=generator).to(logits.device)


@torch.no_grad()
def generate(
    model: GPT,
    idx: torch.Tensor,
    max_new_tokens: int,
    *,
    greedy: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """No cache: each step runs the model on the last ``block_size`` tokens and keeps the last
    row of logits. Returns ``idx`` with ``max_new_tokens`` tokens appended, (B, T + n)."""
    block_size = model.config.block_size
    with eval_mode(model):
        for _ in range(max_new_tokens):
            logits = model(idx[:, -block_size:])[:, -1, :]
            nxt = pick_next(
                logits, greedy=greedy, temperature=temperature, top_k=top_k, generator=generator
            )
            idx = torch.cat([idx, nxt], dim=1)
    return idx


class KVCache:
    """Per layer, the keys and values of every position seen so far: (B, h, t, d_h) each."""

    def __init__(self, n_layer: int) -> None:
        self.keys: list[torch.Tensor | None] = [None] * n_layer
        self.values: list[torch.Tensor | None] = [None] * n_layer

    def __len__(self) -> int:
        """The number of cached positions."""
        return 0 if self.keys[0] is None else self.keys[0].size(2)

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        if self.keys[layer] is not None:
            k = torch.cat([self.keys[layer], k], dim=2)
            v = torch.cat([self.values[layer], v], dim=2)
        self.keys[layer], self.values[layer] = k, v
        return k, v


def _attend_cached(attn, x: torch.Tensor, cache: KVCache, layer: int) -> torch.Tensor:
    """``attn`` (a CausalSelfAttention) for the n new rows ``x`` (B, n, C), whose keys and
    values join the cache; new row i (absolute position t - n + i) sees keys 0 .. t - n + i."""
    B, n, C = x.shape
    q, k, v = attn.qkv(x).split(C, dim=2)
    q, k, v = (z.view(B, n, attn.n_head, attn.head_dim).transpose(1, 2) for z in (q, k, v))
    k, v = cache.append(layer, k, v)
    t = k.size(2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(attn.head_dim)  # (B, h, n, t)
    allowed = torch.ones(n, t, dtype=torch.bool, device=x.device).tril(diagonal=t - n)
    weights = scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1)
    y = (weights @ v).transpose(1, 2).contiguous().view(B, n, C)
    return attn.proj(y)


@torch.no_grad()
def forward_cached(model: GPT, idx_new: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Feed the new tokens ``idx_new`` (B, n) at positions len(cache) .. len(cache) + n - 1 and
    return the logits of the last one, (B, V). Fills the cache as it goes."""
    start, n = len(cache), idx_new.size(1)
    if start + n > model.config.block_size:
        raise ValueError(
            f"positions up to {start + n - 1} do not fit the position table "
            f"(block_size = {model.config.block_size})"
        )
    pos = torch.arange(start, start + n, device=idx_new.device)
    x = model.tok_emb(idx_new) + model.pos_emb(pos)
    for layer, block in enumerate(model.blocks):
        if block.prenorm:
            x = x + _attend_cached(block.attn, block.ln_1(x), cache, layer)
            x = x + block.mlp(block.ln_2(x))
        else:
            x = block.ln_1(x + _attend_cached(block.attn, x, cache, layer))
            x = block.ln_2(x + block.mlp(x))
    return model.head(model.ln_f(x[:, -1, :]))


@torch.no_grad()
def generate_cached(
    model: GPT,
    idx: torch.Tensor,
    max_new_tokens: int,
    *,
    greedy: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """With a KV cache: one prefill over the prompt, then one token per step. Gives the same
    tokens as :func:`generate` as long as everything fits the context, i.e.
    T + max_new_tokens - 1 <= block_size (the last new token is never fed back)."""
    model.check_input(idx)
    T, block_size = idx.size(1), model.config.block_size
    if max_new_tokens > 0 and T + max_new_tokens - 1 > block_size:
        raise ValueError(
            f"prompt length {T} + {max_new_tokens} new tokens - 1 exceeds block_size = "
            f"{block_size}: learned positions stop there, and a cache cannot slide the window"
        )
    cache = KVCache(model.config.n_layer)
    feed = idx
    with eval_mode(model):
        for _ in range(max_new_tokens):
            logits = forward_cached(model, feed, cache)
            feed = pick_next(
                logits, greedy=greedy, temperature=temperature, top_k=top_k, generator=generator
            )
            idx = torch.cat([idx, feed], dim=1)
    return idx
