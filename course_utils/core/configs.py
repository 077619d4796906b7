"""Named configurations of the models that the source documents describe, rebuilt exactly."""

from __future__ import annotations

from dataclasses import replace

from .model import GPTConfig


def mini_lm_config(n_layer: int = 4, **overrides) -> GPTConfig:
    """The stacked-model chapter's ``MiniTransformerLM``: V=100, d=32, h=4, d_ff=128, learned
    positions up to 64, biased attention and MLP, a final LayerNorm, a tied head, and PyTorch's
    default init."""
    config = GPTConfig(
        vocab_size=100,
        block_size=64,
        n_layer=n_layer,
        n_head=4,
        n_embd=32,
        d_ff=128,
        norm="layernorm",
        activation="relu",
        attn_bias=True,
        mlp_bias=True,
        head_bias=False,
        tie_weights=True,
        init="pytorch-default",
    )
    return replace(config, **overrides)


def frozen_decoder_config(tie_weights: bool = True, **overrides) -> GPTConfig:
    """The frozen-decoder audit's decoder: V=8, context 4, d=4, L=2, h=2, d_ff=8, pre-LayerNorm,
    ReLU, attention without bias, biased MLP, final LayerNorm, no output bias."""
    config = GPTConfig(
        vocab_size=8,
        block_size=4,
        n_layer=2,
        n_head=2,
        n_embd=4,
        d_ff=8,
        norm="layernorm",
        activation="relu",
        prenorm=True,
        attn_bias=False,
        mlp_bias=True,
        head_bias=False,
        tie_weights=tie_weights,
        dropout=0.0,
    )
    return replace(config, **overrides)


# The configurations the inspector CLI knows by name.
NAMED_CONFIGS = {
    **{f"mini-lm-L{n}": (lambda n=n: mini_lm_config(n)) for n in (1, 2, 4, 8)},
    "frozen-decoder": frozen_decoder_config,
    "frozen-decoder-untied": lambda: frozen_decoder_config(tie_weights=False),
}


def named_config(name: str) -> GPTConfig:
    """Look a configuration up by name, with an error that lists the known names."""
    try:
        return NAMED_CONFIGS[name]()
    except KeyError:
        known = ", ".join(sorted(NAMED_CONFIGS))
        raise ValueError(f"unknown config {name!r}: choose one of {known}") from None
